# SPDX-License-Identifier: Apache-2.0
"""Cascade attention, state merges and MLA on the CPU against the float64 reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref
from conftest import ATOL, LSE_ATOL, assert_close, indptr_of, page_table, workspace

import kvinfer


def states(rng, n, h, d, dtype=np.float16, empty_rows=()):
    v = rng.standard_normal((n, h, d)).astype(dtype)
    s = (rng.standard_normal((n, h)) * 4).astype(np.float32)
    for r in empty_rows:
        s[r] = -np.inf
        v[r] = 0
    return v, s


def test_merge_state(rng):
    va, sa = states(rng, 9, 4, 64, empty_rows=(2,))
    vb, sb = states(rng, 9, 4, 64, empty_rows=(2, 5))
    v, s = kvinfer.merge_state(va, sa, vb, sb)
    v_ref, s_ref = ref.merge(va.astype(np.float64), sa.astype(np.float64), vb.astype(np.float64),
                             sb.astype(np.float64))
    assert v.dtype == np.float16 and s.dtype == np.float32
    assert_close(v, v_ref, ATOL["float16"], "v")
    assert_close(s, s_ref, 1e-5, "s")
    assert (v[2] == 0).all() and np.isneginf(s[2]).all()  # two empty states


def test_merge_state_in_place_with_mask(rng):
    v, s = states(rng, 6, 2, 64, dtype=np.float32)
    vo, so = states(rng, 6, 2, 64, dtype=np.float32)
    mask = np.array([True, False, True, True, False, False])
    v0, s0 = v.copy(), s.copy()
    kvinfer.merge_state_in_place(v, s, vo, so, mask)
    v_ref, s_ref = ref.merge(v0.astype(np.float64), s0.astype(np.float64), vo.astype(np.float64),
                             so.astype(np.float64))
    v_ref[~mask], s_ref[~mask] = v0[~mask], s0[~mask]
    assert_close(v, v_ref, ATOL["float32"], "v")
    assert_close(s, s_ref, 1e-5, "s")


def test_merge_states(rng):
    n, k, h, d = 5, 3, 4, 64
    v = rng.standard_normal((n, k, h, d)).astype(np.float16)
    s = (rng.standard_normal((n, k, h)) * 3).astype(np.float32)
    vm, sm = kvinfer.merge_states(v, s)
    assert vm.shape == (n, h, d) and sm.shape == (n, h)
    v_ref, s_ref = v[:, 0].astype(np.float64), s[:, 0].astype(np.float64)
    for i in range(1, k):
        v_ref, s_ref = ref.merge(v_ref, s_ref, v[:, i].astype(np.float64), s[:, i].astype(np.float64))
    assert_close(vm, v_ref, ATOL["float16"], "v")
    assert_close(sm, s_ref, 1e-5, "s")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_cascade_equals_attention_over_concatenated_kv(rng, causal, layout):
    """Two levels: a prefix shared by every request (level 0), then each request's own
    pages (level 1, causal there): the same as attention over prefix + own keys."""
    page_size, hq, hk, d = 4, 8, 2, 64
    prefix_len, own_lens, qo_lens = 13, [9, 20, 5], [3, 1, 5]
    batch = len(own_lens)
    prefix_pages = (prefix_len + page_size - 1) // page_size
    own_pages = [(n + page_size - 1) // page_size for n in own_lens]
    num_pages = prefix_pages + sum(own_pages) + 2
    perm = rng.permutation(num_pages).astype(np.int32)
    prefix_idx, own_idx = perm[:prefix_pages], perm[prefix_pages:prefix_pages + sum(own_pages)]
    seq = (page_size, hk) if layout == "NHD" else (hk, page_size)
    cache = ref.make(rng, (num_pages, 2, *seq, d))
    qo_indptr = indptr_of(qo_lens)
    nnz = int(qo_indptr[-1])
    q = ref.make(rng, (nnz, hq, d))
    levels_qo = [np.array([0, nnz], np.int32), qo_indptr]
    levels_indptr = [np.array([0, prefix_pages], np.int32), indptr_of(own_pages)]
    levels_indices = [prefix_idx, own_idx]
    last = lambda n: n - ((n + page_size - 1) // page_size - 1) * page_size  # noqa: E731
    levels_last = [np.array([last(prefix_len)], np.int32), np.array([last(n) for n in own_lens], np.int32)]
    w = kvinfer.MultiLevelCascadeAttentionWrapper(2, workspace(), layout)
    w.plan(levels_qo, levels_indptr, levels_indices, levels_last, hq, hk, d, page_size, causal=causal)
    out = w.run(q, cache)
    out2, lse = w.run(q, (cache[:, 0], cache[:, 1]), return_lse=True)
    assert (out.view(np.uint16) == out2.view(np.uint16)).all()
    k4, v4 = ref.as_f64(cache[:, 0], "float16"), ref.as_f64(cache[:, 1], "float16")
    pre = ref.gather_pages(k4, v4, levels_indptr[0], prefix_idx, levels_last[0], layout)[0]
    own = ref.gather_pages(k4, v4, levels_indptr[1], own_idx, levels_last[1], layout)
    outs, lses = [], []
    for b in range(batch):
        kb = np.concatenate([pre[0], own[b][0]])
        vb = np.concatenate([pre[1], own[b][1]])
        o, l2 = ref.attention(q[qo_indptr[b]:qo_indptr[b + 1]].astype(np.float64), kb, vb, causal=causal)
        outs.append(o)
        lses.append(l2)
    assert_close(out, np.concatenate(outs), ATOL["float16"], "out")
    assert_close(lse, np.concatenate(lses), LSE_ATOL, "lse")


# ---------------------------------------------------------------- MLA


def mla_reference(q_nope, q_pe, ckv, kpe, qo_lens, kv_lens, sm_scale, causal):
    outs, lses = [], []
    q0 = k0 = 0
    for lq, lk in zip(qo_lens, kv_lens):
        qn, qp = q_nope[q0:q0 + lq], q_pe[q0:q0 + lq]
        c, p = ckv[k0:k0 + lk], kpe[k0:k0 + lk]
        s = (np.einsum("qhd,kd->hqk", qn, c) + np.einsum("qhd,kd->hqk", qp, p)) * sm_scale
        if causal:
            i_pos = np.arange(lq) + lk - lq
            s = np.where(np.arange(lk)[None, None, :] <= i_pos[None, :, None], s, -np.inf)
        m = s.max(axis=-1, initial=-np.inf)
        fin = np.isfinite(m)
        e = np.where(fin[..., None], np.exp(s - np.where(fin, m, 0)[..., None]), 0)
        den = e.sum(-1)
        o = np.einsum("hqk,kd->qhd", e, c) / np.where(den > 0, den, 1).T[..., None]
        outs.append(o)
        lses.append(np.where(fin, (m + np.log(np.where(den > 0, den, 1))) / math.log(2), -np.inf).T)
        q0 += lq
        k0 += lk
    return np.concatenate(outs), np.concatenate(lses)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_mla_matches_reference(rng, causal, packed):
    h, page_size = 16, 8
    qo_lens, kv_lens = [1, 4, 2], [30, 9, 17]
    table = page_table(rng, kv_lens, page_size)
    indptr, indices, _, num_pages = table
    cache = ref.make(rng, (num_pages, page_size, 576))
    qo_indptr = indptr_of(qo_lens)
    nnz = int(qo_indptr[-1])
    q = ref.make(rng, (nnz, h, 576))
    sm_scale = 1.0 / math.sqrt(128 + 64)
    w = kvinfer.BatchMLAPagedAttentionWrapper(workspace())
    w.plan(qo_indptr, indptr, indices, np.array(kv_lens, np.int32), h, 512, 64, page_size, causal, sm_scale,
           np.float16, np.float16)
    if packed:
        out, lse = w.run(query=q, kv_cache=cache, return_lse=True)
    else:
        out, lse = w.run(q[..., :512], q[..., 512:], cache[..., :512], cache[..., 512:], return_lse=True)
    # tokens of each request, in order, from its pages
    toks = []
    for b, n in enumerate(kv_lens):
        pages = indices[indptr[b]:indptr[b + 1]]
        toks.append(cache[pages].reshape(-1, 576)[:n])
    kv = np.concatenate(toks).astype(np.float64)
    o_ref, lse_ref = mla_reference(q[..., :512].astype(np.float64), q[..., 512:].astype(np.float64), kv[:, :512],
                                   kv[:, 512:], qo_lens, kv_lens, sm_scale, causal)
    assert out.shape == (nnz, h, 512)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")
    _, lse_e = w.run(query=q, kv_cache=cache, return_lse=True, return_lse_base_on_e=True)
    assert_close(lse_e, lse_ref * math.log(2), LSE_ATOL, "lse base e")


def test_mla_status_is_none_on_the_cpu_where_run_rejects_a_bad_page_id(rng):
    """status() reports what the GPU kernels met; the CPU checks in run() and raises."""
    h, page_size = 16, 8
    kv_lens = [30, 9]
    indptr, indices, _, num_pages = page_table(rng, kv_lens, page_size)
    cache = ref.make(rng, (num_pages, page_size, 576))
    q = ref.make(rng, (2, h, 576))
    w = kvinfer.BatchMLAPagedAttentionWrapper(workspace())
    assert w.status() is None  # before any plan
    w.plan(indptr_of([1, 1]), indptr, indices, np.array(kv_lens, np.int32), h, 512, 64, page_size, False,
           0.07, np.float16, np.float16)
    w.run(query=q, kv_cache=cache)
    assert w.status() is None
    indices[int(indptr[1])] = num_pages + 5  # read by run(), where the plan left it
    with pytest.raises(kvinfer.Error, match=r"kv_indices\[%d\]" % int(indptr[1])):
        w.run(query=q, kv_cache=cache)
    assert w.status() is None
