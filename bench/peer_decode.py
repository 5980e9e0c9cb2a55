# SPDX-License-Identifier: Apache-2.0
"""Peers of paged decode on the GPU machine: torch SDPA (cuDNN and flash backends)
decode on PERF.md's shapes with contiguous KV, timed like bench_decode (CUDA
events, cold L2, median of >= 20 runs). Usage: peer_decode.py --json PATH.
--profile SHAPE[,SHAPE] (e.g. 16x8192) runs only those shapes, three untimed calls of
each backend and no L2 eviction, for a profiler (scripts/gpu-profile.sh OUT peer_decode SHAPE)."""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from peer_timing import finish, parse_args, time_ms  # noqa: E402

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
        for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            try:
                with sdpa_kernel(backend):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    fn()
                    if args.profile:
                        for _ in range(3):
                            fn()
                        torch.cuda.synchronize()
                        continue
                    med, mn = time_ms(fn, args.runs, warmup=5)
                row = {"name": f"{b}x{l}", "peer": f"torch sdpa {name}", "median_us": med * 1e3, "min_us": mn * 1e3,
                       "GBps": (kv_bytes + 2 * q.numel() * 2) / (med * 1e6)}
            except Exception as e:  # a backend that does not take this shape
                row = {"name": f"{b}x{l}", "peer": f"torch sdpa {name}", "error": str(e).splitlines()[0][:200]}
            rows.append(row)
            print(json.dumps(row))
        del q, k, v
        torch.cuda.empty_cache()
    finish(args, "peer_decode", rows)


if __name__ == "__main__":
    main()
