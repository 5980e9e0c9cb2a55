# SPDX-License-Identifier: Apache-2.0
"""The part every plan/run wrapper shares: its device, the stream of a run() call,
the caller's workspace buffers, the handle its torch custom op names it by, what a
plan leaves for run(), and the run() call of the decode, prefill and cascade
wrappers."""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Optional, Tuple

from . import _kvinfer, _utils
from ._utils import reject

# Wrappers by handle, for the torch custom ops (kvinfer/_torch_ops.py): an op takes
# tensors and scalars only, so a traced graph names its wrapper by this integer. The
# plan stays in the wrapper; a re-plan is seen by the next call of the graph.
_REGISTRY: "weakref.WeakValueDictionary[int, WrapperBase]" = weakref.WeakValueDictionary()
_HANDLES = itertools.count(1)


def lookup(handle: int) -> "WrapperBase":
    return _REGISTRY[handle]


_compiling = _utils.compiling_fn()


class WrapperBase:
    _op = "wrapper"
    _use_cuda_graph = False
    _num_qo_heads = 0
    _head_dim_vo = 0

    @property
    def is_cuda_graph_enabled(self) -> bool:
        return self._use_cuda_graph

    def _bind(self, impl: Any, float_workspace_buffer: Any, use_cuda_graph: bool, kv_layout: str) -> None:
        self._bind_device(float_workspace_buffer, use_cuda_graph, kv_layout)
        self._set_impl(impl)

    def _bind_device(self, float_workspace_buffer: Any, use_cuda_graph: bool, kv_layout: str = "NHD",
                     make_impl: Any = None) -> None:
        """The wrapper's device is its workspace's (as FlashInfer's); use_cuda_graph and
        kv_layout as every constructor takes them; the C++ wrapper make_impl() builds,
        now, or in CUDA-graph mode at the first plan (_graph_impl), whose sizes fix its
        capacity."""
        self._use_cuda_graph = use_cuda_graph
        self._kv_layout = kv_layout
        self._impl = None
        self._impl_run = self._not_planned
        self._o_dtype = "float16"
        self._float_workspace_buffer = float_workspace_buffer
        self._int_workspace_buffer = None
        device = _kvinfer.device_of(float_workspace_buffer)
        # FlashInfer's wrappers expose the workspace's device (a torch.device for torch).
        self.device = getattr(float_workspace_buffer, "device", device)
        self._cuda = device != "cpu"
        self._current_stream = _utils.current_stream_fn(device) if self._cuda else None
        self._handle = next(_HANDLES)
        _REGISTRY[self._handle] = self
        if make_impl is not None and not use_cuda_graph:
            self._set_impl(make_impl())

    def _set_impl(self, impl: Any) -> None:
        # The C++ wrapper takes float_workspace_buffer at construction.
        if self._int_workspace_buffer is not None:
            impl.reset_workspace_buffer(self._float_workspace_buffer, self._int_workspace_buffer)
        self._impl = impl
        self._impl_run = impl.run

    def _not_planned(self, *args: Any) -> None:
        # A CUDA-graph wrapper makes its C++ wrapper at the first plan (its capacity
        # comes from it, as FlashInfer's does).
        _utils.error(self._op, "plan", "(none)", "run() needs a successful plan() first")

    def _stream(self, stream: Any) -> int:
        if stream is not None:
            return _utils.stream_arg(stream, self._op)
        return self._current_stream() if self._cuda else 0

    def _planned(self, num_qo_heads: int, head_dim_vo: int, window_left: int = -1) -> None:
        """After a successful plan(): what run() allocates and checks by."""
        self._window_left = window_left
        self._num_qo_heads = num_qo_heads
        self._head_dim_vo = head_dim_vo
        self._o_dtype = self._impl.o_data_type

    def _graph_impl(self, make: Any) -> None:
        """CUDA-graph mode: the C++ wrapper is made at the first plan, whose sizes fix
        the capacity (make() builds it), as FlashInfer's is."""
        if self._impl is None:
            self._set_impl(make())

    def _reject_run(self, args: tuple, window_left: Optional[int] = None, **given: Any) -> None:
        """run() was given something kvinfer rejects (its caller's quick check saw it):
        extra positional arguments, one of `given` (in reject()'s form), or else a
        window_left other than the one plan() took."""
        _utils.reject_positional(self._op, args)
        reject(self._op, **given)
        _utils.error(self._op, "window_left", window_left,
                     f"must be None or the value given to plan() ({self._window_left})")

    def _attend(self, q: Any, k: Any, v: Any, q_scale: Any, k_scale: Any, v_scale: Any, out: Any, lse: Any,
                return_lse: bool, enable_pdl: Optional[bool], stream: Any, lse_base: str = "log2") -> Any:
        """run() of a decode, prefill or cascade wrapper once its own arguments are
        checked: the logits' scale q_scale * k_scale and the output's v_scale, out
        [rows, num_qo_heads, head_dim_vo] (and lse [rows, num_qo_heads] when asked for)
        allocated where not given, then the C++ call (a torch custom op while
        torch.compile traces). Returns out, or (out, lse) with return_lse, lse in base
        2 or (lse_base "ln") e."""
        op = self._op
        ks = 1.0 if k_scale is None and q_scale is None else _utils.qk_scale(op, q_scale, k_scale)
        vs = 1.0 if v_scale is None else _utils.scale(v_scale, op, "v_scale")
        natural = lse_base != "log2"
        if natural and lse_base != "ln":
            _utils.error(op, "lse_base", repr(lse_base), "must be \"log2\" or \"ln\"")
        if out is None:
            out = _utils.empty(q, (_utils.rows(q, op, "q"), self._num_qo_heads, self._head_dim_vo), self._o_dtype, op,
                               "out")
        if (return_lse or natural) and lse is None:
            lse = _utils.empty(q, (q.shape[0], self._num_qo_heads), "float32", op, "lse")
        if _compiling():
            _utils.ops.attention_run(self._handle, q, k, v, out, lse, ks, vs, enable_pdl)
        else:
            self._impl_run(q, k, v, out, lse, ks, vs, 0 if stream is None and not self._cuda else self._stream(stream),
                           enable_pdl)
        if natural:
            lse *= _utils.LN2
        return (out, lse) if return_lse else out

    def status(self, stream: Any = None) -> Optional[Tuple[str, int, int, str]]:
        """The first bad page id in ``kv_indices`` that run()'s kernels met on the GPU since
        plan() or the last status() (kvinfer's addition; FlashInfer does not check): None, or
        (array, index, value, message). The kernels read no page through it and wrote the
        rows of the work items that hold it as zeros with LSE -inf. Reading it waits for
        ``stream``; it is then cleared. The CPU rejects bad ids in run() instead: always None
        there. A serving loop polls it at its own synchronisation points; run(...,
        check_indices) is not offered: KVINFER_CHECK_INDICES=1 makes every run() check."""
        if self._impl is None:
            return None
        return self._impl.status(self._stream(stream))

    def reset_workspace_buffer(self, float_workspace_buffer: Any, int_workspace_buffer: Optional[Any] = None) -> None:
        """The plans live in the caller's buffers from now on (uint8, contiguous, 16-byte
        aligned, on the wrapper's device): float_workspace_buffer (one may serve every
        wrapper of a model run on one stream, as FlashInfer's) and int_workspace_buffer
        (None keeps the wrapper's own). A plan that needs more raises kvinfer.Error
        naming the buffer and the bytes it needs."""
        if self._impl is not None:
            self._impl.reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer)
        self._float_workspace_buffer = float_workspace_buffer
        self._int_workspace_buffer = int_workspace_buffer

    @property
    def float_workspace_buffer(self) -> Any:
        return self._float_workspace_buffer


def run_return_lse(self: WrapperBase, *args: Any, **kwargs: Any) -> Any:
    """run(..., return_lse=True)."""
    return self.run(*args, return_lse=True, **kwargs)
