# SPDX-License-Identifier: Apache-2.0
"""Peers of ragged prefill on the GPU machine: torch SDPA's flash backend
(FlashAttention-2) and cuDNN backend on bench_prefill's shapes (16k tokens as
16x1k, 4x4k, 1x16k; 32 heads; bf16; head_dim 64/128/256; causal and not; and 4x4k
at head_dim 128 with GQA 32/8, as enable_gqa), timed like bench_prefill (CUDA
events, cold L2, median of >= 20 runs). bench_prefill's skewed batch has no dense
counterpart here.
Usage: peer_prefill.py --json PATH."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from peer_timing import finish, parse_args, sdpa_rows  # noqa: E402

SHAPES = [(16, 1024), (4, 4096), (1, 16384)]
HEADS = 32


def main():
    args = parse_args()
    rows = []
    torch.manual_seed(0)
    configs = [(d, causal, b, l, HEADS) for d in (128, 64, 256) for causal in (False, True) for b, l in SHAPES]
    configs += [(128, causal, 4, 4096, 8) for causal in (False, True)]
    for d, causal, b, l, kv_heads in configs[: 2 if args.quick else None]:
        q = torch.randn(b, HEADS, l, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, kv_heads, l, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, kv_heads, l, d, dtype=torch.bfloat16, device="cuda")
        pairs = l * (l + 1) / 2 if causal else l * l
        flops = 4.0 * b * pairs * HEADS * d
        gqa = kv_heads != HEADS
        name = f"{b}x{l} d{d}" + (f" gqa{HEADS}/{kv_heads}" if gqa else "") + (" causal" if causal else "")
        rows += sdpa_rows(name, [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)],
                          lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa),
                          args.runs, lambda med: {"TFLOPs": flops / (med * 1e9)})
        del q, k, v
        torch.cuda.empty_cache()
    finish(args, "peer_prefill", rows)


if __name__ == "__main__":
    main()
