# SPDX-License-Identifier: Apache-2.0
"""Prefill / append attention (FlashInfer's ``flashinfer.prefill``): ragged queries
against a paged KV cache or ragged keys/values, and one request's contiguous K/V.

Shapes (NHD; HND swaps the seq and heads dims of K/V):
  q     [qo_indptr[-1], num_qo_heads, head_dim_qk]             float16 / bfloat16
  paged [max_num_pages, 2, page_size, num_kv_heads, head_dim]   (or a (k, v) pair)
  k, v  [kv_indptr[-1], num_kv_heads, head_dim_qk / head_dim_vo] (ragged)
  out   [qo_indptr[-1], num_qo_heads, head_dim_vo]             o_data_type (default: q's)
  lse   [qo_indptr[-1], num_qo_heads]                          float32, base 2
Masks: causal is bottom-right aligned (row i of a request with qo_len queries and kv_len
keys sees keys j <= i + kv_len - qo_len); custom_mask is bool [sum(qo_len * kv_len)]
(row-major per request), packed_custom_mask its bit-packed form (little bit order, each
request padded to a byte, as segment_packbits(..., bitorder="little")).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _kvinfer, _utils
from ._utils import reject
from ._wrapper import WrapperBase, run_return_lse as _run_return_lse

_compiling = _utils.compiling_fn()

_INT32_MAX = 2**31 - 1
_MULTI_ITEM = "multi-item scoring is not implemented"
_TRTLLM = "kvinfer reads the CSR page table (qo_indptr / paged_kv_indptr / last_page_len)"


def _reject_common_plan(op: str, use_fp16_qk_reduction, prefix_len_ptr, token_pos_in_items_ptr,
                        token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q, use_token_head_sf) -> None:
    reject(op,
           use_fp16_qk_reduction=(use_fp16_qk_reduction, False),
           prefix_len_ptr=(prefix_len_ptr, None, _MULTI_ITEM),
           token_pos_in_items_ptr=(token_pos_in_items_ptr, None, _MULTI_ITEM),
           token_pos_in_items_len=(token_pos_in_items_len, 0, _MULTI_ITEM),
           max_item_len_ptr=(max_item_len_ptr, None, _MULTI_ITEM),
           seq_lens=(seq_lens, None, _TRTLLM),
           seq_lens_q=(seq_lens_q, None, _TRTLLM),
           use_token_head_sf=(use_token_head_sf, False))


def _mask_element_indptr(qo_indptr_host: Any, kv_lens: np.ndarray) -> np.ndarray:
    qo = np.asarray(qo_indptr_host, dtype=np.int64)
    sizes = (qo[1:] - qo[:-1]) * kv_lens.astype(np.int64)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)


class _Prefill(WrapperBase):
    """What both prefill wrappers share: the arguments FlashInfer's constructor takes
    and kvinfer rejects, and the custom mask in CUDA-graph mode."""

    run_return_lse = _run_return_lse

    def _init(self, custom_mask_buf: Any, mask_indptr_buf: Any, backend: str, jit_args: Any, jit_kwargs: Any,
              variant_owns_mask: bool) -> None:
        reject(self._op, jit_args=(jit_args, None), jit_kwargs=(jit_kwargs, None),
               variant_owns_mask=(variant_owns_mask, False))
        self._custom_mask_buf = custom_mask_buf
        self._mask_indptr_buf = mask_indptr_buf
        self._backend = backend
        self._window_left = -1

    def _mask(self, custom_mask: Any, packed_custom_mask: Any, qo_host: Any, kv_lens: Any, non_blocking: bool) -> Any:
        """The mask plan() passes on: packed_custom_mask, else custom_mask (FlashInfer's
        rule). In CUDA-graph mode with a custom_mask_buf it is copied (custom_mask bit-packed
        first, with the keys of each request kv_lens() gives) into that buffer, whose
        address the captured graph holds across re-plans."""
        if packed_custom_mask is not None:
            if not self._use_cuda_graph or self._custom_mask_buf is None:
                return packed_custom_mask
            return _utils.copy_into(self._custom_mask_buf, packed_custom_mask, non_blocking, self._op,
                                    "packed_custom_mask")
        if custom_mask is None or not self._use_cuda_graph or self._custom_mask_buf is None:
            return custom_mask
        from .quantization import segment_packbits

        packed, _ = segment_packbits(custom_mask, _mask_element_indptr(qo_host, kv_lens()), bitorder="little")
        return _utils.copy_into(self._custom_mask_buf, packed, non_blocking, self._op, "custom_mask")


class BatchPrefillWithPagedKVCacheWrapper(_Prefill):
    """Batch prefill / append attention with a paged KV cache; FlashInfer's wrapper of
    the same name. plan() reads qo_indptr, paged_kv_indptr and paged_kv_last_page_len on
    the host; paged_kv_indices (and a mask) stay on the wrapper's device, where run()
    reads them."""

    _op = "BatchPrefillWithPagedKVCacheWrapper"

    def __init__(
        self,
        float_workspace_buffer: Any,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        qo_indptr_buf: Optional[Any] = None,
        paged_kv_indptr_buf: Optional[Any] = None,
        paged_kv_indices_buf: Optional[Any] = None,
        paged_kv_last_page_len_buf: Optional[Any] = None,
        custom_mask_buf: Optional[Any] = None,
        mask_indptr_buf: Optional[Any] = None,
        backend: str = "auto",
        jit_args: Optional[Any] = None,
        jit_kwargs: Optional[Any] = None,
        variant_owns_mask: bool = False,
        max_total_num_rows: Optional[int] = None,
    ) -> None:
        """use_cuda_graph: a fixed-capacity plan, capturable once and replayable after
        re-plans within it: qo_indptr_buf [max_batch + 1] fixes the batch,
        paged_kv_indices_buf [max_pages] the pages (plan() copies the indices into it),
        max_total_num_rows the query rows (default: the first plan's, as FlashInfer);
        custom_mask_buf receives the packed mask. backend "auto" / "fa2" (portable) /
        "fa3" (Hopper wgmma)."""
        op = self._op
        self._init(custom_mask_buf, mask_indptr_buf, backend, jit_args, jit_kwargs, variant_owns_mask)
        if use_cuda_graph:
            _utils.require_buffers(op, qo_indptr_buf=qo_indptr_buf, paged_kv_indptr_buf=paged_kv_indptr_buf,
                                   paged_kv_indices_buf=paged_kv_indices_buf,
                                   paged_kv_last_page_len_buf=paged_kv_last_page_len_buf)
        elif max_total_num_rows is not None:
            _utils.error(op, "max_total_num_rows", max_total_num_rows, "requires use_cuda_graph=True")
        self._qo_indptr_buf = qo_indptr_buf
        self._paged_kv_indptr_buf = paged_kv_indptr_buf
        self._paged_kv_indices_buf = paged_kv_indices_buf
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buf
        self._max_total_num_rows = max_total_num_rows
        self._bind_device(float_workspace_buffer, use_cuda_graph, kv_layout,
                          lambda: _kvinfer.BatchPrefillWithPagedKVCache(float_workspace_buffer, kv_layout, None))
        if use_cuda_graph and max_total_num_rows is not None:
            self._make_graph_impl(max_total_num_rows)

    def _make_graph_impl(self, rows: int) -> None:
        capacity = (_utils.length(self._qo_indptr_buf) - 1, int(rows), _utils.length(self._paged_kv_indices_buf))
        self._max_total_num_rows = int(rows)
        self._set_impl(_kvinfer.BatchPrefillWithPagedKVCache(self._float_workspace_buffer, self._kv_layout, capacity))

    def plan(
        self,
        qo_indptr: Any,
        paged_kv_indptr: Any,
        paged_kv_indices: Any,
        paged_kv_last_page_len: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim_qk: int,
        page_size: int,
        head_dim_vo: Optional[int] = None,
        custom_mask: Optional[Any] = None,
        packed_custom_mask: Optional[Any] = None,
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
        o_data_type: Optional[Any] = None,
        non_blocking: bool = True,
        prefix_len_ptr: Optional[Any] = None,
        token_pos_in_items_ptr: Optional[Any] = None,
        token_pos_in_items_len: int = 0,
        max_item_len_ptr: Optional[Any] = None,
        seq_lens: Optional[Any] = None,
        seq_lens_q: Optional[Any] = None,
        block_tables: Optional[Any] = None,
        max_token_per_sequence: Optional[int] = None,
        max_sequence_kv: Optional[int] = None,
        fixed_split_size: Optional[int] = None,
        disable_split_kv: bool = False,
        uniform_q_len: Optional[int] = None,
        use_token_head_sf: bool = False,
        position_offsets: Optional[Any] = None,
    ) -> None:
        """Plans prefill for qo_indptr int32 [batch_size + 1] (query rows of each request)
        and a page table (paged_kv_indptr int32 [batch_size + 1], paged_kv_indices int32
        [>= paged_kv_indptr[-1]], paged_kv_last_page_len int32 [batch_size]). causal:
        bottom-right aligned; a custom_mask / packed_custom_mask replaces it (FlashInfer's
        rule). fixed_split_size is in pages. max_token_per_sequence, max_sequence_kv and
        uniform_q_len are hints (kvinfer plans from the arrays). position_offsets (a
        kvinfer extension; int32 [batch_size], CPU backend): request b's rows sit at
        kv_len - qo_len + i + position_offsets[b] among its keys, for the mask, window,
        RoPE and ALiBi (a shard of a longer sequence)."""
        op = self._op
        _reject_common_plan(op, use_fp16_qk_reduction, prefix_len_ptr, token_pos_in_items_ptr,
                            token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q, use_token_head_sf)
        reject(op, block_tables=(block_tables, None, _TRTLLM))
        if head_dim_vo is not None and head_dim_vo != head_dim_qk:
            _utils.not_supported(op, "head_dim_vo", head_dim_vo,
                                 f"the paged cache has one head_dim (head_dim_qk = {head_dim_qk}); a different "
                                 "head_dim_vo needs BatchPrefillWithRaggedKVCacheWrapper")
        dtypes = _utils.plan_dtypes(op, q_data_type, kv_data_type, o_data_type)
        qo_host = _utils.host(qo_indptr)
        indptr_host = _utils.host(paged_kv_indptr)
        last_host = _utils.host(paged_kv_last_page_len)
        if self._use_cuda_graph:
            if self._impl is None:
                self._make_graph_impl(int(qo_host[-1]))
            paged_kv_indices = _utils.copy_into(self._paged_kv_indices_buf, paged_kv_indices, non_blocking, op,
                                                "paged_kv_indices")
        mask = self._mask(custom_mask, packed_custom_mask, qo_host,
                          lambda: _seq_lens_host(indptr_host, last_host, page_size), non_blocking)
        options = _utils.attention_plan_options(pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale,
                                                rope_theta, self._backend, dtypes,
                                                _utils.split_size(fixed_split_size, page_size), disable_split_kv)
        self._impl.plan(qo_host, indptr_host, paged_kv_indices, last_host, num_qo_heads, num_kv_heads, head_dim_qk,
                        page_size, mask, bool(causal), options,
                        None if position_offsets is None else _utils.host(position_offsets))
        self._planned(num_qo_heads, head_dim_qk, window_left)

    begin_forward = plan

    def run(
        self,
        q: Any,
        paged_kv_cache: Union[Any, Tuple[Any, Any]],
        *args: Any,
        q_scale: Optional[Any] = None,
        k_scale: Optional[Any] = None,
        v_scale: Optional[Any] = None,
        out: Optional[Any] = None,
        lse: Optional[Any] = None,
        return_lse: bool = False,
        lse_base: str = "log2",
        lse_layout: str = "NH",
        enable_pdl: Optional[bool] = None,
        window_left: Optional[int] = None,
        sinks: Optional[Any] = None,
        kv_cache_sf: Optional[Any] = None,
        skip_softmax_threshold_scale_factor: Optional[float] = None,
        use_fp16_softmax: Optional[bool] = None,
        uses_spcompress: Optional[bool] = None,
        stream: Optional[Any] = None,
    ) -> Union[Any, Tuple[Any, Any]]:
        """Prefill attention for one layer: q [qo_indptr[-1], num_qo_heads, head_dim],
        paged_kv_cache (5-D or (k, v)) -> out, or (out, lse float32 [qo_indptr[-1],
        num_qo_heads]; base 2, lse_base="ln" for natural log). stream: a kvinfer
        extension (default: torch's current stream for CUDA tensors)."""
        if (args or sinks is not None or kv_cache_sf is not None or skip_softmax_threshold_scale_factor is not None
                or lse_layout != "NH" or use_fp16_softmax or uses_spcompress
                or (window_left is not None and window_left != self._window_left)):
            self._reject_run(args, window_left, sinks=(sinks, None), kv_cache_sf=(kv_cache_sf, None),
                             skip_softmax_threshold_scale_factor=(skip_softmax_threshold_scale_factor, None),
                             lse_layout=(lse_layout, "NH"),
                             use_fp16_softmax=(use_fp16_softmax or None, None, "kvinfer's softmax is float32"),
                             uses_spcompress=(uses_spcompress or None, None, "sparse compression is not implemented"))
        k, v = _utils.split_cache(paged_kv_cache)
        return self._attend(q, k, v, q_scale, k_scale, v_scale, out, lse, return_lse, enable_pdl, stream, lse_base)


def _seq_lens_host(indptr: Any, last_page_len: Any, page_size: int) -> np.ndarray:
    ip = np.asarray(indptr, dtype=np.int64)
    pages = ip[1:] - ip[:-1]
    return np.where(pages > 0, (pages - 1) * int(page_size) + np.asarray(last_page_len, dtype=np.int64), 0)


class BatchPrefillWithRaggedKVCacheWrapper(_Prefill):
    """Batch prefill / append attention with ragged keys and values; FlashInfer's
    wrapper of the same name. plan() reads qo_indptr and kv_indptr on the host (or takes
    qo_indptr_cpu / kv_indptr_cpu, host copies the caller already has)."""

    _op = "BatchPrefillWithRaggedKVCacheWrapper"

    def __init__(
        self,
        float_workspace_buffer: Any,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        qo_indptr_buf: Optional[Any] = None,
        kv_indptr_buf: Optional[Any] = None,
        custom_mask_buf: Optional[Any] = None,
        mask_indptr_buf: Optional[Any] = None,
        backend: str = "auto",
        jit_args: Optional[Any] = None,
        jit_kwargs: Optional[Any] = None,
        variant_owns_mask: bool = False,
    ) -> None:
        """use_cuda_graph: a fixed-capacity plan: qo_indptr_buf [max_batch + 1] fixes the
        batch, the first plan the query rows (as FlashInfer) and, with fixed_split_size,
        the key rows."""
        self._init(custom_mask_buf, mask_indptr_buf, backend, jit_args, jit_kwargs, variant_owns_mask)
        if use_cuda_graph:
            _utils.require_buffers(self._op, qo_indptr_buf=qo_indptr_buf, kv_indptr_buf=kv_indptr_buf)
        self._qo_indptr_buf = qo_indptr_buf
        self._kv_indptr_buf = kv_indptr_buf
        self._bind_device(float_workspace_buffer, use_cuda_graph, kv_layout,
                          lambda: _kvinfer.BatchPrefillWithRaggedKVCache(float_workspace_buffer, kv_layout, None))

    def plan(
        self,
        qo_indptr: Any,
        kv_indptr: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim_qk: int,
        head_dim_vo: Optional[int] = None,
        custom_mask: Optional[Any] = None,
        packed_custom_mask: Optional[Any] = None,
        causal: bool = False,
        pos_encoding_mode: str = "NONE",
        use_fp16_qk_reduction: bool = False,
        window_left: int = -1,
        logits_soft_cap: Optional[float] = None,
        sm_scale: Optional[float] = None,
        rope_scale: Optional[float] = None,
        rope_theta: Optional[float] = None,
        q_data_type: Any = "float16",
        kv_data_type: Optional[Any] = None,
        o_data_type: Optional[Any] = None,
        non_blocking: bool = True,
        prefix_len_ptr: Optional[Any] = None,
        token_pos_in_items_ptr: Optional[Any] = None,
        token_pos_in_items_len: int = 0,
        max_item_len_ptr: Optional[Any] = None,
        fixed_split_size: Optional[int] = None,
        disable_split_kv: bool = False,
        seq_lens: Optional[Any] = None,
        seq_lens_q: Optional[Any] = None,
        max_token_per_sequence: Optional[int] = None,
        max_sequence_kv: Optional[int] = None,
        v_indptr: Optional[Any] = None,
        o_indptr: Optional[Any] = None,
        qo_indptr_cpu: Optional[Any] = None,
        kv_indptr_cpu: Optional[Any] = None,
        uniform_q_len: Optional[int] = None,
        use_token_head_sf: bool = False,
        position_offsets: Optional[Any] = None,
    ) -> None:
        """Plans prefill for qo_indptr / kv_indptr int32 [batch_size + 1] (query / key rows
        of each request). head_dim_vo may differ from head_dim_qk (e.g. 192 / 128).
        causal: bottom-right aligned; a custom mask replaces it (FlashInfer's rule).
        position_offsets: as for BatchPrefillWithPagedKVCacheWrapper.plan."""
        op = self._op
        _reject_common_plan(op, use_fp16_qk_reduction, prefix_len_ptr, token_pos_in_items_ptr,
                            token_pos_in_items_len, max_item_len_ptr, seq_lens, seq_lens_q, use_token_head_sf)
        reject(op, v_indptr=(v_indptr, None, "v shares kv_indptr's rows in kvinfer"),
               o_indptr=(o_indptr, None, "out shares qo_indptr's rows in kvinfer"))
        dtypes = _utils.plan_dtypes(op, q_data_type, kv_data_type, o_data_type)
        qo_host = _utils.host(qo_indptr if qo_indptr_cpu is None else qo_indptr_cpu)
        kv_host = _utils.host(kv_indptr if kv_indptr_cpu is None else kv_indptr_cpu)
        if self._use_cuda_graph:
            max_kv = int(kv_host[-1]) if fixed_split_size is not None else _INT32_MAX
            self._graph_impl(lambda: _kvinfer.BatchPrefillWithRaggedKVCache(
                self._float_workspace_buffer, self._kv_layout,
                (_utils.length(self._qo_indptr_buf) - 1, int(qo_host[-1]), max_kv)))
        mask = self._mask(custom_mask, packed_custom_mask, qo_host, lambda: np.diff(np.asarray(kv_host, np.int64)),
                          non_blocking)
        vo = head_dim_qk if head_dim_vo is None else head_dim_vo
        options = _utils.attention_plan_options(pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale,
                                                rope_theta, self._backend, dtypes,
                                                _utils.split_size(fixed_split_size, 1), disable_split_kv)
        self._impl.plan(qo_host, kv_host, num_qo_heads, num_kv_heads, head_dim_qk, vo, mask, bool(causal), options,
                        None if position_offsets is None else _utils.host(position_offsets))
        self._planned(num_qo_heads, vo, window_left)

    begin_forward = plan

    def run(
        self,
        q: Any,
        k: Any,
        v: Any,
        *args: Any,
        q_scale: Optional[float] = None,
        k_scale: Optional[float] = None,
        v_scale: Optional[float] = None,
        o_scale: Optional[float] = None,
        out: Optional[Any] = None,
        lse: Optional[Any] = None,
        return_lse: bool = False,
        lse_base: str = "log2",
        lse_layout: str = "NH",
        enable_pdl: Optional[bool] = None,
        kv_cache_sf: Optional[Any] = None,
        stream: Optional[Any] = None,
    ) -> Union[Any, Tuple[Any, Any]]:
        """Prefill attention for one layer: q [qo_indptr[-1], Hq, Dqk], k [kv_indptr[-1],
        Hk, Dqk], v [kv_indptr[-1], Hk, Dvo] -> out [qo_indptr[-1], Hq, Dvo], or (out,
        lse)."""
        if args or kv_cache_sf is not None or lse_layout != "NH" or (o_scale is not None and o_scale != 1.0):
            self._reject_run(args, kv_cache_sf=(kv_cache_sf, None), lse_layout=(lse_layout, "NH"),
                             o_scale=(o_scale, None))
        return self._attend(q, k, v, q_scale, k_scale, v_scale, out, lse, return_lse, enable_pdl, stream, lse_base)


def single_prefill_with_kv_cache(
    q: Any,
    k: Any,
    v: Any,
    scale_q: Optional[Any] = None,
    scale_k: Optional[Any] = None,
    scale_v: Optional[Any] = None,
    o_dtype: Optional[Any] = None,
    custom_mask: Optional[Any] = None,
    packed_custom_mask: Optional[Any] = None,
    causal: bool = False,
    kv_layout: str = "NHD",
    pos_encoding_mode: str = "NONE",
    use_fp16_qk_reduction: bool = False,
    sm_scale: Optional[float] = None,
    window_left: int = -1,
    logits_soft_cap: Optional[float] = None,
    rope_scale: Optional[float] = None,
    rope_theta: Optional[float] = None,
    backend: str = "auto",
    return_lse: bool = False,
    kv_cache_sf: Optional[Any] = None,
    k_scale: Optional[float] = None,
    v_scale: Optional[float] = None,
    *,
    out: Optional[Any] = None,
    lse: Optional[Any] = None,
    stream: Optional[Any] = None,
) -> Union[Any, Tuple[Any, Any]]:
    """Prefill attention of one request: q [qo_len, Hq, Dqk], k [kv_len, Hk, Dqk], v
    [kv_len, Hk, Dvo] (HND: heads first) -> out [qo_len, Hq, Dvo] (q's dtype), or (out,
    lse float32 [qo_len, Hq], base 2). custom_mask bool [qo_len, kv_len] (or flat),
    packed_custom_mask its packed form (little bit order). out=/lse=/stream= are kvinfer
    extensions."""
    op = "single_prefill_with_kv_cache"
    reject(op, scale_q=(scale_q, None, "per-head fp8 scale tensors are not implemented; use k_scale / v_scale"),
           scale_k=(scale_k, None, "per-head fp8 scale tensors are not implemented; use k_scale"),
           scale_v=(scale_v, None, "per-head fp8 scale tensors are not implemented; use v_scale"),
           use_fp16_qk_reduction=(use_fp16_qk_reduction, False), kv_cache_sf=(kv_cache_sf, None))
    o_name = _utils.dtype_name(o_dtype, op, "o_dtype")
    mask = packed_custom_mask if packed_custom_mask is not None else custom_mask
    if mask is not None and len(mask.shape) == 2:
        # The C++ single_prefill takes a row-major 2-D mask as a view; here any strides
        # are accepted (reshape copies where it must, as FlashInfer does), but the shape
        # is checked as there: a [kv_len, qo_len] mask would flatten to the same size.
        want = (q.shape[0], k.shape[1] if kv_layout == "HND" else k.shape[0])
        if tuple(mask.shape) != want:
            _utils.error(op, "custom_mask.shape", list(mask.shape),
                         f"a 2-D mask must be [qo_len, kv_len] = {list(want)}")
        mask = mask.reshape(-1)
    if out is None:
        out = _utils.empty(q, (q.shape[0], q.shape[1], v.shape[-1]), o_name or _utils.dtype_of(q), op, "out")
    if return_lse and lse is None:
        lse = _utils.empty(q, (q.shape[0], q.shape[1]), "float32", op, "lse")
    soft_cap, rs, rt = _utils.plan_options(logits_soft_cap, rope_scale, rope_theta)
    args = (q, k, v, out, lse, mask, bool(causal), kv_layout, pos_encoding_mode, window_left, soft_cap, sm_scale, rs,
            rt, _utils.scale(k_scale, op, "k_scale"), _utils.scale(v_scale, op, "v_scale"), backend)
    if _compiling():
        _utils.ops.single_prefill(*args)
    else:
        _kvinfer.single_prefill(*args, _utils.stream_of(q, stream, op))
    return (out, lse) if return_lse else out


def single_prefill_with_kv_cache_return_lse(q: Any, k: Any, v: Any, *args: Any, **kwargs: Any) -> Tuple[Any, Any]:
    """single_prefill_with_kv_cache(..., return_lse=True)."""
    kwargs["return_lse"] = True
    return single_prefill_with_kv_cache(q, k, v, *args, **kwargs)

