# SPDX-License-Identifier: Apache-2.0
"""Cascade attention and attention-state merges (FlashInfer's ``flashinfer.cascade``).

A state is (v, s): an attention output over a subset of keys and the base-2
log-sum-exp of their scores; merging two states over disjoint key sets gives the state
over their union. Shapes: v [n, num_heads, head_dim] (float16 / bfloat16 / float32),
s [n, num_heads] float32; merge_states takes v [n, num_states, num_heads, head_dim] and
s [n, num_states, num_heads].
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from . import _kvinfer, _utils
from ._utils import reject
from ._wrapper import WrapperBase

_compiling = _utils.compiling_fn()


def merge_state(v_a: Any, s_a: Any, v_b: Any, s_b: Any) -> Tuple[Any, Any]:
    """Merges (v_a, s_a) and (v_b, s_b) -> (v [n, H, D], s float32 [n, H]). Two empty
    states (s = -inf) merge to v = 0, s = -inf."""
    op = "merge_state"
    v = _utils.empty_like(v_a, op, "v_merged")
    s = _utils.empty_like(s_a, op, "s_merged")
    if _compiling():
        _utils.ops.merge_state(v_a, s_a, v_b, s_b, v, s)
    else:
        _kvinfer.merge_state(v_a, s_a, v_b, s_b, v, s, _utils.stream_of(v_a, None, op))
    return v, s


def merge_state_in_place(v: Any, s: Any, v_other: Any, s_other: Any, mask: Optional[Any] = None) -> None:
    """(v, s) <- merge((v, s), (v_other, s_other)) for the rows where mask (bool [n]) is
    true, every row when mask is None."""
    if _compiling():
        _utils.ops.merge_state_in_place(v, s, v_other, s_other, mask)
    else:
        _kvinfer.merge_state_in_place(v, s, v_other, s_other, mask,
                                      _utils.stream_of(v, None, "merge_state_in_place"))


def merge_states(v: Any, s: Any) -> Tuple[Any, Any]:
    """Merges the states of each row: v [n, K, H, D], s [n, K, H] -> (v [n, H, D],
    s float32 [n, H])."""
    op = "merge_states"
    vo = _utils.empty(v, (v.shape[0], v.shape[2], v.shape[3]), _utils.dtype_of(v), op, "v_merged")
    so = _utils.empty(s, (s.shape[0], s.shape[2]), "float32", op, "s_merged")
    if _compiling():
        _utils.ops.merge_states(v, s, vo, so)
    else:
        _kvinfer.merge_states(v, s, vo, so, _utils.stream_of(v, None, op))
    return vo, so


class MultiLevelCascadeAttentionWrapper(WrapperBase):
    """Multi-level cascade attention over one paged KV pool; FlashInfer's wrapper of the
    same name. Level 0 is the root (a prefix shared by many requests); each level has
    its own qo_indptr (query rows of each subtree, ending at the number of rows) and
    page table; causal applies to the last level. The levels' states are merged
    exactly, so with mask none/causal and a soft cap the result equals attention over
    each request's concatenated KV."""

    _op = "MultiLevelCascadeAttentionWrapper"

    def __init__(
        self,
        num_levels: int,
        float_workspace_buffer: Any,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        qo_indptr_buf_arr: Optional[List[Any]] = None,
        paged_kv_indptr_buf_arr: Optional[List[Any]] = None,
        paged_kv_indices_buf_arr: Optional[List[Any]] = None,
        paged_kv_last_page_len_buf_arr: Optional[List[Any]] = None,
    ) -> None:
        """use_cuda_graph: per level, qo_indptr_buf_arr[i] [subtrees + 1] fixes the
        subtrees, paged_kv_indices_buf_arr[i] the pages (plan() copies the indices in);
        the first plan fixes the query rows."""
        op = self._op
        if use_cuda_graph:
            for name, arr in (("qo_indptr_buf_arr", qo_indptr_buf_arr),
                              ("paged_kv_indptr_buf_arr", paged_kv_indptr_buf_arr),
                              ("paged_kv_indices_buf_arr", paged_kv_indices_buf_arr),
                              ("paged_kv_last_page_len_buf_arr", paged_kv_last_page_len_buf_arr)):
                if arr is None or len(arr) != num_levels:
                    _utils.error(op, name, None if arr is None else f"{len(arr)} buffers",
                                 f"use_cuda_graph=True needs one buffer per level ({num_levels})")
        self._num_levels = num_levels
        self._qo_indptr_buf_arr = qo_indptr_buf_arr
        self._paged_kv_indptr_buf_arr = paged_kv_indptr_buf_arr
        self._paged_kv_indices_buf_arr = paged_kv_indices_buf_arr
        self._paged_kv_last_page_len_buf_arr = paged_kv_last_page_len_buf_arr
        self._bind_device(float_workspace_buffer, use_cuda_graph, kv_layout,
                          lambda: _kvinfer.MultiLevelCascadeAttention(num_levels, float_workspace_buffer, kv_layout, []))

    def reset_workspace_buffer(self, float_workspace_buffer: Any,
                               int_workspace_buffers: Optional[List[Any]] = None) -> None:
        """One float buffer for every level (FlashInfer's signature); kvinfer's cascade is
        one plan, so int_workspace_buffers[0] (if given) holds it."""
        super().reset_workspace_buffer(float_workspace_buffer,
                                       int_workspace_buffers[0] if int_workspace_buffers else None)

    def plan(
        self,
        qo_indptr_arr: List[Any],
        paged_kv_indptr_arr: List[Any],
        paged_kv_indices_arr: List[Any],
        paged_kv_last_page_len: List[Any],
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        page_size: int,
        causal: bool = False,
        pos_encoding_mode: str = "NONE",
        use_fp16_qk_reduction: bool = False,
        sm_scale: Optional[float] = None,
        window_left: int = -1,
        logits_soft_cap: Optional[float] = None,
        rope_scale: Optional[float] = None,
        rope_theta: Optional[float] = None,
        q_data_type: Any = "float16",
        kv_data_type: Optional[Any] = None,
    ) -> None:
        """Plans every level: per level qo_indptr int32 [subtrees + 1], paged_kv_indptr
        int32 [subtrees + 1], paged_kv_indices int32, paged_kv_last_page_len int32
        [subtrees]. RoPE, ALiBi and a window need per-level positions: the C++ plan
        rejects them."""
        op = self._op
        reject(op, use_fp16_qk_reduction=(use_fp16_qk_reduction, False))
        dtypes = _utils.plan_dtypes(op, q_data_type, kv_data_type, None)
        qo_host = [_utils.host(x) for x in qo_indptr_arr]
        if self._use_cuda_graph:
            rows = int(qo_host[0][-1]) if len(qo_host) else 0
            self._graph_impl(lambda: _kvinfer.MultiLevelCascadeAttention(
                self._num_levels, self._float_workspace_buffer, self._kv_layout,
                [(_utils.length(qb) - 1, rows, _utils.length(ib))
                 for qb, ib in zip(self._qo_indptr_buf_arr, self._paged_kv_indices_buf_arr)]))
            paged_kv_indices_arr = [
                _utils.copy_into(buf, ix, True, op, f"paged_kv_indices_arr[{i}]")
                for i, (buf, ix) in enumerate(zip(self._paged_kv_indices_buf_arr, paged_kv_indices_arr))]
        options = _utils.attention_plan_options(pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale,
                                                rope_theta, "auto", dtypes)
        self._impl.plan(qo_host, [_utils.host(x) for x in paged_kv_indptr_arr], list(paged_kv_indices_arr),
                        [_utils.host(x) for x in paged_kv_last_page_len], num_qo_heads, num_kv_heads, head_dim,
                        page_size, bool(causal), options)
        self._planned(num_qo_heads, head_dim, window_left)

    begin_forward = plan

    def run(self, q: Any, paged_kv_cache: Union[Any, Tuple[Any, Any]], *, out: Optional[Any] = None,
            lse: Optional[Any] = None, return_lse: bool = False, enable_pdl: Optional[bool] = None,
            stream: Optional[Any] = None) -> Union[Any, Tuple[Any, Any]]:
        """Cascade attention: q [nnz, num_qo_heads, head_dim], paged_kv_cache (5-D or
        (k, v)) -> out [nnz, num_qo_heads, head_dim]. out=, lse=, return_lse=,
        enable_pdl= and stream= are kvinfer extensions (FlashInfer's run returns out)."""
        k, v = _utils.split_cache(paged_kv_cache)
        return self._attend(q, k, v, None, None, None, out, lse, return_lse, enable_pdl, stream)

    forward = run
