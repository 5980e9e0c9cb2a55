# SPDX-License-Identifier: Apache-2.0
"""The attention wrappers and single-request functions on the CPU with numpy arrays,
against the float64 reference: GQA, page sizes 1/5/16, NHD/HND, 5-D and (k, v) caches,
empty requests, causal (bottom-right), window, soft cap, custom masks, RoPE, ALiBi,
base-2 LSE, bf16 and fp8 KV."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from conftest import ATOL, LSE_ATOL, assert_close, indptr_of, page_table, workspace

import kvinfer


def paged_cache(rng, num_pages, page_size, hk, d, dtype, layout, combined):
    """A random page pool: the 5-D tensor (or the (k, v) pair) and its 4-D k, v views."""
    seq = (page_size, hk) if layout == "NHD" else (hk, page_size)
    if combined:
        cache = ref.make(rng, (num_pages, 2, *seq, d), dtype)
        return cache, cache[:, 0], cache[:, 1]
    k = ref.make(rng, (num_pages, *seq, d), dtype)
    v = ref.make(rng, (num_pages, *seq, d), dtype)
    return (k, v), k, v


def fp16_pool(rng, kv_lens, page_size, hk, d):
    """A page table over kv_lens and a combined fp16 NHD cache for it: (table, cache, k4, v4)."""
    table = page_table(rng, kv_lens, page_size)
    return (table, *paged_cache(rng, table[3], page_size, hk, d, "float16", "NHD", True))


def paged_reference(q, k4, v4, qo_indptr, table, layout, dtype, **kw):
    indptr, indices, last, _ = table
    per_req = ref.gather_pages(ref.as_f64(k4, dtype), ref.as_f64(v4, dtype), indptr, indices, last, layout)
    outs, lses = [], []
    q64 = ref.as_f64(q, dtype)
    for b, (kb, vb) in enumerate(per_req):
        o, lse = ref.attention(q64[qo_indptr[b]:qo_indptr[b + 1]], kb, vb, **kw)
        outs.append(o)
        lses.append(lse)
    return np.concatenate(outs), np.concatenate(lses)


def out64(x, dtype):
    return ref.as_f64(x, dtype)


# ---------------------------------------------------------------- decode


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("combined", [True, False])
@pytest.mark.parametrize("page_size,hq,hk", [(16, 32, 8), (5, 8, 8), (1, 12, 4)])
def test_decode_matches_reference(rng, layout, combined, page_size, hq, hk):
    d = 64
    kv_lens = [37, 0, 1, 80, 16]
    table = page_table(rng, kv_lens, page_size)
    cache, k4, v4 = paged_cache(rng, table[3], page_size, hk, d, "float16", layout, combined)
    q = ref.make(rng, (len(kv_lens), hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(table[0], table[1], table[2], hq, hk, d, page_size, q_data_type=np.float16)
    out, lse = w.run(q, cache, return_lse=True)
    assert out.dtype == np.float16 and out.shape == (len(kv_lens), hq, d)
    assert lse.dtype == np.float32 and lse.shape == (len(kv_lens), hq)
    o_ref, lse_ref = paged_reference(q, k4, v4, indptr_of([1] * len(kv_lens)), table, layout, "float16")
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")
    assert (out[1] == 0).all() and np.isneginf(lse[1]).all()  # the empty request


@pytest.mark.parametrize("d", [16, 96, 512])
def test_decode_head_dims(rng, d):
    """Head dims beyond 64/128/256: any multiple of 16 up to 512 (on CUDA, 512 in the
    `default` preset, the others in `full`)."""
    page_size, hq, hk = 16, 8, 2
    kv_lens = [40, 0, 17]
    table, cache, k4, v4 = fp16_pool(rng, kv_lens, page_size, hk, d)
    q = ref.make(rng, (len(kv_lens), hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size, q_data_type="float16", pos_encoding_mode="ROPE_LLAMA")
    out, lse = w.run(q, cache, return_lse=True)
    o_ref, lse_ref = paged_reference(q, k4, v4, indptr_of([1] * 3), table, "NHD", "float16",
                                     pos_encoding="ROPE_LLAMA")
    assert out.shape == (len(kv_lens), hq, d)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


@pytest.mark.parametrize("options", [
    dict(window_left=20), dict(logits_soft_cap=5.0), dict(sm_scale=0.3), dict(pos_encoding_mode="ROPE_LLAMA"),
    dict(pos_encoding_mode="ALIBI"), dict(pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5, rope_scale=2.0)])
def test_decode_options(rng, options):
    page_size, hq, hk, d = 16, 8, 2, 64
    kv_lens = [50, 7, 33]
    table, cache, k4, v4 = fp16_pool(rng, kv_lens, page_size, hk, d)
    q = ref.make(rng, (len(kv_lens), hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size, q_data_type="float16", **options)
    out, lse = w.run(q, cache, return_lse=True)
    kw = {"window_left": options.get("window_left", -1), "soft_cap": options.get("logits_soft_cap", 0.0),
          "sm_scale": options.get("sm_scale"), "pos_encoding": options.get("pos_encoding_mode", "NONE"),
          "rope_theta": options.get("rope_theta", 1e4), "rope_scale": options.get("rope_scale", 1.0)}
    o_ref, lse_ref = paged_reference(q, k4, v4, indptr_of([1] * 3), table, "NHD", "float16", **kw)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


def test_decode_bf16_raw_bits_and_out_buffers(rng):
    """bf16 from numpy: uint16 arrays read as the dtype the plan names; out=/lse= are
    written in place and returned by identity."""
    page_size, hq, hk, d = 16, 16, 4, 128
    kv_lens = [64, 19]
    table = page_table(rng, kv_lens, page_size)
    cache, k4, v4 = paged_cache(rng, table[3], page_size, hk, d, "bfloat16", "HND", False)
    q = ref.make(rng, (2, hq, d), "bfloat16")
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), "HND")
    w.plan(*table[:3], hq, hk, d, page_size, q_data_type="bfloat16", kv_data_type="bfloat16")
    out = np.full((2, hq, d), 0xFFFF, np.uint16)  # NaN bits: every element must be written
    lse = np.full((2, hq), np.nan, np.float32)
    res = w.run(q, cache, out=out, lse=lse, return_lse=True)
    assert res[0] is out and res[1] is lse
    o_ref, lse_ref = paged_reference(q, k4, v4, indptr_of([1, 1]), table, "HND", "bfloat16")
    assert_close(out64(out, "bfloat16"), o_ref, ATOL["bfloat16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


def test_decode_fp8_kv_with_scales(rng):
    ml = pytest.importorskip("ml_dtypes")
    page_size, hq, hk, d = 16, 8, 2, 64
    kv_lens = [40, 3]
    table = page_table(rng, kv_lens, page_size)
    k_scale, v_scale = 0.5, 2.0
    kv32 = rng.standard_normal((table[3], 2, page_size, hk, d)).astype(np.float32)
    cache = kv32.astype(ml.float8_e4m3fn)
    q = ref.make(rng, (2, hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size, q_data_type="float16", kv_data_type="float8_e4m3fn")
    out = w.run(q, cache, k_scale=k_scale, v_scale=v_scale)
    # fp8 values dequantised: k * k_scale, v * v_scale
    kv = cache.astype(np.float64)
    o_ref, _ = paged_reference(q, kv[:, 0] * k_scale, kv[:, 1] * v_scale, indptr_of([1, 1]), table, "NHD",
                               "float32")
    assert_close(out, o_ref, 2e-2, "out")
    # the same cache as raw uint8 storage, the dtype named by the plan
    out_raw = w.run(q, cache.view(np.uint8), k_scale=k_scale, v_scale=v_scale)
    assert (out_raw.view(np.uint16) == out.view(np.uint16)).all()


def test_decode_q_scale_multiplies_logits(rng):
    page_size, hq, hk, d = 16, 4, 4, 64
    table, cache, k4, v4 = fp16_pool(rng, [30], page_size, hk, d)
    q = ref.make(rng, (1, hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size)  # FlashInfer's default q_data_type: float16
    out = w.run(q, cache, q_scale=0.5, k_scale=0.5)
    o_ref, _ = paged_reference(q, k4, v4, indptr_of([1]), table, "NHD", "float16", sm_scale=0.25 / 8.0)
    assert_close(out, o_ref, ATOL["float16"], "out")


def test_decode_replan_and_fixed_split(rng):
    """One wrapper, several plans; fixed_split_size (in pages) gives batch-invariant
    results: a request's output does not depend on its neighbours."""
    page_size, hq, hk, d = 4, 8, 2, 64
    kv_lens = [300, 5, 77]
    table, cache, k4, v4 = fp16_pool(rng, kv_lens, page_size, hk, d)
    q = ref.make(rng, (3, hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size, fixed_split_size=8)
    full = w.run(q, cache)
    indptr, indices, last, _ = table
    w.plan(np.array([0, indptr[1]], np.int32), indices[:indptr[1]], last[:1], hq, hk, d, page_size,
           fixed_split_size=8)
    alone = w.run(q[:1], cache)
    assert (alone.view(np.uint16) == full[:1].view(np.uint16)).all()
    o_ref, _ = paged_reference(q, k4, v4, indptr_of([1] * 3), table, "NHD", "float16")
    assert_close(full, o_ref, ATOL["float16"], "out")


# ---------------------------------------------------------------- paged prefill


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("combined", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_paged_prefill_matches_reference(rng, layout, combined, causal):
    page_size, hq, hk, d = 5, 8, 2, 64
    qo_lens, kv_lens = [7, 1, 12, 3, 0], [20, 9, 12, 0, 4]  # 12 > 0 with causal: fully masked rows
    table = page_table(rng, kv_lens, page_size)
    cache, k4, v4 = paged_cache(rng, table[3], page_size, hk, d, "float16", layout, combined)
    qo_indptr = indptr_of(qo_lens)
    q = ref.make(rng, (qo_indptr[-1], hq, d))
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(qo_indptr, *table[:3], hq, hk, d, page_size, causal=causal, q_data_type="float16")
    out, lse = w.run(q, cache, return_lse=True)
    o_ref, lse_ref = paged_reference(q, k4, v4, qo_indptr, table, layout, "float16", causal=causal)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


@pytest.mark.parametrize("packed", [False, True])
def test_paged_prefill_custom_mask(rng, packed):
    page_size, hq, hk, d = 16, 4, 2, 64
    qo_lens, kv_lens = [5, 9], [21, 9]
    table, cache, k4, v4 = fp16_pool(rng, kv_lens, page_size, hk, d)
    qo_indptr = indptr_of(qo_lens)
    q = ref.make(rng, (qo_indptr[-1], hq, d))
    masks = [rng.random((a, b)) < 0.6 for a, b in zip(qo_lens, kv_lens)]
    flat = np.concatenate([m.reshape(-1) for m in masks])
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace())
    if packed:
        packed_mask, _ = kvinfer.segment_packbits(flat, indptr_of([a * b for a, b in zip(qo_lens, kv_lens)]),
                                                  bitorder="little")
        # causal=True with a mask: the mask replaces it (FlashInfer's rule)
        w.plan(qo_indptr, *table[:3], hq, hk, d, page_size, packed_custom_mask=packed_mask, causal=True)
    else:
        w.plan(qo_indptr, *table[:3], hq, hk, d, page_size, custom_mask=flat)
    out, lse = w.run_return_lse(q, cache)
    per_req = ref.gather_pages(ref.as_f64(k4, "float16"), ref.as_f64(v4, "float16"), *table[:3])
    o_ref = np.concatenate([ref.attention(q[qo_indptr[b]:qo_indptr[b + 1]].astype(np.float64), kb, vb,
                                          mask=masks[b])[0] for b, (kb, vb) in enumerate(per_req)])
    assert_close(out, o_ref, ATOL["float16"], "out")


def test_paged_prefill_lse_base_ln(rng):
    page_size, hq, hk, d = 16, 4, 4, 64
    table, cache, k4, v4 = fp16_pool(rng, [40], page_size, hk, d)
    q = ref.make(rng, (6, hq, d))
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace())
    w.plan(np.array([0, 6], np.int32), *table[:3], hq, hk, d, page_size, causal=True)
    _, lse2 = w.run(q, cache, return_lse=True)
    _, lse_e = w.run(q, cache, return_lse=True, lse_base="ln")
    np.testing.assert_allclose(lse_e, lse2 * np.log(2.0), rtol=1e-6)


# ---------------------------------------------------------------- ragged prefill


@pytest.mark.parametrize("options", [
    dict(causal=True), dict(causal=True, window_left=4), dict(logits_soft_cap=10.0), dict(),
    dict(causal=True, pos_encoding_mode="ROPE_LLAMA")])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_ragged_prefill_matches_reference(rng, options, layout):
    hq, hk, d = 8, 4, 64
    qo_lens, kv_lens = [6, 17, 1, 0], [10, 17, 30, 5]
    qo_indptr, kv_indptr = indptr_of(qo_lens), indptr_of(kv_lens)
    q = ref.make(rng, (qo_indptr[-1], hq, d))
    k = ref.make(rng, (kv_indptr[-1], hk, d))
    v = ref.make(rng, (kv_indptr[-1], hk, d))
    kk, vv = (k, v) if layout == "NHD" else (np.ascontiguousarray(k.transpose(1, 0, 2)),
                                             np.ascontiguousarray(v.transpose(1, 0, 2)))
    w = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace(), layout)
    w.plan(qo_indptr, kv_indptr, hq, hk, d, **options)
    out, lse = w.run(q, kk, vv, return_lse=True)
    kw = {"causal": options.get("causal", False), "window_left": options.get("window_left", -1),
          "soft_cap": options.get("logits_soft_cap", 0.0), "pos_encoding": options.get("pos_encoding_mode", "NONE")}
    o_ref, lse_ref = ref.ragged(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), qo_indptr,
                                kv_indptr, **kw)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


def test_ragged_prefill_head_dim_vo_and_strided_inputs(rng):
    """head_dim_qk 192 / head_dim_vo 128, q and k as non-contiguous views (only the
    last dim is contiguous), bf16 output from fp16 inputs."""
    hq, hk = 4, 4
    qo_lens, kv_lens = [3, 8], [8, 8]
    qo_indptr, kv_indptr = indptr_of(qo_lens), indptr_of(kv_lens)
    q_big = ref.make(rng, (qo_indptr[-1], 2 * hq, 192))
    q = q_big[:, ::2]  # head stride 2 * 192
    k = ref.make(rng, (kv_indptr[-1], hk, 192))
    v = ref.make(rng, (kv_indptr[-1], hk, 128))
    w = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace())
    w.plan(qo_indptr, kv_indptr, hq, hk, 192, 128, causal=True, o_data_type="bfloat16")
    out = w.run(q, k, v)
    assert out.shape == (11, hq, 128)
    o_ref, _ = ref.ragged(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), qo_indptr, kv_indptr,
                          causal=True)
    assert_close(out64(out, "bfloat16"), o_ref, ATOL["bfloat16"], "out")


# ---------------------------------------------------------------- single request


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_single_decode(rng, layout):
    hq, hk, d, n = 8, 2, 128, 45
    q = ref.make(rng, (hq, d))
    k = ref.make(rng, (n, hk, d))
    v = ref.make(rng, (n, hk, d))
    kk, vv = (k, v) if layout == "NHD" else (k.transpose(1, 0, 2).copy(), v.transpose(1, 0, 2).copy())
    out, lse = kvinfer.single_decode_with_kv_cache(q, kk, vv, kv_layout=layout, window_left=10, return_lse=True)
    o_ref, lse_ref = ref.attention(q[None].astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                   window_left=10)
    assert_close(out, o_ref[0], ATOL["float16"], "out")
    assert_close(lse, lse_ref[0], LSE_ATOL, "lse")


def test_single_prefill(rng):
    hq, hk, d = 8, 8, 64
    q = ref.make(rng, (9, hq, d))
    k = ref.make(rng, (14, hk, d))
    v = ref.make(rng, (14, hk, d))
    mask = rng.random((9, 14)) < 0.5
    out = kvinfer.single_prefill_with_kv_cache(q, k, v, custom_mask=mask)
    o_ref, _ = ref.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask=mask)
    assert_close(out, o_ref, ATOL["float16"], "out")
    out, lse = kvinfer.single_prefill_with_kv_cache_return_lse(q, k, v, causal=True, logits_soft_cap=3.0)
    o_ref, lse_ref = ref.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=True,
                                   soft_cap=3.0)
    assert_close(out, o_ref, ATOL["float16"], "out")
    assert_close(lse, lse_ref, LSE_ATOL, "lse")


def test_ml_dtypes_bfloat16_arrays(rng):
    """numpy arrays of ml_dtypes.bfloat16 cross as uint16 views (DLPack cannot name the
    type) and keep their dtype; outputs come back as ml_dtypes.bfloat16."""
    ml = pytest.importorskip("ml_dtypes")
    hq, hk, d = 4, 2, 64
    q = rng.standard_normal((5, hq, d)).astype(ml.bfloat16)
    k = rng.standard_normal((12, hk, d)).astype(ml.bfloat16)
    v = rng.standard_normal((12, hk, d)).astype(ml.bfloat16)
    out = kvinfer.single_prefill_with_kv_cache(q, k, v, causal=True)
    assert out.dtype == ml.bfloat16
    o_ref, _ = ref.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=True)
    assert_close(out.astype(np.float64), o_ref, ATOL["bfloat16"], "out")


def test_fixed_capacity_mode_on_the_cpu(rng):
    """use_cuda_graph=True is a fixed-capacity plan on any device: plan() copies the page
    indices into the caller's buffer (run() reads them there) and re-plans with other
    lengths within the capacity give correct results."""
    page_size, hq, hk, d = 16, 8, 2, 64
    max_batch, max_pages = 4, 40
    indptr_buf = np.zeros(max_batch + 1, np.int32)
    indices_buf = np.full(max_pages, -1, np.int32)
    last_buf = np.zeros(max_batch, np.int32)
    cache = ref.make(rng, (max_pages, 2, page_size, hk, d))
    w = kvinfer.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(workspace(), indptr_buf, indices_buf, last_buf)
    assert w.is_cuda_graph_enabled
    for kv_lens in ([100, 3, 40, 17], [5, 200], [1]):
        indptr, indices, last, _ = page_table(rng, kv_lens, page_size, extra_pages=max_pages - sum(
            (n + page_size - 1) // page_size for n in kv_lens))
        q = ref.make(rng, (len(kv_lens), hq, d))
        w.plan(indptr, indices, last, hq, hk, d, page_size)
        assert (indices_buf[:len(indices)] == indices).all()
        out = w.run(q, cache)
        o_ref, _ = paged_reference(q, cache[:, 0], cache[:, 1], indptr_of([1] * len(kv_lens)),
                                   (indptr, indices, last, max_pages), "NHD", "float16")
        assert_close(out, o_ref, ATOL["float16"], f"out {kv_lens}")
    with pytest.raises(kvinfer.Error, match=r"batch_size = 5: must not exceed the capacity's max_batch \(4\)"):
        indptr, indices, last, _ = page_table(rng, [1] * 5, page_size)
        w.plan(indptr, indices, last, hq, hk, d, page_size)

    # paged prefill: the first plan fixes the query rows (FlashInfer's rule)
    pw = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace(), use_cuda_graph=True,
                                                     qo_indptr_buf=np.zeros(max_batch + 1, np.int32),
                                                     paged_kv_indptr_buf=indptr_buf, paged_kv_indices_buf=indices_buf,
                                                     paged_kv_last_page_len_buf=last_buf)
    for qo_lens, kv_lens in (([8, 4], [30, 9]), ([3, 3, 6], [12, 50, 6])):
        indptr, indices, last, _ = page_table(rng, kv_lens, page_size, extra_pages=max_pages - sum(
            (n + page_size - 1) // page_size for n in kv_lens))
        qo_indptr = indptr_of(qo_lens)
        q = ref.make(rng, (qo_indptr[-1], hq, d))
        pw.plan(qo_indptr, indptr, indices, last, hq, hk, d, page_size, causal=True)
        out = pw.run(q, cache)
        o_ref, _ = paged_reference(q, cache[:, 0], cache[:, 1], qo_indptr, (indptr, indices, last, max_pages), "NHD",
                                   "float16", causal=True)
        assert_close(out, o_ref, ATOL["float16"], f"prefill out {qo_lens}")
