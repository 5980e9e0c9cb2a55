# SPDX-License-Identifier: Apache-2.0
"""The caller's float_workspace_buffer (FlashInfer's): the plans' split-KV partial
states live there, one buffer serves several wrappers, a too small buffer is a
kvinfer.Error naming the buffer and the bytes the plan needs."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from conftest import ATOL, assert_close, indptr_of, page_table

import kvinfer


def setup(rng, kv_lens=(500, 7, 260), page_size=4, hq=8, hk=2, d=64):
    table = page_table(rng, list(kv_lens), page_size)
    cache = ref.make(rng, (table[3], 2, page_size, hk, d))
    q = ref.make(rng, (len(kv_lens), hq, d))
    return table, cache, q, (hq, hk, d, page_size)


def expected(q, cache, table):
    per_req = ref.gather_pages(cache[:, 0].astype(np.float64), cache[:, 1].astype(np.float64), *table[:3])
    return np.concatenate([ref.attention(q[b:b + 1].astype(np.float64), kb, vb)[0] for b, (kb, vb) in
                           enumerate(per_req)])


def test_split_states_live_in_the_callers_float_buffer(rng):
    table, cache, q, (hq, hk, d, ps) = setup(rng)
    ws = np.full(8 << 20, 0xAB, np.uint8)
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws)
    w.plan(*table[:3], hq, hk, d, ps, fixed_split_size=4)  # 16-token chunks: long requests split
    out = w.run(q, cache)
    assert (ws != 0xAB).any(), "the split-KV partial states were not written to float_workspace_buffer"
    assert_close(out, expected(q, cache, table), ATOL["float16"], "out")


def test_one_float_buffer_serves_several_wrappers(rng):
    table, cache, q, (hq, hk, d, ps) = setup(rng)
    ws = np.zeros(8 << 20, np.uint8)
    a = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws)
    b = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws)
    a.plan(*table[:3], hq, hk, d, ps, fixed_split_size=4)
    b.plan(*table[:3], hq, hk, d, ps, fixed_split_size=8)
    ref_out = expected(q, cache, table)
    for w in (a, b, a):  # run one after the other on one stream, as FlashInfer's layers do
        assert_close(w.run(q, cache), ref_out, ATOL["float16"], "out")


def test_too_small_buffer_names_the_bytes(rng):
    table, cache, q, (hq, hk, d, ps) = setup(rng)
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(np.zeros(64, np.uint8))
    with pytest.raises(kvinfer.Error, match=r"float_workspace_buffer = 64 bytes: the plan needs \d+ bytes"):
        w.plan(*table[:3], hq, hk, d, ps, fixed_split_size=4)
    # a larger buffer, and the caller's int buffer too
    ws, iws = np.zeros(8 << 20, np.uint8), np.zeros(1 << 20, np.uint8)
    w.reset_workspace_buffer(ws, iws)
    w.plan(*table[:3], hq, hk, d, ps, fixed_split_size=4)
    assert (iws != 0).any(), "the plan's schedule was not written to int_workspace_buffer"
    assert_close(w.run(q, cache), expected(q, cache, table), ATOL["float16"], "out")
    with pytest.raises(kvinfer.Error, match=r"int_workspace_buffer = 16 bytes: the plan needs \d+ bytes"):
        w.reset_workspace_buffer(ws, np.zeros(16, np.uint8))


def test_misaligned_buffer(rng):
    buf = np.zeros((1 << 20) + 1, np.uint8)
    with pytest.raises(kvinfer.Error, match=r"float_workspace_buffer = .*: must be 16-byte aligned"):
        kvinfer.BatchPrefillWithRaggedKVCacheWrapper(buf[1:] if buf[1:].ctypes.data % 16 else buf[3:])


def test_every_wrapper_takes_the_buffer(rng):
    ws = np.zeros(8 << 20, np.uint8)
    for w in (kvinfer.BatchPrefillWithPagedKVCacheWrapper(ws), kvinfer.BatchPrefillWithRaggedKVCacheWrapper(ws),
              kvinfer.MultiLevelCascadeAttentionWrapper(2, ws), kvinfer.BatchMLAPagedAttentionWrapper(ws),
              kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws)):
        assert w.float_workspace_buffer is ws
        w.reset_workspace_buffer(np.zeros(1 << 20, np.uint8))
    qo = indptr_of([2])
    table = page_table(rng, [9], 4)
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(np.zeros(32, np.uint8))
    w.plan(qo, *table[:3], 4, 4, 64, 4)  # no split: no float bytes needed


def test_host_cost_benchmark_runs(rng, capsys):
    """bench/python/bench_host.py end to end (a few steps), and its C++ timing hook."""
    import importlib.util
    import os

    table, cache, q, (hq, hk, d, ps) = setup(rng)
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(np.zeros(8 << 20, np.uint8))
    w.plan(*table[:3], hq, hk, d, ps)
    out = np.empty_like(q)
    assert w._impl.time_step(q, cache, None, out, 2, 0) > 0
    assert_close(out, expected(q, cache, table), ATOL["float16"], "time_step out")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "python", "bench_host.py")
    spec = importlib.util.spec_from_file_location("bench_host", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import sys
    argv, sys.argv = sys.argv, ["bench_host.py", "--device", "cpu", "--steps", "3", "--batches", "1",
                                "--no-flashinfer"]
    try:
        assert bench.main() == 0
    finally:
        sys.argv = argv
    assert "| kvinfer c++ | 1 |" in capsys.readouterr().out
