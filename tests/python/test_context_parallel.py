# SPDX-License-Identifier: Apache-2.0
"""Context parallelism from Python on the CPU: kvinfer.shard_page_table splits a page
table over simulated ranks, each rank decodes its shard with return_lse, and
kvinfer.merge_states over the ranks (directly, and through kvinfer.distributed.merge_over_ranks
with an all-gather of the simulated ranks) equals the float64 reference over the whole cache."""

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

    # The same through merge_over_ranks, as each rank would call it: the all-gather
    # returns every rank's array of the kind it is given, in rank order.
    def all_gather(x):
        return np.stack(outs if x.ndim == 3 else lses)

    for rank in range(world):
        o_r, lse_r = kvinfer.distributed.merge_over_ranks(outs[rank], lses[rank], all_gather=all_gather)
        np.testing.assert_array_equal(o_r, merged)
        np.testing.assert_array_equal(lse_r, merged_lse)


def test_merge_over_ranks_errors():
    out, lse = np.zeros((3, 2, 16), np.float32), np.zeros((3, 2), np.float32)
    with pytest.raises(kvinfer.Error, match="lse.shape"):
        kvinfer.distributed.merge_over_ranks(out, lse[:2], all_gather=lambda x: x[None])
    with pytest.raises(kvinfer.Error, match="out.shape"):
        kvinfer.distributed.merge_over_ranks(out[0], lse, all_gather=lambda x: x[None])
    with pytest.raises(kvinfer.Error, match="all_gather"):
        kvinfer.distributed.merge_over_ranks(out, lse, all_gather=lambda x: x)  # no rank dimension
    try:
        import torch.distributed as dist
        initialised = dist.is_available() and dist.is_initialized()
    except ImportError:
        initialised = False
    if not initialised:  # no torch, or no process group: the error says what to do
        with pytest.raises(kvinfer.Error, match="all_gather|init_process_group"):
            kvinfer.distributed.merge_over_ranks(out, lse)


def test_shard_page_table_errors():
    indptr, indices, last = (np.array(x, dtype=np.int32) for x in ([0, 1], [0], [4]))
    with pytest.raises(kvinfer.Error, match="rank"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 3, 2)
    with pytest.raises(kvinfer.Error, match="policy"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 0, 2, "ring")
    with pytest.raises(kvinfer.Error, match="world"):
        kvinfer.shard_page_table(indptr, indices, last, 16, 0, 0)


# Two processes over torch.distributed's gloo backend (CPU tensors): each decodes its
# striped shard and merge_over_ranks gathers and merges; both must hold the whole
# cache's attention. Needs torch (the GPU machine has it; CI does not).
_WORKER = r"""
import sys
import numpy as np
import torch
import torch.distributed as dist
import kvinfer

rank, world, port, data, out_path, lse_path = sys.argv[1:7]
rank, world = int(rank), int(world)
z = np.load(data)
hq, hk, d, ps = (int(x) for x in z["shape"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
indptr, indices, last = kvinfer.shard_page_table(torch.from_numpy(z["indptr"]), torch.from_numpy(z["indices"]),
                                                 torch.from_numpy(z["last"]), ps, rank, world, "striped")
w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(8 << 20, dtype=torch.uint8))
w.plan(indptr, indices, last, hq, hk, d, ps, q_data_type=torch.float16)
out, lse = w.run(torch.from_numpy(z["q"]), torch.from_numpy(z["cache"]), return_lse=True)
out, lse = kvinfer.distributed.merge_over_ranks(out.float(), lse)
np.save(out_path, out.numpy())
np.save(lse_path, lse.numpy())
dist.destroy_process_group()
"""


def test_merge_over_ranks_with_torch_distributed(rng, tmp_path):
    torch = pytest.importorskip("torch")
    import os
    import socket
    import subprocess
    import sys

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    hq, hk, d, ps, world = 8, 2, 64, 16, 2
    kv_lens = [37, 0, 80, 300]
    table = page_table(rng, kv_lens, ps)
    cache, k4, v4 = paged_cache(rng, table[3], ps, hk, d, "float16", "NHD", True)
    q = ref.make(rng, (len(kv_lens), hq, d))
    data = tmp_path / "case.npz"
    np.savez(data, indptr=table[0], indices=table[1], last=table[2], q=q, cache=cache,
             shape=np.array([hq, hk, d, ps]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(r), str(world), str(port), str(data),
                               str(tmp_path / f"out{r}.npy"), str(tmp_path / f"lse{r}.npy")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    for p in procs:
        output, _ = p.communicate(timeout=180)
        assert p.returncode == 0, output.decode()
    o_ref, _ = paged_reference(q, k4, v4, indptr_of([1] * len(kv_lens)), table, "NHD", "float16")
    outs = [np.load(tmp_path / f"out{r}.npy") for r in range(world)]
    lses = [np.load(tmp_path / f"lse{r}.npy") for r in range(world)]
    for r in range(world):
        assert_close(outs[r], o_ref, 2 * ATOL["float16"], f"rank {r}'s merged out")
        np.testing.assert_array_equal(outs[r], outs[0])
        np.testing.assert_array_equal(lses[r], lses[0])
    assert np.isneginf(lses[0][1]).all()  # the empty request


@pytest.mark.parametrize("pos_encoding_mode", ["NONE", "ALIBI"])
def test_position_offsets_place_the_blocks_of_a_causal_windowed_prompt(rng, pos_encoding_mode):
    """A prompt's (query chunk, key chunk) blocks, each a ragged prefill whose rows are
    placed by position_offsets = (q0 - k0) - (kv - qo), merged with merge_states: causal
    attention with a window over the whole prompt (the float64 reference)."""
    hq, hk, d = 4, 2, 64
    bounds = [0, 45, 110, 160]
    n = bounds[-1]
    q, k, v = (ref.make(rng, (n, h, d)) for h in (hq, hk, hk))
    opts = {"causal": True, "window_left": 60, "pos_encoding_mode": pos_encoding_mode}
    o_ref, lse_ref = ref.ragged(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), indptr_of([n]),
                                indptr_of([n]), causal=True, window_left=60, pos_encoding=pos_encoding_mode)
    for c in range(len(bounds) - 1):
        q0, q1 = bounds[c], bounds[c + 1]
        outs, lses = [], []
        for kc in range(len(bounds) - 1):
            k0, k1 = bounds[kc], bounds[kc + 1]
            offset = (q0 - k0) - ((k1 - k0) - (q1 - q0))
            w = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace())
            w.plan(indptr_of([q1 - q0]), indptr_of([k1 - k0]), hq, hk, d, q_data_type=np.float16,
                   position_offsets=np.array([offset], dtype=np.int32), **opts)
            out, lse = w.run(q[q0:q1], k[k0:k1], v[k0:k1], return_lse=True)
            outs.append(out.astype(np.float32))
            lses.append(lse)
        merged, merged_lse = kvinfer.merge_states(np.stack(outs, axis=1), np.stack(lses, axis=1))
        assert_close(merged, o_ref[q0:q1], 2 * ATOL["float16"], f"chunk {c}")
        assert_close(merged_lse, lse_ref[q0:q1], 1e-2, f"chunk {c} lse")


def test_position_offsets_errors():
    w = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace())
    with pytest.raises(kvinfer.Error, match="position_offsets"):
        w.plan(indptr_of([3]), indptr_of([5]), 4, 2, 64, causal=True, position_offsets=np.array([1, 2], np.int32))
    with pytest.raises(kvinfer.Error, match=r"position_offsets\[0\]"):
        w.plan(indptr_of([3]), indptr_of([5]), 4, 2, 64, causal=True,
               position_offsets=np.array([2**31 - 1], np.int32))
