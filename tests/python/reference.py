# SPDX-License-Identifier: Apache-2.0
"""An independent float64 reference for the Python tests: dense scores per request, an
explicit visibility matrix, and the masks, window, soft cap, RoPE and ALiBi of SPEC §2-3.
Deliberately the plainest numpy: no split-KV, no online softmax, no tiling."""

from __future__ import annotations

import math

import numpy as np

LOG2E = 1.0 / math.log(2.0)


# ---------------------------------------------------------------- storage formats


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint32) << 16).view(np.float32)


def as_f64(x: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values of an array holding `dtype` ("float16", "bfloat16" bits, ...)."""
    if dtype == "bfloat16" and x.dtype == np.uint16:
        return bf16_bits_to_f32(x).astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def make(rng: np.random.Generator, shape, dtype: str = "float16") -> np.ndarray:
    """Unit-variance random data in the storage of `dtype` (bfloat16 as uint16 bits)."""
    x = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bfloat16":
        return to_bf16_bits(x)
    return x.astype(dtype)


# ---------------------------------------------------------------- attention


def rope(x: np.ndarray, positions: np.ndarray, rope_scale: float = 1.0, rope_theta: float = 1e4) -> np.ndarray:
    """Rotate-half RoPE: pairs (d, d + D/2), frequency theta^(-2d/D) / rope_scale."""
    d = x.shape[-1]
    half = d // 2
    freq = (1.0 / rope_scale) * rope_theta ** (-2.0 * np.arange(half) / d)
    ang = positions[:, None] * freq[None, :]  # [L, D/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def alibi_slopes_pow2(num_heads: int) -> np.ndarray:
    """The ALiBi slopes for a power-of-two head count: 2^(-8 (h + 1) / H)."""
    assert num_heads & (num_heads - 1) == 0
    return 2.0 ** (-8.0 * (np.arange(num_heads) + 1) / num_heads)


def attention(q, k, v, *, causal=False, window_left=-1, soft_cap=0.0, sm_scale=None, mask=None,
              pos_encoding="NONE", rope_scale=1.0, rope_theta=1e4):
    """One request. q [Lq, Hq, D], k [Lk, Hk, D], v [Lk, Hk, Dv] (float64, NHD);
    mask bool [Lq, Lk] or None. -> (o [Lq, Hq, Dv], lse [Lq, Hq] base 2); rows that see
    no key give o = 0, lse = -inf."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    lq, hq, d = q.shape
    lk, hk, dv = v.shape
    group = hq // hk
    i_pos = np.arange(lq) + lk - lq
    j = np.arange(lk)
    if pos_encoding == "ROPE_LLAMA":
        q = rope(q, i_pos.astype(np.float64), rope_scale, rope_theta)
        k = rope(k, j.astype(np.float64), rope_scale, rope_theta)
    kk = np.repeat(k, group, axis=1)
    vv = np.repeat(v, group, axis=1)
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    s = np.einsum("qhd,khd->hqk", q, kk) * scale  # [Hq, Lq, Lk]
    if pos_encoding == "ALIBI":
        slopes = alibi_slopes_pow2(hq)
        s = s + slopes[:, None, None] * (j[None, None, :] - i_pos[None, :, None])
    if soft_cap > 0:
        s = soft_cap * np.tanh(s / soft_cap)
    visible = np.ones((lq, lk), dtype=bool)
    if causal:
        visible &= j[None, :] <= i_pos[:, None]
    if window_left >= 0:
        visible &= j[None, :] >= i_pos[:, None] - window_left
    if mask is not None:
        visible &= np.asarray(mask, dtype=bool).reshape(lq, lk)
    s = np.where(visible[None], s, -np.inf)
    m = s.max(axis=-1, initial=-np.inf)
    finite = np.isfinite(m)
    p = np.where(finite[..., None], np.exp(s - np.where(finite, m, 0.0)[..., None]), 0.0)
    denom = p.sum(axis=-1)
    o = np.einsum("hqk,khd->qhd", p, vv) / np.where(denom > 0, denom, 1.0).T[..., None]
    lse = np.where(finite, (m + np.log(np.where(denom > 0, denom, 1.0))) * LOG2E, -np.inf).T
    return o, lse


def ragged(q, k, v, qo_indptr, kv_indptr, masks=None, **kw):
    """Batch of ragged requests (NHD). masks: per-request bool [qo_len, kv_len] or None."""
    outs, lses = [], []
    for b in range(len(qo_indptr) - 1):
        qs, qe, ks, ke = qo_indptr[b], qo_indptr[b + 1], kv_indptr[b], kv_indptr[b + 1]
        o, lse = attention(q[qs:qe], k[ks:ke], v[ks:ke], mask=None if masks is None else masks[b], **kw)
        outs.append(o)
        lses.append(lse)
    return np.concatenate(outs), np.concatenate(lses)


def gather_pages(cache_k, cache_v, indptr, indices, last_page_len, layout="NHD"):
    """Per request, its keys and values [kv_len, H, D] (NHD) from 4-D page storage."""
    out = []
    for b in range(len(indptr) - 1):
        pages = indices[indptr[b]:indptr[b + 1]]
        if len(pages) == 0:
            h, d = (cache_k.shape[2], cache_k.shape[3]) if layout == "NHD" else (cache_k.shape[1], cache_k.shape[3])
            out.append((np.zeros((0, h, d)), np.zeros((0, h, cache_v.shape[3]))))
            continue
        ks = cache_k[pages]
        vs = cache_v[pages]
        if layout == "HND":
            ks, vs = ks.transpose(0, 2, 1, 3), vs.transpose(0, 2, 1, 3)
        ks = ks.reshape(-1, *ks.shape[2:])
        vs = vs.reshape(-1, *vs.shape[2:])
        n = (len(pages) - 1) * cache_k.shape[1 if layout == "NHD" else 2] + last_page_len[b]
        out.append((ks[:n], vs[:n]))
    return out


def merge(v_a, s_a, v_b, s_b):
    """Base-2 LSE merge of two states (float64)."""
    m = np.maximum(s_a, s_b)
    finite = np.isfinite(m)
    mm = np.where(finite, m, 0.0)
    wa = np.where(np.isfinite(s_a), np.exp2(s_a - mm), 0.0)
    wb = np.where(np.isfinite(s_b), np.exp2(s_b - mm), 0.0)
    tot = wa + wb
    v = (wa[..., None] * v_a + wb[..., None] * v_b) / np.where(tot > 0, tot, 1.0)[..., None]
    s = np.where(tot > 0, mm + np.log2(np.where(tot > 0, tot, 1.0)), -np.inf)
    return v, s
