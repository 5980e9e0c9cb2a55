# SPDX-License-Identifier: Apache-2.0
"""Paged KV-cache operations (FlashInfer's ``flashinfer.page``): append new tokens to a
paged cache, and the index helpers that prepare an append.

The page table is CSR: kv_indptr int32 [batch_size + 1] (pages of each request),
kv_indices int32 (page ids), kv_last_page_len int32 [batch_size]; it must already cover
the appended tokens. Every tensor lives on the cache's device.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from . import _kvinfer, _utils

_compiling = _utils.compiling_fn()


def get_batch_indices_positions(append_indptr: Any, seq_lens: Any, nnz: int, batch_indices: Optional[Any] = None,
                                positions: Optional[Any] = None) -> Tuple[Any, Any]:
    """For each of the nnz appended tokens (append_indptr int32 [batch_size + 1],
    seq_lens int32 [batch_size], the lengths after the append): its request and its
    position, the appended tokens being the tail of each sequence. -> (batch_indices,
    positions), int32 [nnz] on append_indptr's device."""
    op = "get_batch_indices_positions"
    if batch_indices is None:
        batch_indices = _utils.empty(append_indptr, (nnz,), "int32", op, "batch_indices")
    if positions is None:
        positions = _utils.empty(append_indptr, (nnz,), "int32", op, "positions")
    if _compiling():
        _utils.ops.get_batch_indices_positions(append_indptr, seq_lens, batch_indices, positions)
    else:
        _kvinfer.get_batch_indices_positions(append_indptr, seq_lens, batch_indices, positions,
                                             _utils.stream_of(append_indptr, None, op))
    return batch_indices, positions


def get_seq_lens(kv_indptr: Any, kv_last_page_len: Any, page_size: int) -> Any:
    """seq_lens[i] = (kv_indptr[i+1] - kv_indptr[i] - 1) * page_size + kv_last_page_len[i]
    (0 for a request without pages). -> int32 [batch_size]."""
    op = "get_seq_lens"
    out = _utils.empty(kv_last_page_len, (kv_last_page_len.shape[0],), "int32", op, "seq_lens")
    if _compiling():
        _utils.ops.get_seq_lens(kv_indptr, kv_last_page_len, int(page_size), out)
    else:
        _kvinfer.get_seq_lens(kv_indptr, kv_last_page_len, int(page_size), out,
                              _utils.stream_of(kv_indptr, None, op))
    return out


def append_paged_kv_cache(
    append_key: Any,
    append_value: Any,
    batch_indices: Any,
    positions: Any,
    paged_kv_cache: Union[Any, Tuple[Any, Any]],
    kv_indices: Any,
    kv_indptr: Any,
    kv_last_page_len: Any,
    kv_layout: str = "NHD",
) -> None:
    """Writes append_key / append_value [nnz, num_kv_heads, head_dim] (the cache's dtype)
    into paged_kv_cache (5-D [max_pages, 2, page_size, H, D] in NHD, or a (k, v) pair):
    token t goes to page kv_indices[kv_indptr[b] + p // page_size], slot p % page_size,
    for b = batch_indices[t], p = positions[t]."""
    k, v = _utils.split_cache(paged_kv_cache)
    if _compiling():
        _utils.ops.append_paged_kv_cache(append_key, append_value, batch_indices, positions, k, v, kv_indices,
                                         kv_indptr, kv_last_page_len, kv_layout)
    else:
        _kvinfer.append_paged_kv_cache(append_key, append_value, batch_indices, positions, k, v, kv_indices, kv_indptr,
                                       kv_last_page_len, kv_layout,
                                       _utils.stream_of(append_key, None, "append_paged_kv_cache"))


def append_paged_mla_kv_cache(
    append_ckv: Any,
    append_kpe: Any,
    batch_indices: Any,
    positions: Any,
    ckv_cache: Optional[Any],
    kpe_cache: Optional[Any],
    kv_indices: Any,
    kv_indptr: Any,
    kv_last_page_len: Any,
) -> None:
    """The same for the MLA cache: append_ckv [nnz, 512], append_kpe [nnz, 64] into
    ckv_cache [max_pages, page_size, 512] and kpe_cache [max_pages, page_size, 64]
    (kpe_cache None: ckv_cache is the packed [max_pages, page_size, 576] cache)."""
    if _compiling():
        _utils.ops.append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache,
                                             kpe_cache, kv_indices, kv_indptr, kv_last_page_len)
    else:
        _kvinfer.append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache,
                                           kv_indices, kv_indptr, kv_last_page_len,
                                           _utils.stream_of(append_ckv, None, "append_paged_mla_kv_cache"))


def shard_page_table(kv_indptr: Any, kv_indices: Any, kv_last_page_len: Any, page_size: int, rank: int, world: int,
                     policy: str = "contiguous") -> Tuple[Any, Any, Any]:
    """Context parallelism (a kvinfer extension): rank `rank` of `world`'s shard of a
    page table held on the host (numpy or CPU torch int32), split along the sequence:
    policy "contiguous" gives each rank a range of every request's pages, "striped" page
    j to rank j % world. -> (kv_indptr, kv_indices, kv_last_page_len) of the shard, int32
    arrays of kv_indptr's kind. Each rank's attention over its shard with return_lse,
    merged by merge_states over the ranks, equals attention over the whole cache for
    decode and non-causal prefill without window, RoPE or ALiBi (a shard's keys count
    their positions from 0)."""
    return _kvinfer.shard_page_table(kv_indptr, kv_indices, kv_last_page_len, int(page_size), int(rank), int(world),
                                     policy)
