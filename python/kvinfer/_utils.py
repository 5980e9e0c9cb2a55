# SPDX-License-Identifier: Apache-2.0
"""What the FlashInfer-style modules share: argument conversion (dtypes, scales,
streams, host copies of length arrays), output allocation, and the errors.

Nothing here re-checks what the C++ library checks: values go to kvinfer's C++ API,
whose kvinfer::Error messages reach Python unchanged as kvinfer.Error.
"""

from __future__ import annotations

import math
import sys
from typing import Any, NoReturn, Optional, Tuple

import numpy as np

from . import _kvinfer

Error = _kvinfer.Error
NotSupportedError = _kvinfer.NotSupportedError

LN2 = math.log(2.0)


def message(op: str, arg: str, value: Any, rule: str) -> str:
    """kvinfer::Error's message format: "<op>: <argument> = <value>: <rule>"."""
    return f"{op}: {arg} = {value}: {rule}"


def error(op: str, arg: str, value: Any, rule: str) -> NoReturn:
    raise Error(message(op, arg, value, rule))


def not_supported(op: str, arg: str, value: Any, rule: str) -> NoReturn:
    raise NotSupportedError(message(op, arg, value, rule))


def reject(op: str, **given: Any) -> None:
    """Raises NotSupportedError for the first FlashInfer argument given a value that
    needs a feature kvinfer does not have. Each keyword is name=(value, default, why),
    or name=(value, default) for an argument whose reason is in UNSUPPORTED; a value
    equal to FlashInfer's default (None: absent) is accepted."""
    for name, spec in given.items():
        value, default = spec[0], spec[1]
        if value is default:
            continue
        if default is None or value is None or not isinstance(value, (bool, int, float, str)) or value != default:
            not_supported(op, name, _short(value), spec[2] if len(spec) > 2 else UNSUPPORTED[name])


def reject_positional(op: str, args: tuple) -> None:
    """run(*args): FlashInfer passes a JIT variant's extra arguments there."""
    if args:
        not_supported(op, "*args", f"{len(args)} positional extras", "kvinfer has no custom kernels")


def require_buffers(op: str, **buffers: Any) -> None:
    """use_cuda_graph=True: the fixed buffers a captured graph reads must be given."""
    for name, buf in buffers.items():
        if buf is None:
            error(op, name, None, "use_cuda_graph=True needs the fixed index buffers")


NO_JIT = "kvinfer has no JIT-compiled custom attention variants"
_NO_PROFILER = "kvinfer has no kernel profiler buffer"
_NO_SINKS = "attention sinks are not implemented"
_NO_SKIP_SOFTMAX = "skip-softmax sparsity is not implemented"
_NO_O_SCALE = "fp8 output scaling is not implemented"

# Why kvinfer rejects a FlashInfer argument, the same wherever the argument appears
# (reject() looks the reason up here for name=(value, default)).
UNSUPPORTED = {
    "jit_args": NO_JIT,
    "jit_kwargs": NO_JIT,
    "variant_owns_mask": NO_JIT,
    "use_fp16_qk_reduction": "kvinfer accumulates q.k in float32 only",
    "use_token_head_sf": "per-(token, head) fp8 scales are not implemented",
    "kv_cache_sf": "NVFP4 / per-token scale factors are not implemented",
    "o_scale": _NO_O_SCALE,
    "output_scale": _NO_O_SCALE,
    "lse_layout": "kvinfer writes lse as [nnz, num_qo_heads] (\"NH\")",
    "sinks": _NO_SINKS,
    "use_sinks": _NO_SINKS,
    "skip_softmax_threshold_scale_factor": _NO_SKIP_SOFTMAX,
    "skip_softmax": _NO_SKIP_SOFTMAX,
    "use_profiler": _NO_PROFILER,
    "profiler_buffer": _NO_PROFILER,
}


def _short(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype})"
    return repr(value)


# kvinfer/__init__.py imports torch (where installed) before this module: a module
# global that torch.compile's tracer reads as a constant.
_TORCH = sys.modules.get("torch")


def _torch():
    return _TORCH


def is_torch_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


# ---------------------------------------------------------------- dtypes


def dtype_name(x: Any, op: str, arg: str) -> Optional[str]:
    """A torch dtype, a numpy dtype (or type) or a name, as the name the C++ binding
    parses ("float16", "bfloat16", "float8_e4m3fn", ...); the binding rejects unknown names."""
    if x is None:
        return None
    if isinstance(x, str):
        return x
    s = str(x)
    if s.startswith("torch."):
        return s[6:]
    try:
        return np.dtype(x).name
    except TypeError:
        error(op, arg, repr(x), "must be a torch dtype, a numpy dtype or a dtype name such as \"bfloat16\"")


def plan_dtypes(op: str, q_data_type: Any, kv_data_type: Any, o_data_type: Any) -> Tuple[str, str, str]:
    """A plan's (q, kv, o) dtype names: q defaults to float16, kv and o to q's."""
    q = dtype_name(q_data_type, op, "q_data_type") or "float16"
    kv = dtype_name(kv_data_type, op, "kv_data_type") or q
    o = dtype_name(o_data_type, op, "o_data_type") or q
    return q, kv, o


def dtype_of(x: Any) -> str:
    """The dtype name of a numpy array or a torch tensor ("float16", "bfloat16", ...)."""
    name = str(x.dtype)
    return name[6:] if name.startswith("torch.") else name


def _numpy_dtype(name: str, like: np.ndarray):
    """numpy has no bfloat16 or fp8 dtype of its own: outputs of those types are
    ml_dtypes arrays when ml_dtypes is loaded (or the input is one), else raw uint16 /
    uint8 storage holding the bits."""
    if name in ("float16", "float32", "int32", "uint8", "int64", "bool"):
        return np.dtype(name)
    if like.dtype.name == name or (name == "float8_e4m3" and like.dtype.name == "float8_e4m3fn"):
        return like.dtype
    ml = sys.modules.get("ml_dtypes")
    if ml is not None:
        return np.dtype(getattr(ml, "float8_e4m3fn" if name == "float8_e4m3" else name))
    return np.dtype(np.uint16 if name == "bfloat16" else np.uint8)


def _torch_dtype(torch, name: str):
    return getattr(torch, "float8_e4m3fn" if name == "float8_e4m3" else name)


def empty(like: Any, shape: Tuple[int, ...], dtype: str, op: str, arg: str) -> Any:
    """A new array of `like`'s kind (numpy, or torch on like's device) for an output
    FlashInfer allocates. Other array types need the output passed in."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, dtype=_numpy_dtype(dtype, like))
    torch = _torch()
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=_torch_dtype(torch, dtype), device=like.device)
    error(op, arg, "None", f"kvinfer allocates numpy arrays and torch tensors only; pass {arg}= for a "
          f"{type(like).__name__}")


def empty_like(like: Any, op: str, arg: str) -> Any:
    if isinstance(like, np.ndarray):
        return np.empty_like(like)
    torch = _torch()
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty_like(like)
    error(op, arg, "None", f"kvinfer allocates numpy arrays and torch tensors only; got {type(like).__name__}")


# ---------------------------------------------------------------- scalars, caches


def scale(x: Any, op: str, arg: str) -> float:
    """A dequantisation scale: None is 1; a float; a one-element host tensor. A device
    tensor would need a synchronising read (and cannot be captured in a CUDA graph)."""
    if x is None:
        return 1.0
    if isinstance(x, (float, int)):
        return float(x)
    shape = getattr(x, "shape", None)
    if shape is not None and int(np.prod(shape)) == 1:
        device = getattr(x, "device", "cpu")
        if str(device) == "cpu":
            return float(x.reshape(()).item() if hasattr(x, "reshape") else x)
    not_supported(op, arg, _short(x), "kvinfer takes a scalar scale (a Python float or a one-element CPU "
                  "tensor); per-head or device-resident scale tensors are not implemented")


def qk_scale(op: str, q_scale: Any, k_scale: Any) -> float:
    """The factor on the logits' scale: q_scale * k_scale (fp8 queries / keys)."""
    return scale(k_scale, op, "k_scale") * scale(q_scale, op, "q_scale")


def plan_options(logits_soft_cap: Any, rope_scale: Any, rope_theta: Any) -> Tuple[float, float, float]:
    """FlashInfer's None defaults as the C++ plan's values: no soft cap, RoPE scale 1 and
    theta 1e4."""
    return (float(logits_soft_cap or 0.0), 1.0 if rope_scale is None else float(rope_scale),
            1e4 if rope_theta is None else float(rope_theta))


def split_size(fixed_split_size: Optional[int], unit: int) -> int:
    """FlashInfer's fixed_split_size (in pages for a paged cache: unit page_size) in
    tokens, as the C++ plan takes it; -1: none."""
    return -1 if fixed_split_size is None else int(fixed_split_size) * int(unit)


def attention_plan_options(pos_encoding_mode: str, window_left: int, sm_scale: Optional[float],
                           logits_soft_cap: Any, rope_scale: Any, rope_theta: Any, backend: str,
                           dtypes: Tuple[str, str, str], split: int = -1, disable_split_kv: bool = False) -> tuple:
    """What the C++ plan() of a decode, prefill or cascade wrapper takes after the
    problem's shape, as one tuple (python/src/bind_attention.cpp's PlanOptions): the
    options, the (q, kv, o) dtype names of plan_dtypes(), and the split in tokens."""
    return (pos_encoding_mode, window_left, sm_scale, *plan_options(logits_soft_cap, rope_scale, rope_theta),
            backend, *dtypes, split, bool(disable_split_kv))


def split_cache(cache: Any) -> Tuple[Any, Any]:
    """FlashInfer's paged cache: one 5-D tensor, or a (k, v) pair of 4-D tensors."""
    if isinstance(cache, (tuple, list)):
        if len(cache) != 2:
            error("paged_kv_cache", "len(paged_kv_cache)", len(cache), "a (k_cache, v_cache) pair has 2 entries")
        return cache[0], cache[1]
    return cache, None


def host(x: Any) -> Any:
    """A length array plan() reads on the host (as FlashInfer's plan does): a torch
    tensor on a GPU is read back (one synchronisation); anything else goes as it is
    and the C++ plan checks it."""
    if is_torch_tensor(x) and x.device.type != "cpu":
        return x.cpu()
    return x


def copy_into(buf: Any, src: Any, non_blocking: bool, op: str, arg: str) -> Any:
    """CUDA-graph mode: the plan's arrays go into the caller's fixed buffer (whose
    address the captured graph holds), as FlashInfer's plan does. Returns the filled
    view buf[:len(src)]."""
    n = int(src.shape[0])
    if n > int(buf.shape[0]):
        error(op, arg, f"shape[0] {n}", f"must fit the CUDA-graph buffer given at construction ({buf.shape[0]})")
    view = buf[:n]
    if is_torch_tensor(buf):
        view.copy_(src, non_blocking=non_blocking)
    else:
        np.copyto(view, src)
    return view


def length(x: Any) -> int:
    return int(x.shape[0])


def rows(x: Any, op: str, arg: str) -> int:
    """x.shape[0] of an input whose output kvinfer allocates."""
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) == 0:
        error(op, arg, type(x).__name__, "must be an array with __dlpack__ or the buffer protocol (numpy, torch, ...)")
    return int(shape[0])


# ---------------------------------------------------------------- streams


def stream_arg(stream: Any, op: str) -> int:
    """stream=: a raw handle (int), a torch.cuda.Stream (.cuda_stream) or a CuPy
    stream (.ptr)."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    error(op, "stream", repr(stream), "must be an int handle, a torch.cuda.Stream or an object with .ptr")


def current_stream_fn(device: str):
    """The function that gives the raw current stream of `device` ("cuda:N"): torch's
    (read per call, as FlashInfer does), or the legacy default stream without torch."""
    index = int(device.split(":")[1]) if ":" in device else 0
    torch = _torch() or sys.modules.get("torch")
    if torch is None:
        return lambda: 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda: raw(index)
    return lambda: torch.cuda.current_stream(index).cuda_stream


def stream_of(x: Any, stream: Any, op: str) -> int:
    """The stream of a free function: stream= if given, else torch's current stream
    of x's device for a CUDA tensor, else 0 (the CPU backend ignores it)."""
    if stream is not None:
        return stream_arg(stream, op)
    if is_torch_tensor(x) and x.is_cuda:
        return current_stream_fn(str(x.device))()
    return 0


def compiling_fn():
    """torch.compiler.is_compiling when torch is loaded (dynamo reads it as True while
    it traces, so the wrappers then call their torch custom ops), else a constant.
    kvinfer/__init__.py imports torch first where it is installed, so this is fixed
    at import."""
    torch = _torch()
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None) if torch is not None else None
    return fn if fn is not None else _never


def _never() -> bool:
    return False


# kvinfer._torch_ops once torch is loaded: the torch custom ops the modules call while
# torch.compile traces them.
ops = None

