# SPDX-License-Identifier: Apache-2.0
"""Decode attention (FlashInfer's ``flashinfer.decode``): one query row per request
against a paged KV cache, and against one request's contiguous K/V.

Shapes (NHD; HND swaps the seq and heads dims of K/V):
  q        [batch_size, num_qo_heads, head_dim]          float16 / bfloat16
  cache    [max_num_pages, 2, page_size, num_kv_heads, head_dim]  (or a (k, v) pair of
           [max_num_pages, page_size, num_kv_heads, head_dim])   float16 / bfloat16 / fp8
  out      [batch_size, num_qo_heads, head_dim]          o_data_type (default: q's)
  lse      [batch_size, num_qo_heads]                    float32, base 2
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from . import _kvinfer, _utils
from ._utils import reject
from ._wrapper import WrapperBase, run_return_lse as _run_return_lse

_compiling = _utils.compiling_fn()

_BACKENDS = ("auto", "fa2", "fa3")


def _check_backend(op: str, backend: str) -> None:
    if backend not in _BACKENDS:
        _utils.not_supported(op, "backend", repr(backend),
                             "kvinfer's decode chooses its own kernels: \"auto\" (or \"fa2\" / \"fa3\", same results)")


class BatchDecodeWithPagedKVCacheWrapper(WrapperBase):
    """Batch decode with a paged KV cache; FlashInfer's wrapper of the same name.

    ``plan()`` takes the page table (indptr / last_page_len are read on the host; the
    indices stay on the wrapper's device, where ``run()`` reads them) and builds the
    schedule; ``run()`` executes it for one layer and allocates nothing when ``out=``
    (and ``lse=``) are given. The wrapper's device is ``float_workspace_buffer``'s.
    """

    _op = "BatchDecodeWithPagedKVCacheWrapper"

    def __init__(
        self,
        float_workspace_buffer: Any,
        kv_layout: str = "NHD",
        use_cuda_graph: bool = False,
        use_tensor_cores: bool = False,
        paged_kv_indptr_buffer: Optional[Any] = None,
        paged_kv_indices_buffer: Optional[Any] = None,
        paged_kv_last_page_len_buffer: Optional[Any] = None,
        backend: str = "auto",
        jit_args: Optional[Any] = None,
        jit_kwargs: Optional[Any] = None,
    ) -> None:
        """float_workspace_buffer: uint8 buffer on the wrapper's device (FlashInfer
        recommends 128 MiB). use_cuda_graph: a fixed-capacity plan, capturable in a CUDA
        graph and replayable after any re-plan within the buffers' sizes:
        paged_kv_last_page_len_buffer [max_batch] fixes the batch, paged_kv_indices_buffer
        [max_pages] the pages; plan() copies the page indices into it.
        use_tensor_cores: a hint; kvinfer's kernel selector decides (same results)."""
        op = self._op
        reject(op, jit_args=(jit_args, None), jit_kwargs=(jit_kwargs, None))
        _check_backend(op, backend)
        capacity = None
        if use_cuda_graph:
            _utils.require_buffers(op, paged_kv_indptr_buffer=paged_kv_indptr_buffer,
                                   paged_kv_indices_buffer=paged_kv_indices_buffer,
                                   paged_kv_last_page_len_buffer=paged_kv_last_page_len_buffer)
            batch = _utils.length(paged_kv_last_page_len_buffer)
            if _utils.length(paged_kv_indptr_buffer) != batch + 1:
                _utils.error(op, "paged_kv_indptr_buffer.shape[0]", _utils.length(paged_kv_indptr_buffer),
                             f"must be batch_size + 1 = {batch + 1} (paged_kv_last_page_len_buffer has {batch})")
            capacity = (batch, batch, _utils.length(paged_kv_indices_buffer))
        self._use_tensor_cores = use_tensor_cores
        self._paged_kv_indptr_buf = paged_kv_indptr_buffer
        self._paged_kv_indices_buf = paged_kv_indices_buffer
        self._paged_kv_last_page_len_buf = paged_kv_last_page_len_buffer
        self._backend = backend
        self._bind(_kvinfer.BatchDecodeWithPagedKVCache(float_workspace_buffer, kv_layout, capacity),
                   float_workspace_buffer, use_cuda_graph, kv_layout)
        self._window_left = -1

    @property
    def use_tensor_cores(self) -> bool:
        return self._use_tensor_cores

    def plan(
        self,
        indptr: Any,
        indices: Any,
        last_page_len: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        page_size: int,
        pos_encoding_mode: str = "NONE",
        window_left: int = -1,
        logits_soft_cap: Optional[float] = None,
        q_data_type: Optional[Any] = "float16",
        kv_data_type: Optional[Any] = None,
        o_data_type: Optional[Any] = None,
        data_type: Optional[Any] = None,
        sm_scale: Optional[float] = None,
        rope_scale: Optional[float] = None,
        rope_theta: Optional[float] = None,
        non_blocking: bool = True,
        block_tables: Optional[Any] = None,
        seq_lens: Optional[Any] = None,
        fixed_split_size: Optional[int] = None,
        disable_split_kv: bool = False,
        q_len_per_req: int = 1,
        *,
        window_right: int = 0,
        is_causal: Optional[bool] = None,
        use_token_head_sf: bool = False,
        position_offsets: Optional[Any] = None,
    ) -> None:
        """Plans decode for a page table.

        indptr int32 [batch_size + 1] (pages of each request), indices int32
        [indptr[-1]] (page ids, on the wrapper's device), last_page_len int32
        [batch_size] (tokens in each request's last page, 1..page_size; 0 for a request
        without pages). pos_encoding_mode "NONE" / "ROPE_LLAMA" / "ALIBI"; window_left
        -1 (off) or w (w + 1 keys incl. the last); logits_soft_cap None/0 (off) or cap;
        sm_scale default 1/sqrt(head_dim); dtypes as torch or numpy dtypes or names;
        fixed_split_size: split-KV chunks of this many pages (batch-invariant results).
        position_offsets (a kvinfer extension; int32 [batch_size], CPU backend): request
        b's query sits at kv_len - 1 + position_offsets[b] among its keys, for the window,
        RoPE and ALiBi (a contiguous shard of a longer sequence).
        """
        op = self._op
        reject(op,
               window_right=(window_right, 0, "kvinfer has a left window only (window_left)"),
               block_tables=(block_tables, None, "kvinfer reads the CSR page table (indptr/indices)"),
               seq_lens=(seq_lens, None, "kvinfer derives kv lengths from indptr and last_page_len"),
               q_len_per_req=(q_len_per_req, 1, "multi-token decode: use BatchPrefillWithPagedKVCacheWrapper "
                                                "(causal) for q_len_per_req > 1"),
               is_causal=(True if is_causal else None, None,
                          "decode has one query per request; causal needs BatchPrefillWithPagedKVCacheWrapper"),
               use_token_head_sf=(use_token_head_sf, False))
        if data_type is not None:  # FlashInfer's rule: it fills only the dtypes left None
            q_data_type = data_type if q_data_type is None else q_data_type
            kv_data_type = data_type if kv_data_type is None else kv_data_type
        dtypes = _utils.plan_dtypes(op, q_data_type, kv_data_type, o_data_type)
        if self._use_cuda_graph:
            indices = _utils.copy_into(self._paged_kv_indices_buf, indices, non_blocking, op, "indices")
        options = _utils.attention_plan_options(pos_encoding_mode, window_left, sm_scale, logits_soft_cap, rope_scale,
                                                rope_theta, "auto", dtypes,
                                                _utils.split_size(fixed_split_size, page_size), disable_split_kv)
        self._impl.plan(_utils.host(indptr), indices, _utils.host(last_page_len), num_qo_heads, num_kv_heads,
                        head_dim, page_size, options,
                        None if position_offsets is None else _utils.host(position_offsets))
        self._planned(num_qo_heads, head_dim, window_left)

    begin_forward = plan

    def run(
        self,
        q: Any,
        paged_kv_cache: Union[Any, Tuple[Any, Any]],
        *args: Any,
        q_scale: Optional[float] = None,
        k_scale: Optional[float] = None,
        v_scale: Optional[float] = None,
        out: Optional[Any] = None,
        lse: Optional[Any] = None,
        return_lse: bool = False,
        enable_pdl: Optional[bool] = None,
        window_left: Optional[int] = None,
        sinks: Optional[Any] = None,
        q_len_per_req: Optional[int] = None,
        skip_softmax_threshold_scale_factor: Optional[float] = None,
        kv_cache_sf: Optional[Any] = None,
        stream: Optional[Any] = None,
    ) -> Union[Any, Tuple[Any, Any]]:
        """Decode attention for one layer: q [batch_size, num_qo_heads, head_dim],
        paged_kv_cache (5-D tensor or (k, v)) -> out [batch_size, num_qo_heads, head_dim]
        or (out, lse float32 [batch_size, num_qo_heads], base 2). q_scale and k_scale
        multiply the logits' scale, v_scale the output (fp8 KV). stream: a kvinfer
        extension (default: torch's current stream for CUDA tensors)."""
        if (args or sinks is not None or skip_softmax_threshold_scale_factor is not None or kv_cache_sf is not None
                or (q_len_per_req is not None and q_len_per_req != 1)
                or (window_left is not None and window_left != self._window_left)):
            self._reject_run(args, window_left, sinks=(sinks, None),
                             skip_softmax_threshold_scale_factor=(skip_softmax_threshold_scale_factor, None),
                             kv_cache_sf=(kv_cache_sf, None),
                             q_len_per_req=(1 if q_len_per_req is None else q_len_per_req, 1,
                                            "multi-token decode: use BatchPrefillWithPagedKVCacheWrapper (causal)"))
        k, v = _utils.split_cache(paged_kv_cache) if isinstance(paged_kv_cache, (tuple, list)) else (paged_kv_cache,
                                                                                                       None)
        return self._attend(q, k, v, q_scale, k_scale, v_scale, out, lse, return_lse, enable_pdl, stream)

    run_return_lse = _run_return_lse


class CUDAGraphBatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper):
    """BatchDecodeWithPagedKVCacheWrapper with use_cuda_graph=True (FlashInfer's class)."""

    def __init__(self, workspace_buffer: Any, indptr_buffer: Any, indices_buffer: Any, last_page_len_buffer: Any,
                 kv_layout: str = "NHD", use_tensor_cores: bool = False) -> None:
        super().__init__(workspace_buffer, kv_layout, use_cuda_graph=True, use_tensor_cores=use_tensor_cores,
                         paged_kv_indptr_buffer=indptr_buffer, paged_kv_indices_buffer=indices_buffer,
                         paged_kv_last_page_len_buffer=last_page_len_buffer)


def single_decode_with_kv_cache(
    q: Any,
    k: Any,
    v: Any,
    kv_layout: str = "NHD",
    pos_encoding_mode: str = "NONE",
    use_tensor_cores: bool = False,
    q_scale: Optional[float] = None,
    k_scale: Optional[float] = None,
    v_scale: Optional[float] = None,
    window_left: int = -1,
    logits_soft_cap: Optional[float] = None,
    sm_scale: Optional[float] = None,
    rope_scale: Optional[float] = None,
    rope_theta: Optional[float] = None,
    return_lse: bool = False,
    *,
    out: Optional[Any] = None,
    lse: Optional[Any] = None,
    stream: Optional[Any] = None,
) -> Union[Any, Tuple[Any, Any]]:
    """Decode attention of one request: q [num_qo_heads, head_dim], k/v [kv_len,
    num_kv_heads, head_dim] (HND: [num_kv_heads, kv_len, head_dim]) -> out
    [num_qo_heads, head_dim] (q's dtype) or (out, lse float32 [num_qo_heads], base 2).
    out=/lse=/stream= are kvinfer extensions."""
    op = "single_decode_with_kv_cache"
    if out is None:
        out = _utils.empty_like(q, op, "out")
    if return_lse and lse is None:
        lse = _utils.empty(q, (q.shape[0],), "float32", op, "lse")
    soft_cap, rs, rt = _utils.plan_options(logits_soft_cap, rope_scale, rope_theta)
    args = (q, k, v, out, lse, kv_layout, pos_encoding_mode, window_left, soft_cap, sm_scale, rs, rt,
            _utils.qk_scale(op, q_scale, k_scale), _utils.scale(v_scale, op, "v_scale"))
    if _compiling():
        _utils.ops.single_decode(*args)
    else:
        _kvinfer.single_decode(*args, _utils.stream_of(q, stream, op))
    return (out, lse) if return_lse else out
