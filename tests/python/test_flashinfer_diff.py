# SPDX-License-Identifier: Apache-2.0
"""The same calls through `import kvinfer` and `import flashinfer` (FlashInfer 0.7.4,
from the bundle bench/flashinfer/stage.sh carries, or an installed one), outputs
compared; and every FlashInfer parameter of the shared API present in kvinfer with
FlashInfer's default. Skips without flashinfer, torch or a GPU. FlashInfer modules that
were not prebuilt are JIT-compiled only with KVINFER_FI_JIT=1 (else that case skips)."""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np
import pytest
from conftest import indptr_of, page_table

import kvinfer

torch = pytest.importorskip("torch")


def _import_flashinfer():
    try:
        import flashinfer
        return flashinfer
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "bench", "flashinfer"))
    try:
        import fi_bundle
        fi_bundle.activate(allow_jit=os.environ.get("KVINFER_FI_JIT") == "1", quiet=True)
        import flashinfer
        return flashinfer
    except Exception:  # no bundle, another Python, an import error: nothing to compare with
        return None


fi = _import_flashinfer()
pytestmark = [
    pytest.mark.skipif(fi is None, reason="flashinfer is not importable (bench/flashinfer/stage.sh bundle)"),
    pytest.mark.skipif(not (torch.cuda.is_available() and kvinfer.cuda_backend_built()),
                       reason="needs a GPU and kvinfer's CUDA backend"),
]

HQ, HK, D, PS = 32, 8, 128, 16
BF16 = torch.bfloat16


def _run_or_skip(fn):
    try:
        return fn()
    except Exception as e:  # a FlashInfer module that was not prebuilt (JIT disabled)
        if "JIT" in type(e).__name__ or "jit" in str(e).lower():
            pytest.skip(f"flashinfer module not prebuilt: {type(e).__name__}")
        raise


def _params(fn):
    return [p for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


SHARED = [
    "BatchDecodeWithPagedKVCacheWrapper.__init__", "BatchDecodeWithPagedKVCacheWrapper.run",
    "BatchPrefillWithPagedKVCacheWrapper.__init__", "BatchPrefillWithPagedKVCacheWrapper.plan",
    "BatchPrefillWithPagedKVCacheWrapper.run", "BatchPrefillWithRaggedKVCacheWrapper.__init__",
    "BatchPrefillWithRaggedKVCacheWrapper.plan", "BatchPrefillWithRaggedKVCacheWrapper.run",
    "MultiLevelCascadeAttentionWrapper.__init__", "MultiLevelCascadeAttentionWrapper.plan",
    "BatchMLAPagedAttentionWrapper.__init__", "BatchMLAPagedAttentionWrapper.run",
    "single_decode_with_kv_cache", "single_prefill_with_kv_cache", "append_paged_kv_cache",
    "append_paged_mla_kv_cache", "get_batch_indices_positions", "get_seq_lens", "merge_state",
    "merge_state_in_place", "merge_states", "packbits", "segment_packbits",
]


def _resolve(mod, name):
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part)
    return inspect.unwrap(obj)


@pytest.mark.parametrize("name", SHARED)
def test_flashinfer_parameters_exist_in_kvinfer(name):
    fi_params = _params(_resolve(fi, name))
    kv = {p.name: p for p in _params(_resolve(kvinfer, name))}
    kv_order = list(kv)
    positional = [p.name for p in fi_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert kv_order[:len(positional)] == positional, f"{name}: positional order"
    for p in fi_params:
        assert p.name in kv, f"{name}: FlashInfer's {p.name} is missing"
        if p.default is not inspect.Parameter.empty:
            assert repr(kv[p.name].default) == repr(p.default), f"{name}: default of {p.name}"


def test_decode_plan_parameters():
    """FlashInfer 0.7.4's decode plan() takes its options through **kwargs (_plan_impl)."""
    fi_params = _params(inspect.unwrap(fi.BatchDecodeWithPagedKVCacheWrapper._plan_impl))
    kv = {p.name: p for p in _params(kvinfer.BatchDecodeWithPagedKVCacheWrapper.plan)}
    for p in fi_params:
        assert p.name in kv
        if p.default is not inspect.Parameter.empty:
            assert repr(kv[p.name].default) == repr(p.default), p.name


def _table(rng, kv_lens):
    indptr, indices, last, num_pages = page_table(rng, kv_lens, PS)
    return [torch.from_numpy(x).cuda() for x in (indptr, indices, last)], num_pages


def _compare(a, b, atol, what):
    a, b = a.float(), b.float()
    fin = torch.isfinite(b)
    assert torch.equal(torch.isfinite(a), fin), f"{what}: -inf positions"
    err = (a[fin] - b[fin]).abs().max().item() if fin.any() else 0.0
    assert err <= atol, f"{what}: max |kvinfer - flashinfer| = {err:.3g}"


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_decode_same_results(rng, layout):
    kv_lens = [1, 77, 300, 16, 1000]
    (indptr, indices, last), num_pages = _table(rng, kv_lens)
    shape = (num_pages, 2, PS, HK, D) if layout == "NHD" else (num_pages, 2, HK, PS, D)
    cache = torch.randn(shape, dtype=BF16, device="cuda")
    q = torch.randn(len(kv_lens), HQ, D, dtype=BF16, device="cuda")
    results = []
    for lib in (kvinfer, fi):
        w = lib.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(128 << 20, dtype=torch.uint8, device="cuda"), layout)
        w.plan(indptr, indices, last, HQ, HK, D, PS, q_data_type=BF16, kv_data_type=BF16)
        results.append(_run_or_skip(lambda: w.run(q, cache, return_lse=True)))
    _compare(results[0][0], results[1][0], 2e-2, "out")
    _compare(results[0][1], results[1][1], 2e-2, "lse")


@pytest.mark.parametrize("causal", [False, True])
def test_ragged_prefill_same_results(rng, causal):
    qo_lens, kv_lens = [17, 128, 1, 300], [17, 500, 64, 300]
    qo_indptr = torch.from_numpy(indptr_of(qo_lens)).cuda()
    kv_indptr = torch.from_numpy(indptr_of(kv_lens)).cuda()
    q = torch.randn(sum(qo_lens), HQ, D, dtype=BF16, device="cuda")
    k = torch.randn(sum(kv_lens), HK, D, dtype=BF16, device="cuda")
    v = torch.randn(sum(kv_lens), HK, D, dtype=BF16, device="cuda")
    results = []
    for lib in (kvinfer, fi):
        w = lib.BatchPrefillWithRaggedKVCacheWrapper(torch.zeros(128 << 20, dtype=torch.uint8, device="cuda"),
                                                     backend="fa2")
        w.plan(qo_indptr, kv_indptr, HQ, HK, D, causal=causal, q_data_type=BF16)
        results.append(_run_or_skip(lambda: w.run(q, k, v, return_lse=True)))
    _compare(results[0][0], results[1][0], 2e-2, "out")
    _compare(results[0][1], results[1][1], 2e-2, "lse")


def test_paged_prefill_same_results(rng):
    qo_lens, kv_lens = [5, 64, 1], [100, 64, 33]
    (indptr, indices, last), num_pages = _table(rng, kv_lens)
    qo_indptr = torch.from_numpy(indptr_of(qo_lens)).cuda()
    cache = torch.randn(num_pages, 2, PS, HK, D, dtype=BF16, device="cuda")
    q = torch.randn(sum(qo_lens), HQ, D, dtype=BF16, device="cuda")
    results = []
    for lib in (kvinfer, fi):
        w = lib.BatchPrefillWithPagedKVCacheWrapper(torch.zeros(128 << 20, dtype=torch.uint8, device="cuda"))
        w.plan(qo_indptr, indptr, indices, last, HQ, HK, D, PS, causal=True, q_data_type=BF16)
        results.append(_run_or_skip(lambda: w.run(q, cache, return_lse=True)))
    _compare(results[0][0], results[1][0], 2e-2, "out")
    _compare(results[0][1], results[1][1], 2e-2, "lse")


def test_free_functions_same_results(rng):
    va, vb = (torch.randn(64, HQ, D, dtype=BF16, device="cuda") for _ in range(2))
    sa, sb = (torch.randn(64, HQ, dtype=torch.float32, device="cuda") for _ in range(2))
    got = [_run_or_skip(lambda: lib.merge_state(va, sa, vb, sb)) for lib in (kvinfer, fi)]
    _compare(got[0][0], got[1][0], 2e-2, "merge_state v")
    _compare(got[0][1], got[1][1], 1e-4, "merge_state s")
    x = torch.rand(1000, device="cuda") < 0.5
    for order in ("big", "little"):
        got = [_run_or_skip(lambda: lib.packbits(x, order)) for lib in (kvinfer, fi)]
        assert torch.equal(got[0], got[1])
    kv_indptr = torch.tensor([0, 3, 3, 7], dtype=torch.int32, device="cuda")
    last = torch.tensor([5, 0, 16], dtype=torch.int32, device="cuda")
    assert torch.equal(kvinfer.get_seq_lens(kv_indptr, last, PS), fi.get_seq_lens(kv_indptr, last, PS).int())
