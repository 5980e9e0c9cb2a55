# SPDX-License-Identifier: Apache-2.0
"""kvinfer with torch tensors: on the CPU (any torch) and on a GPU (torch CUDA tensors,
the CUDA backend): every wrapper against the float64 reference, mixed devices, CUDA-graph
capture / re-plan / replay, stream semantics, no allocation in run(), the torch custom
ops under torch.compile(fullgraph=True). Skips without torch; the CUDA cases skip
without a GPU or a build without the CUDA backend. Shapes stay within the `minimal`
instance preset (bfloat16, head_dim 128) on the GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref
from conftest import ATOL, LSE_ATOL, assert_close, indptr_of, page_table

import kvinfer

torch = pytest.importorskip("torch")

HAVE_CUDA = bool(torch.cuda.is_available() and kvinfer.cuda_backend_built() and kvinfer.cuda_device_count() > 0)
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="needs a GPU and kvinfer's CUDA backend")
DEVICES = ["cpu"] + (["cuda"] if HAVE_CUDA else [])

HQ, HK, D, PS = 32, 8, 128, 16


def tt(x: np.ndarray, device, dtype=torch.bfloat16):
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(dtype).to(device)


def f64(x) -> np.ndarray:
    return x.detach().float().cpu().numpy().astype(np.float64)


def ws(device):
    return torch.zeros(64 << 20, dtype=torch.uint8, device=device)


def ints(x, device):
    return torch.from_numpy(np.asarray(x, np.int32)).to(device)


def decode_problem(rng, device, kv_lens, layout="NHD", dtype=torch.bfloat16):
    indptr, indices, last, num_pages = page_table(rng, kv_lens, PS)
    seq = (PS, HK) if layout == "NHD" else (HK, PS)
    cache = tt(rng.standard_normal((num_pages, 2, *seq, D)), device, dtype)
    q = tt(rng.standard_normal((len(kv_lens), HQ, D)), device, dtype)
    return q, cache, (indptr, indices, last)


def decode_reference(q, cache, table, layout="NHD", qo_indptr=None, **kw):
    k4, v4 = f64(cache[:, 0]), f64(cache[:, 1])
    per_req = ref.gather_pages(k4, v4, *table, layout)
    q64 = f64(q)
    qo_indptr = indptr_of([1] * len(per_req)) if qo_indptr is None else qo_indptr
    outs, lses = zip(*[ref.attention(q64[qo_indptr[b]:qo_indptr[b + 1]], kb, vb, **kw)
                       for b, (kb, vb) in enumerate(per_req)])
    return np.concatenate(outs), np.concatenate(lses)


# ---------------------------------------------------------------- correctness


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("pair", [False, True])
def test_decode(rng, device, layout, pair):
    q, cache, table = decode_problem(rng, device, [1, 300, 17, 0, 64], layout)
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws(device), layout)
    w.plan(ints(table[0], device), ints(table[1], device), ints(table[2], device), HQ, HK, D, PS,
           q_data_type=torch.bfloat16)
    kv = (cache[:, 0], cache[:, 1]) if pair else cache
    out, lse = w.run(q, kv, return_lse=True)
    assert out.device == q.device and out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    o_ref, lse_ref = decode_reference(q, cache, table, layout)
    assert_close(f64(out), o_ref, ATOL["bfloat16"], "out")
    assert_close(f64(lse), lse_ref, LSE_ATOL, "lse")


@pytest.mark.parametrize("device", DEVICES)
def test_paged_and_ragged_prefill(rng, device):
    qo_lens, kv_lens = [5, 40, 1], [70, 40, 9]
    q, cache, table = decode_problem(rng, device, kv_lens)
    qo_indptr = indptr_of(qo_lens)
    q = tt(rng.standard_normal((qo_indptr[-1], HQ, D)), device)
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(ws(device))
    w.plan(ints(qo_indptr, device), *(ints(x, device) for x in table), HQ, HK, D, PS, causal=True,
           q_data_type="bfloat16")
    out = w.run(q, cache)
    o_ref, _ = decode_reference(q, cache, table, qo_indptr=qo_indptr, causal=True)
    assert_close(f64(out), o_ref, ATOL["bfloat16"], "paged out")

    kv_indptr = indptr_of(kv_lens)
    k = tt(rng.standard_normal((kv_indptr[-1], HK, D)), device)
    v = tt(rng.standard_normal((kv_indptr[-1], HK, D)), device)
    r = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(ws(device))
    r.plan(ints(qo_indptr, device), ints(kv_indptr, device), HQ, HK, D, causal=True, q_data_type=torch.bfloat16)
    out, lse = r.run(q, k, v, return_lse=True)
    o_ref, lse_ref = ref.ragged(f64(q), f64(k), f64(v), qo_indptr, kv_indptr, causal=True)
    assert_close(f64(out), o_ref, ATOL["bfloat16"], "ragged out")
    assert_close(f64(lse), lse_ref, LSE_ATOL, "ragged lse")


@pytest.mark.parametrize("device", DEVICES)
def test_single_and_merge_and_page_ops(rng, device):
    q = tt(rng.standard_normal((HQ, D)), device)
    k = tt(rng.standard_normal((50, HK, D)), device)
    v = tt(rng.standard_normal((50, HK, D)), device)
    out = kvinfer.single_decode_with_kv_cache(q, k, v)
    assert_close(f64(out), ref.attention(f64(q)[None], f64(k), f64(v))[0][0], ATOL["bfloat16"], "single decode")
    qp = tt(rng.standard_normal((7, HQ, D)), device)
    out = kvinfer.single_prefill_with_kv_cache(qp, k, v, causal=True)
    assert_close(f64(out), ref.attention(f64(qp), f64(k), f64(v), causal=True)[0], ATOL["bfloat16"], "single prefill")

    va, vb = tt(rng.standard_normal((9, HQ, D)), device), tt(rng.standard_normal((9, HQ, D)), device)
    sa = torch.from_numpy(rng.standard_normal((9, HQ)).astype(np.float32)).to(device)
    sb = torch.from_numpy(rng.standard_normal((9, HQ)).astype(np.float32)).to(device)
    vm, sm = kvinfer.merge_state(va, sa, vb, sb)
    v_ref, s_ref = ref.merge(f64(va), f64(sa), f64(vb), f64(sb))
    assert_close(f64(vm), v_ref, ATOL["bfloat16"], "merge v")
    assert_close(f64(sm), s_ref, 1e-5, "merge s")

    kv_lens = [20, 3]
    indptr, indices, last, num_pages = page_table(rng, kv_lens, PS)
    cache = torch.zeros(num_pages, 2, PS, HK, D, dtype=torch.bfloat16, device=device)
    ak, av = tt(rng.standard_normal((23, HK, D)), device), tt(rng.standard_normal((23, HK, D)), device)
    ip, ix, lp = ints(indptr, device), ints(indices, device), ints(last, device)
    bi, pos = kvinfer.get_batch_indices_positions(ints(indptr_of(kv_lens), device), kvinfer.get_seq_lens(ip, lp, PS),
                                                  23)
    kvinfer.append_paged_kv_cache(ak, av, bi, pos, cache, ix, ip, lp)
    got = ref.gather_pages(f64(cache[:, 0]), f64(cache[:, 1]), indptr, indices, last)
    assert np.array_equal(np.concatenate([g[0] for g in got]), f64(ak))
    assert np.array_equal(np.concatenate([g[1] for g in got]), f64(av))

    x = torch.from_numpy(rng.random(45) < 0.5).to(device)
    assert np.array_equal(kvinfer.packbits(x, "little").cpu().numpy(),
                          np.packbits(x.cpu().numpy(), bitorder="little"))
    y, new_indptr = kvinfer.segment_packbits(x, ints([0, 10, 45], device), "big")
    assert isinstance(y, torch.Tensor) and y.device == x.device
    assert new_indptr.cpu().tolist() == [0, 2, 7]


@pytest.mark.parametrize("device", DEVICES)
def test_mla(rng, device):
    h, page_size = 16, 64
    qo_lens, kv_lens = [1, 3], [100, 65]
    indptr, indices, _, num_pages = page_table(rng, kv_lens, page_size)
    cache = tt(rng.standard_normal((num_pages, page_size, 576)), device)
    qo_indptr = indptr_of(qo_lens)
    q = tt(rng.standard_normal((qo_indptr[-1], h, 576)), device)
    sm_scale = 1.0 / math.sqrt(192)
    w = kvinfer.BatchMLAPagedAttentionWrapper(ws(device))
    w.plan(ints(qo_indptr, device), ints(indptr, device), ints(indices, device), ints(kv_lens, device), h, 512, 64,
           page_size, True, sm_scale, torch.bfloat16, torch.bfloat16)
    out = w.run(query=q, kv_cache=(cache[..., :512], cache[..., 512:]))
    c = f64(cache)
    toks = np.concatenate([c[indices[indptr[b]:indptr[b + 1]]].reshape(-1, 576)[:n] for b, n in enumerate(kv_lens)])
    qq = f64(q)
    outs = []
    k0 = 0
    for b, (lq, lk) in enumerate(zip(qo_lens, kv_lens)):
        qs = qq[qo_indptr[b]:qo_indptr[b + 1]]
        s = np.einsum("qhd,kd->hqk", qs, toks[k0:k0 + lk]) * sm_scale
        i_pos = np.arange(lq) + lk - lq
        s = np.where(np.arange(lk)[None, None] <= i_pos[None, :, None], s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        outs.append(np.einsum("hqk,kd->qhd", p / p.sum(-1, keepdims=True), toks[k0:k0 + lk, :512]))
        k0 += lk
    assert_close(f64(out), np.concatenate(outs), ATOL["bfloat16"], "mla out")


# ---------------------------------------------------------------- devices, graphs, streams


@needs_cuda
def test_mixed_devices_are_an_error(rng):
    q, cache, table = decode_problem(rng, "cuda", [30, 5])
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cuda"))
    w.plan(*(ints(x, "cuda") for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    with pytest.raises(kvinfer.Error, match=r"q.device = cpu: must be on cuda:0"):
        w.run(q.cpu(), cache)
    with pytest.raises(kvinfer.Error, match=r"paged_kv_cache"):
        w.run(q, cache.cpu())
    with pytest.raises(kvinfer.Error, match=r"kv_indices"):  # run() reads the indices: on the wrapper's device
        w.plan(ints(table[0], "cuda"), ints(table[1], "cpu"), ints(table[2], "cuda"), HQ, HK, D, PS,
               q_data_type=torch.bfloat16)
    cpu_w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cpu"))
    cpu_w.plan(*(ints(x, "cpu") for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    with pytest.raises(kvinfer.Error, match=r"q.device = cuda:0: must be on cpu"):
        cpu_w.run(q, cache.cpu())


@needs_cuda
@pytest.mark.parametrize("kind", ["decode", "paged_prefill"])
def test_cuda_graph_capture_replan_replay(rng, kind):
    """Capture run() once; re-plan with other batch compositions (within the buffers'
    capacity); replay: correct results each time."""
    max_batch, max_pages, max_rows = 8, 256, 64
    indptr_buf = torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda")
    indices_buf = torch.zeros(max_pages, dtype=torch.int32, device="cuda")
    last_buf = torch.zeros(max_batch, dtype=torch.int32, device="cuda")
    cache = tt(rng.standard_normal((max_pages, 2, PS, HK, D)), "cuda")
    if kind == "decode":
        w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cuda"), use_cuda_graph=True,
                                                       paged_kv_indptr_buffer=indptr_buf,
                                                       paged_kv_indices_buffer=indices_buf,
                                                       paged_kv_last_page_len_buffer=last_buf)
    else:
        w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(ws("cuda"), use_cuda_graph=True,
                                                        qo_indptr_buf=torch.zeros(max_batch + 1, dtype=torch.int32,
                                                                                  device="cuda"),
                                                        paged_kv_indptr_buf=indptr_buf,
                                                        paged_kv_indices_buf=indices_buf,
                                                        paged_kv_last_page_len_buf=last_buf,
                                                        max_total_num_rows=max_rows)
    q_buf = torch.zeros(max_rows, HQ, D, dtype=torch.bfloat16, device="cuda")
    out_buf = torch.zeros(max_rows, HQ, D, dtype=torch.bfloat16, device="cuda")
    if kind == "decode":
        cases = [([3, 100, 40, 7, 300, 1, 64, 16], None), ([700, 2, 90], None), ([5] * 8, None), ([0, 33], None)]
    else:
        cases = [([30, 100, 40], [8, 8, 8]), ([700, 12], [32, 12]), ([5] * 8, [1] * 8), ([64, 0], [64, 0])]
    graph = None
    for kv_lens, qo_lens in cases:
        qo_lens = [1] * len(kv_lens) if qo_lens is None else qo_lens
        indptr, indices, last, _ = page_table(rng, kv_lens, PS, extra_pages=max_pages - sum(
            (n + PS - 1) // PS for n in kv_lens))
        qo_indptr = indptr_of(qo_lens)
        rows = int(qo_indptr[-1])
        q_buf.zero_()
        q_buf[:rows] = tt(rng.standard_normal((rows, HQ, D)), "cuda")
        if kind == "decode":
            w.plan(ints(indptr, "cuda"), ints(indices, "cuda"), ints(last, "cuda"), HQ, HK, D, PS,
                   q_data_type=torch.bfloat16)
        else:
            w.plan(ints(qo_indptr, "cpu"), ints(indptr, "cpu"), ints(indices, "cuda"), ints(last, "cpu"), HQ, HK, D,
                   PS, causal=True, q_data_type=torch.bfloat16)
        if graph is None:
            # Captured once with this plan's rows; a replay after a re-plan reads and writes
            # the rows of that plan at the same addresses (the buffers hold max_rows).
            q_cap, out_cap = q_buf[:rows], out_buf[:rows]
            w.run(q_cap, cache, out=out_cap)  # warm-up outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                w.run(q_cap, cache, out=out_cap)
        out_buf.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, _ = decode_reference(q_buf[:rows], cache, (indptr, indices, last), qo_indptr=qo_indptr,
                                    causal=kind == "paged_prefill")
        assert_close(f64(out_buf[:rows]), o_ref, ATOL["bfloat16"], f"replay {kv_lens}")


@needs_cuda
def test_runs_on_torchs_current_stream_and_on_stream_arg(rng):
    """run() is ordered after the work queued before it on torch's current stream (or
    the stream= given): a q written there after a delay is the q it reads."""
    q, cache, table = decode_problem(rng, "cuda", [200, 31, 77])
    q_new = tt(rng.standard_normal(tuple(q.shape)), "cuda")
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cuda"))
    w.plan(*(ints(x, "cuda") for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    o_ref, _ = decode_reference(q_new, cache, table)
    side = torch.cuda.Stream()
    for use_arg in (False, True):
        q_run = q.clone()
        out = torch.full_like(q, float("nan"))
        torch.cuda.synchronize()
        if use_arg:
            with torch.cuda.stream(side):
                torch.cuda._sleep(200_000_000)
                q_run.copy_(q_new)
            w.run(q_run, cache, out=out, stream=side)  # current stream: the default one
        else:
            with torch.cuda.stream(side):
                torch.cuda._sleep(200_000_000)
                q_run.copy_(q_new)
                w.run(q_run, cache, out=out)
        side.synchronize()
        assert_close(f64(out), o_ref, ATOL["bfloat16"], f"stream (stream= given: {use_arg})")


@needs_cuda
def test_run_allocates_nothing(rng):
    q, cache, table = decode_problem(rng, "cuda", [500, 9, 1000, 64])
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cuda"))
    w.plan(*(ints(x, "cuda") for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], HQ, dtype=torch.float32, device="cuda")
    w.run(q, cache, out=out, lse=lse)
    torch.cuda.synchronize()
    free0, torch_bytes0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
    for _ in range(100):
        w.run(q, cache, out=out, lse=lse)
    torch.cuda.synchronize()
    assert torch.cuda.mem_get_info()[0] == free0 and torch.cuda.memory_allocated() == torch_bytes0


# ---------------------------------------------------------------- torch.compile


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(rng, device):
    """A model step calling kvinfer's wrappers and free functions compiles as one graph
    (the torch custom ops with fake implementations) and gives the eager results."""
    q, cache, table = decode_problem(rng, device, [40, 7])
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws(device))
    w.plan(*(ints(x, device) for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    other_v = tt(rng.standard_normal(tuple(q.shape)), device)
    other_s = torch.zeros(q.shape[0], HQ, dtype=torch.float32, device=device)

    def step(q, cache, other_v, other_s):
        o, lse = w.run(q * 2.0, cache, return_lse=True)
        o, lse = kvinfer.merge_state(o, lse, other_v, other_s)
        return o.float().sum(-1), lse

    eager = step(q, cache, other_v, other_s)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got = compiled(q, cache, other_v, other_s)
    torch.testing.assert_close(got[0], eager[0])
    torch.testing.assert_close(got[1], eager[1])
    # a re-plan is seen by the compiled graph (the plan lives in the wrapper)
    table2 = page_table(rng, [90, 3], PS, extra_pages=0)
    assert table2[3] == cache.shape[0]
    w.plan(*(ints(x, device) for x in table2[:3]), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    torch.testing.assert_close(compiled(q, cache, other_v, other_s)[1], step(q, cache, other_v, other_s)[1])


def test_torch_custom_ops_opcheck(rng):
    """torch.library.opcheck: schemas, fake implementations and mutation annotations."""
    from kvinfer import _torch_ops
    q, cache, table = decode_problem(rng, "cpu", [40, 7])
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws("cpu"))
    w.plan(*(ints(x, "cpu") for x in table), HQ, HK, D, PS, q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], HQ, dtype=torch.float32)
    torch.library.opcheck(_torch_ops.attention_run, (w._handle, q, cache, None, out, lse, 1.0, 1.0, None),
                          test_utils=("test_schema", "test_faketensor"))
    x = torch.from_numpy(rng.random(20) < 0.5)
    torch.library.opcheck(_torch_ops.packbits, (x, torch.empty(3, dtype=torch.uint8), "big"),
                          test_utils=("test_schema", "test_faketensor"))
