# SPDX-License-Identifier: Apache-2.0
"""kvinfer's calls as torch custom ops (torch.library), with fake implementations, so
that torch.compile(fullgraph=True) of a model that calls them keeps one graph.

The Python API calls these only while torch.compile traces (torch.compiler.is_compiling);
eager calls go straight to the extension. Every op writes caller-allocated outputs
(mutates_args) and returns nothing, so the fake implementations only return. A wrapper
is named by its integer handle (kvinfer/_wrapper.py): the plan stays in the wrapper, and
a re-plan between calls of a compiled graph is seen by the next call.
"""

# No `from __future__ import annotations`: torch.library reads the annotations as types.
import inspect
import sys
from typing import Optional

import torch
from torch import Tensor

from . import _kvinfer, _utils
from ._wrapper import lookup

_LIB = "kvinfer"


def _stream(t: Tensor) -> int:
    return _utils.stream_of(t, None, "torch op")


def _op(name: str, mutates: tuple):
    def register(fn):
        op = torch.library.custom_op(f"{_LIB}::{name}", mutates_args=mutates)(fn)

        def _fake(*args, **kwargs) -> None:
            return None

        _fake.__signature__ = inspect.signature(fn)
        op.register_fake(_fake)
        return op

    return register


@_op("attention_run", ("out", "lse"))
def attention_run(handle: int, q: Tensor, k: Tensor, v: Optional[Tensor], out: Tensor, lse: Optional[Tensor],
                  k_scale: float, v_scale: float, enable_pdl: Optional[bool]) -> None:
    """run() of a decode, prefill or cascade wrapper (v None: k is the 5-D cache)."""
    w = lookup(handle)
    w._impl_run(q, k, v, out, lse, k_scale, v_scale, w._stream(None), enable_pdl)


@_op("mla_run", ("out", "lse"))
def mla_run(handle: int, q_nope: Tensor, q_pe: Optional[Tensor], ckv: Tensor, kpe: Optional[Tensor], out: Tensor,
            lse: Optional[Tensor], lse_base_e: bool, ckv_scale: float, kpe_scale: float) -> None:
    """run() of a BatchMLAPagedAttentionWrapper."""
    w = lookup(handle)
    w._impl_run(q_nope, q_pe, ckv, kpe, out, lse, lse_base_e, ckv_scale, kpe_scale, w._stream(None))


@_op("single_decode", ("out", "lse"))
def single_decode(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Optional[Tensor], kv_layout: str,
                  pos_encoding_mode: str, window_left: int, logits_soft_cap: float, sm_scale: Optional[float],
                  rope_scale: float, rope_theta: float, k_scale: float, v_scale: float) -> None:
    _kvinfer.single_decode(q, k, v, out, lse, kv_layout, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                           rope_scale, rope_theta, k_scale, v_scale, _stream(q))


@_op("single_prefill", ("out", "lse"))
def single_prefill(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Optional[Tensor], custom_mask: Optional[Tensor],
                   causal: bool, kv_layout: str, pos_encoding_mode: str, window_left: int, logits_soft_cap: float,
                   sm_scale: Optional[float], rope_scale: float, rope_theta: float, k_scale: float, v_scale: float,
                   backend: str) -> None:
    _kvinfer.single_prefill(q, k, v, out, lse, custom_mask, causal, kv_layout, pos_encoding_mode, window_left,
                            logits_soft_cap, sm_scale, rope_scale, rope_theta, k_scale, v_scale, backend, _stream(q))


@_op("merge_state", ("v_merged", "s_merged"))
def merge_state(v_a: Tensor, s_a: Tensor, v_b: Tensor, s_b: Tensor, v_merged: Tensor, s_merged: Tensor) -> None:
    _kvinfer.merge_state(v_a, s_a, v_b, s_b, v_merged, s_merged, _stream(v_a))


@_op("merge_state_in_place", ("v", "s"))
def merge_state_in_place(v: Tensor, s: Tensor, v_other: Tensor, s_other: Tensor, mask: Optional[Tensor]) -> None:
    _kvinfer.merge_state_in_place(v, s, v_other, s_other, mask, _stream(v))


@_op("merge_states", ("v_merged", "s_merged"))
def merge_states(v: Tensor, s: Tensor, v_merged: Tensor, s_merged: Tensor) -> None:
    _kvinfer.merge_states(v, s, v_merged, s_merged, _stream(v))


@_op("append_paged_kv_cache", ("k_cache", "v_cache"))
def append_paged_kv_cache(append_key: Tensor, append_value: Tensor, batch_indices: Tensor, positions: Tensor,
                          k_cache: Tensor, v_cache: Optional[Tensor], kv_indices: Tensor, kv_indptr: Tensor,
                          kv_last_page_len: Tensor, kv_layout: str) -> None:
    _kvinfer.append_paged_kv_cache(append_key, append_value, batch_indices, positions, k_cache, v_cache, kv_indices,
                                   kv_indptr, kv_last_page_len, kv_layout, _stream(append_key))


@_op("append_paged_mla_kv_cache", ("ckv_cache", "kpe_cache"))
def append_paged_mla_kv_cache(append_ckv: Tensor, append_kpe: Optional[Tensor], batch_indices: Tensor,
                              positions: Tensor, ckv_cache: Tensor, kpe_cache: Optional[Tensor], kv_indices: Tensor,
                              kv_indptr: Tensor, kv_last_page_len: Tensor) -> None:
    _kvinfer.append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, ckv_cache, kpe_cache,
                                       kv_indices, kv_indptr, kv_last_page_len, _stream(append_ckv))


@_op("get_batch_indices_positions", ("batch_indices", "positions"))
def get_batch_indices_positions(append_indptr: Tensor, seq_lens: Tensor, batch_indices: Tensor,
                                positions: Tensor) -> None:
    _kvinfer.get_batch_indices_positions(append_indptr, seq_lens, batch_indices, positions, _stream(append_indptr))


@_op("get_seq_lens", ("seq_lens",))
def get_seq_lens(kv_indptr: Tensor, kv_last_page_len: Tensor, page_size: int, seq_lens: Tensor) -> None:
    _kvinfer.get_seq_lens(kv_indptr, kv_last_page_len, page_size, seq_lens, _stream(kv_indptr))


@_op("packbits", ("out",))
def packbits(x: Tensor, out: Tensor, bitorder: str) -> None:
    _kvinfer.packbits(x, out, bitorder, _stream(x))


_utils.ops = sys.modules[__name__]
