# SPDX-License-Identifier: Apache-2.0
"""Bit packing of boolean masks (FlashInfer's ``flashinfer.quantization`` packbits),
with numpy.packbits' semantics: bitorder "big" (numpy's default: the first element is
bit 7) or "little" (bit k of a byte is element 8 * byte + k; what attention masks use).
"""

from __future__ import annotations

from typing import Any, Tuple

from . import _kvinfer, _utils

_compiling = _utils.compiling_fn()


def packbits(x: Any, bitorder: str = "big") -> Any:
    """x bool / uint8 [n] (non-zero is true) -> uint8 [ceil(n / 8)] on x's device."""
    op = "packbits"
    out = _utils.empty(x, ((int(x.shape[0]) + 7) // 8,) if len(x.shape) == 1 else (0,), "uint8", op, "out")
    if _compiling():
        _utils.ops.packbits(x, out, bitorder)
    else:
        _kvinfer.packbits(x, out, bitorder, _utils.stream_of(x, None, op))
    return out


def segment_packbits(x: Any, indptr: Any, bitorder: str = "big") -> Tuple[Any, Any]:
    """Packs each segment x[indptr[i]:indptr[i+1]] separately, each padded to a whole
    byte: -> (y uint8 [new_indptr[-1]], new_indptr int32 [batch_size + 1]) on x's device,
    with new_indptr[i+1] - new_indptr[i] == ceil(segment length / 8). The output size
    depends on indptr's values (read on the host), so torch.compile cannot trace it (as
    FlashInfer's)."""
    return _kvinfer.segment_packbits(x, indptr, bitorder, _utils.stream_of(x, None, "segment_packbits"))
