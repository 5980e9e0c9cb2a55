# SPDX-License-Identifier: Apache-2.0
"""Context parallelism from Python on the CPU: kvinfer.shard_page_table splits a page
table over simulated ranks, each rank decodes its shard with return_lse, and
kvinfer.merge_states over the ranks equals the float64 reference over the whole cache."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from conftest import ATOL, assert_close, indptr_of, page_table, workspace
from test_attention import paged_cache, paged_reference

import kvinfer


@pytest.mark.parametrize("policy", ["contiguous", "striped"])
@pytest.mark.parametrize("world", [1, 3, 8])
def test_sharded_decode_merged_equals_whole_cache(rng, policy, world):
    hq, hk, d, ps = 8, 2, 64, 16
    kv_lens = [37, 0, 1, 80, 16, 300]
    table = page_table(rng, kv_lens, ps)
    cache, k4, v4 = paged_cache(rng, table[3], ps, hk, d, "float16", "NHD", True)
    q = ref.make(rng, (len(kv_lens), hq, d))
    outs, lses, keys = [], [], np.zeros(len(kv_lens), dtype=np.int64)
    for rank in range(world):
        indptr, indices, last = kvinfer.shard_page_table(*table[:3], ps, rank, world, policy)
        assert indptr.dtype == np.int32 and indices.dtype == np.int32 and last.dtype == np.int32
        keys += kvinfer.get_seq_lens(indptr, last, ps)
        w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
        w.plan(indptr, indices, last, hq, hk, d, ps, q_data_type=np.float16)
        out, lse = w.run(q, cache, return_lse=True)
        outs.append(out.astype(np.float32))
        lses.append(lse)
    assert keys.tolist() == kv_lens  # every key on exactly one rank
    v = np.stack(outs, axis=1)  # [batch, world, hq, d]
    s = np.stack(lses, axis=1)
    merged, merged_lse = kvinfer.merge_states(v, s)
    o_ref, _ = paged_reference(q, k4, v4, indptr_of([1] * len(kv_lens)), table, "NHD", "float16")
    assert_close(merged, o_ref, 2 * ATOL["float16"], "merged out")
    assert np.isneginf(merged_lse[1]).all()  # the empty request


def test_shard_page_table_errors():
    indptr, indices, last = (np.array(x, dtype=np.int32) for x in ([0, 1], [0], [4]))
    with pytest.raises(kvinfer.Error, match="rank"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 3, 2)
    with pytest.raises(kvinfer.Error, match="policy"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 0, 2, "ring")
    with pytest.raises(kvinfer.Error, match="world"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 0, 0)
