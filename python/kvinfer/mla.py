# SPDX-License-Identifier: Apache-2.0
"""Multi-head latent attention (DeepSeek MLA; FlashInfer's ``flashinfer.mla``): every
head attends its request's shared latent KV, a paged cache of ckv (512 wide) and the
rotary kpe (64 wide, or none).

Shapes: q_nope [nnz, num_heads, 512], q_pe [nnz, num_heads, 64] (or one packed query
[nnz, num_heads, 576]); ckv_cache [max_pages, page_size, 512], kpe_cache [max_pages,
page_size, 64] (or one packed cache [max_pages, page_size, 576]); out [nnz, num_heads,
512]; lse float32 [nnz, num_heads] (base 2, or e). Logits (q_nope.ckv + q_pe.kpe) *
sm_scale, value ckv.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from . import _kvinfer, _utils
from ._utils import reject
from ._wrapper import WrapperBase

_compiling = _utils.compiling_fn()

_CSR = "kvinfer plans from the CSR arguments (qo_indptr, kv_indptr, kv_indices, kv_len_arr)"


class BatchMLAPagedAttentionWrapper(WrapperBase):
    """MLA over a paged latent cache; FlashInfer's wrapper of the same name (its CSR
    plan form). plan() reads qo_indptr, kv_indptr (pages) and kv_len_arr (tokens) on the
    host; kv_indices stay on the wrapper's device."""

    _op = "BatchMLAPagedAttentionWrapper"

    def __init__(
        self,
        float_workspace_buffer: Any,
        use_cuda_graph: bool = False,
        qo_indptr: Optional[Any] = None,
        kv_indptr: Optional[Any] = None,
        kv_indices: Optional[Any] = None,
        kv_len_arr: Optional[Any] = None,
        backend: str = "auto",
    ) -> None:
        """use_cuda_graph: a fixed-capacity plan: qo_indptr [max_batch + 1] fixes the
        batch, kv_indices [max_pages] the pages (plan() copies the indices into it), the
        first plan the query rows."""
        op = self._op
        if backend not in ("auto", "fa2", "fa3"):
            _utils.not_supported(op, "backend", repr(backend), "kvinfer's MLA has one implementation (\"auto\")")
        if use_cuda_graph:
            _utils.require_buffers(op, qo_indptr=qo_indptr, kv_indices=kv_indices)
        self._qo_indptr_buf = qo_indptr
        self._kv_indptr_buf = kv_indptr
        self._kv_indices_buf = kv_indices
        self._kv_len_arr_buf = kv_len_arr
        self._backend = backend
        self._bind_device(float_workspace_buffer, use_cuda_graph,
                          make_impl=lambda: _kvinfer.BatchMLAPagedAttention(float_workspace_buffer, None))
        self._num_heads = 0
        self._head_dim_ckv = 512
        self._lse_base_e = False

    def plan(
        self,
        qo_indptr: Optional[Any] = None,
        kv_indptr: Optional[Any] = None,
        kv_indices: Optional[Any] = None,
        kv_len_arr: Optional[Any] = None,
        num_heads: Optional[int] = None,
        head_dim_ckv: Optional[int] = None,
        head_dim_kpe: Optional[int] = None,
        page_size: Optional[int] = None,
        causal: Optional[bool] = None,
        sm_scale: Optional[float] = None,
        q_data_type: Optional[Any] = None,
        kv_data_type: Optional[Any] = None,
        use_profiler: bool = False,
        *,
        metadata: Optional[Any] = None,
        cum_seq_lens_q: Optional[Any] = None,
        block_tables: Optional[Any] = None,
        seq_lens: Optional[Any] = None,
        max_q_len: Optional[int] = None,
        query_layout: Optional[str] = None,
        kv_cache_layout: Optional[str] = None,
        lse_mode: str = "none",
        output_dtype: Optional[Any] = None,
        output_scale: str = "none",
        scale_mode: str = "default",
        skip_softmax: bool = False,
        enable_pdl: Optional[bool] = None,
        use_sinks: bool = False,
        fixed_split_size: Optional[int] = None,
        disable_split_kv: bool = False,
    ) -> None:
        """Plans MLA: qo_indptr int32 [batch_size + 1] (query rows), kv_indptr int32
        [batch_size + 1] (pages), kv_indices int32, kv_len_arr int32 [batch_size] (keys
        of each request). sm_scale is required (MLA absorbs the up-projections: DeepSeek
        uses 1/sqrt(128 + 64)). query_layout / kv_cache_layout "packed" or "split" are
        read from the tensors at run(). lse_mode "none" / "base2" / "basee" sets the base
        run(return_lse=True) returns. fixed_split_size (pages) / disable_split_kv are
        kvinfer extensions."""
        op = self._op
        reject(op,
               metadata=(metadata, None, _CSR), cum_seq_lens_q=(cum_seq_lens_q, None, _CSR),
               block_tables=(block_tables, None, _CSR), seq_lens=(seq_lens, None, _CSR),
               max_q_len=(max_q_len, None, _CSR),
               use_profiler=(use_profiler, False),
               output_scale=(output_scale, "none"),
               skip_softmax=(skip_softmax, False), use_sinks=(use_sinks, False))
        if scale_mode not in ("default", "kv-per-tensor"):
            _utils.not_supported(op, "scale_mode", repr(scale_mode),
                                 "kvinfer takes per-tensor ckv_scale / kpe_scale (\"default\", \"kv-per-tensor\")")
        if lse_mode not in ("none", "base2", "basee"):
            _utils.error(op, "lse_mode", repr(lse_mode), "must be \"none\", \"base2\" or \"basee\"")
        for name, value in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr), ("kv_indices", kv_indices),
                            ("kv_len_arr", kv_len_arr), ("q_data_type", q_data_type),
                            ("kv_data_type", kv_data_type)):
            if value is None:
                _utils.error(op, name, None, "is required (the CSR plan form)")
        qo_host = _utils.host(qo_indptr)
        if self._use_cuda_graph:
            self._graph_impl(lambda: _kvinfer.BatchMLAPagedAttention(
                self._float_workspace_buffer,
                (_utils.length(self._qo_indptr_buf) - 1, int(qo_host[-1]), _utils.length(self._kv_indices_buf))))
            kv_indices = _utils.copy_into(self._kv_indices_buf, kv_indices, True, op, "kv_indices")
        ckv = 512 if head_dim_ckv is None else int(head_dim_ckv)
        kpe = 64 if head_dim_kpe is None else int(head_dim_kpe)
        q_name = _utils.dtype_name(q_data_type, op, "q_data_type")
        split = _utils.split_size(fixed_split_size, page_size or 1)
        self._impl.plan(qo_host, _utils.host(kv_indptr), kv_indices, _utils.host(kv_len_arr),
                        0 if num_heads is None else num_heads, ckv, kpe, 0 if page_size is None else page_size,
                        bool(causal), sm_scale, q_name, _utils.dtype_name(kv_data_type, op, "kv_data_type"),
                        _utils.dtype_name(output_dtype, op, "output_dtype"), split, disable_split_kv)
        self._num_heads = num_heads
        self._head_dim_ckv = ckv
        self._head_dim_kpe = kpe
        self._lse_base_e = lse_mode == "basee"
        self._o_dtype = self._impl.o_data_type

    def run(
        self,
        q_nope: Optional[Any] = None,
        q_pe: Optional[Any] = None,
        ckv_cache: Optional[Any] = None,
        kpe_cache: Optional[Any] = None,
        out: Optional[Any] = None,
        lse: Optional[Any] = None,
        return_lse: bool = False,
        profiler_buffer: Optional[Any] = None,
        kv_len: Optional[Any] = None,
        page_table: Optional[Any] = None,
        return_lse_base_on_e: bool = False,
        o_scale: Optional[float] = None,
        *,
        query: Any = None,
        kv_cache: Any = None,
        ckv_scale: Optional[float] = None,
        ckv_scale_arr: Optional[Any] = None,
        kpe_scale: Optional[float] = None,
        sinks: Optional[Any] = None,
        skip_softmax_threshold_scale_factor: Optional[float] = None,
        bmm1_scale: Optional[Any] = None,
        bmm2_scale: Optional[Any] = None,
        stream: Optional[Any] = None,
    ) -> Union[Any, Tuple[Any, Any]]:
        """MLA for one layer. query= (packed [nnz, H, 576] or (q_nope, q_pe)) and
        kv_cache= (packed [pages, page_size, 576] or (ckv, kpe)), or the split q_nope /
        q_pe / ckv_cache / kpe_cache. -> out [nnz, H, 512], or (out, lse float32 [nnz,
        H]: base 2, base e with return_lse_base_on_e or lse_mode="basee"). ckv_scale /
        kpe_scale dequantise an fp8 cache."""
        op = self._op
        if (profiler_buffer is not None or kv_len is not None or page_table is not None or o_scale is not None
                or ckv_scale_arr is not None or sinks is not None or skip_softmax_threshold_scale_factor is not None
                or bmm1_scale is not None or bmm2_scale is not None):
            reject(op, profiler_buffer=(profiler_buffer, None), kv_len=(kv_len, None, _CSR),
                   page_table=(page_table, None, _CSR), o_scale=(o_scale, None),
                   ckv_scale_arr=(ckv_scale_arr, None, "device scale tensors are not implemented; use ckv_scale"),
                   sinks=(sinks, None), skip_softmax_threshold_scale_factor=(skip_softmax_threshold_scale_factor, None),
                   bmm1_scale=(bmm1_scale, None, "use ckv_scale / kpe_scale"),
                   bmm2_scale=(bmm2_scale, None, "use ckv_scale"))
        if query is not None:
            q_nope, q_pe = query if isinstance(query, (tuple, list)) else (query, None)
        if kv_cache is not None:
            ckv_cache, kpe_cache = kv_cache if isinstance(kv_cache, (tuple, list)) else (kv_cache, None)
        if q_nope is None:
            _utils.error(op, "query", None, "is required (query= or q_nope / q_pe)")
        if out is None:
            out = _utils.empty(q_nope, (q_nope.shape[0], q_nope.shape[1], self._head_dim_ckv), self._o_dtype, op,
                               "out")
        if return_lse and lse is None:
            lse = _utils.empty(q_nope, (q_nope.shape[0], q_nope.shape[1]), "float32", op, "lse")
        base_e = bool(return_lse_base_on_e or self._lse_base_e)
        cs = _utils.scale(ckv_scale, op, "ckv_scale")
        ps = _utils.scale(kpe_scale, op, "kpe_scale")
        if _compiling():
            _utils.ops.mla_run(self._handle, q_nope, q_pe, ckv_cache, kpe_cache, out, lse, base_e, cs, ps)
        else:
            self._impl_run(q_nope, q_pe, ckv_cache, kpe_cache, out, lse, base_e, cs, ps, self._stream(stream))
        return (out, lse) if return_lse else out
