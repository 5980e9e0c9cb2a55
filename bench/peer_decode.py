# SPDX-License-Identifier: Apache-2.0
"""Peers of paged decode on the GPU machine: torch SDPA (cuDNN and flash backends)
decode on PERF.md's shapes with contiguous KV, timed like bench_decode (CUDA
events, cold L2, median of >= 20 runs). Usage: peer_decode.py --json PATH.
--profile SHAPE[,SHAPE] (e.g. 16x8192) runs only those shapes, three untimed calls of
each backend and no L2 eviction, for a profiler (scripts/gpu-profile.sh OUT peer_decode SHAPE)."""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from peer_timing import finish, parse_args, sdpa_rows  # noqa: E402

SHAPES = [(1, 32768), (16, 8192), (64, 4096), (128, 2048), (256, 1024), (64, 16384)]
HQ, HK, D = 32, 8, 128


def main():
    args = parse_args(runs=30, extra=[("--profile", "")])
    rows = []
    torch.manual_seed(0)
    shapes = SHAPES[: 2 if args.quick else None]
    if args.profile:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.profile.split(",")]
    for b, l in shapes:
        q = torch.randn(b, HQ, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, HK, l, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, HK, l, D, dtype=torch.bfloat16, device="cuda")
        kv_bytes = 2 * b * l * HK * D * 2
        rows += sdpa_rows(f"{b}x{l}", [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)],
                          lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), args.runs,
                          lambda med: {"GBps": (kv_bytes + 2 * q.numel() * 2) / (med * 1e6)}, warmup=5,
                          profile=bool(args.profile))
        del q, k, v
        torch.cuda.empty_cache()
    finish(args, "peer_decode", rows)


if __name__ == "__main__":
    main()
