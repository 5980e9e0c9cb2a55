# SPDX-License-Identifier: Apache-2.0
"""Peers of paged decode on the GPU machine: torch SDPA (cuDNN and flash backends)
decode on PERF.md's shapes with contiguous KV, timed like bench_decode (CUDA
events, cold L2, median of >= 20 runs). Usage: peer_decode.py --json PATH."""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(1, 32768), (16, 8192), (64, 4096), (128, 2048), (256, 1024), (64, 16384)]
HQ, HK, D = 32, 8, 128


def time_ms(fn, runs):
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(runs):
        flush.zero_()  # evicts L2 (50 MB) before every timed run
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows = []
    torch.manual_seed(0)
    for b, l in SHAPES[: 2 if args.quick else None]:
        q = torch.randn(b, HQ, 1, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(b, HK, l, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(b, HK, l, D, dtype=torch.bfloat16, device="cuda")
        kv_bytes = 2 * b * l * HK * D * 2
        for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            try:
                with sdpa_kernel(backend):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    fn()
                    med, mn = time_ms(fn, max(args.runs, 20))
                row = {"name": f"{b}x{l}", "peer": f"torch sdpa {name}", "median_us": med * 1e3, "min_us": mn * 1e3,
                       "GBps": (kv_bytes + 2 * q.numel() * 2) / (med * 1e6)}
            except Exception as e:  # a backend that does not take this shape
                row = {"name": f"{b}x{l}", "peer": f"torch sdpa {name}", "error": str(e).splitlines()[0][:200]}
            rows.append(row)
            print(json.dumps(row))
        del q, k, v
        torch.cuda.empty_cache()
    out = {"bench": "peer_decode", "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
