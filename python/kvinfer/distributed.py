# SPDX-License-Identifier: Apache-2.0
"""Context parallelism across ranks (kvinfer's addition; FlashInfer has none): each rank
attends over its shard of a request's KV cache (kvinfer.shard_page_table) with LSE, and
merge_over_ranks gathers every rank's (out, lse) and merges them with merge_states, so
that every rank holds attention over the whole cache::

    indptr, indices, last = kvinfer.shard_page_table(indptr, indices, last, page_size, rank, world)
    w.plan(indptr, indices, last, ...)
    out, lse = w.run(q, cache, return_lse=True)
    out, lse = kvinfer.distributed.merge_over_ranks(out, lse)      # torch.distributed's group

The collective is the caller's: torch.distributed's all-gather on ``group`` (NCCL for CUDA
tensors, gloo for CPU ones; kvinfer loads no NCCL of its own beside torch's), or any
``all_gather(x) -> [world, *x.shape]`` given instead (e.g. for numpy arrays). Every rank
must hold the same query rows (the same q, one shard of the keys each). The merge holds
where no key's position matters (docs/semantics.md, "Context-parallel shards")."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from . import _utils
from .cascade import merge_states


def _torch_all_gather(group: Any) -> Callable[[Any], Any]:
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        _utils.error("merge_over_ranks", "all_gather", None, "torch is not installed: pass an all_gather callable")

    if not dist.is_available() or not dist.is_initialized():
        _utils.error("merge_over_ranks", "group", repr(group),
                     "torch.distributed is not initialised: call init_process_group() or pass all_gather=")
    world = dist.get_world_size(group)

    def gather(x: Any) -> Any:
        # all_gather of a list: every backend has it (gloo for CPU tensors included).
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x, group=group)
        return torch.stack(parts)

    return gather


def _states_by_row(stacked: Any) -> Any:
    """[world, rows, ...] -> [rows, world, ...], contiguous (merge_states' layout)."""
    if _utils.is_torch_tensor(stacked):
        return stacked.movedim(0, 1).contiguous()
    import numpy as np

    return np.ascontiguousarray(np.moveaxis(stacked, 0, 1))


def merge_over_ranks(out: Any, lse: Any, group: Any = None,
                     all_gather: Optional[Callable[[Any], Any]] = None) -> Tuple[Any, Any]:
    """This rank's attention over its shard, out [rows, num_heads, head_dim] (float32, or
    the 16-bit type of the run) and lse float32 [rows, num_heads] (base 2, as run() returns
    it), merged with every rank's: (out [rows, num_heads, head_dim], lse [rows, num_heads]),
    the same on every rank. A rank whose shard holds no key of a row contributes LSE -inf
    there; a row no rank has keys for comes out as zeros with LSE -inf."""
    op = "merge_over_ranks"
    for name, x, rank in (("out", out, 3), ("lse", lse, 2)):
        if len(x.shape) != rank:
            _utils.error(op, f"{name}.shape", tuple(x.shape), f"must have {rank} dimensions")
    if tuple(lse.shape) != tuple(out.shape[:2]):
        _utils.error(op, "lse.shape", tuple(lse.shape), f"must be out.shape[:2] = {tuple(out.shape[:2])}")
    gather = all_gather if all_gather is not None else _torch_all_gather(group)
    v, s = gather(out), gather(lse)
    if tuple(v.shape[1:]) != tuple(out.shape) or tuple(s.shape[1:]) != tuple(lse.shape) or v.shape[0] != s.shape[0]:
        _utils.error(op, "all_gather", f"{tuple(v.shape)} and {tuple(s.shape)}",
                     "must return [world, *x.shape] for out and for lse")
    return merge_states(_states_by_row(v), _states_by_row(s))
