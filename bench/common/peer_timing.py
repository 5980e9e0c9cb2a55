# SPDX-License-Identifier: Apache-2.0
"""Timing and reporting shared by the peer benchmarks (bench/peer_*.py), measured as
bench/common measures ours: CUDA events, warm-up, L2 evicted before every timed run,
median (and minimum) of >= 20 runs; the JSON has the shape of bench/common/report.hpp's."""
import argparse
import json
import statistics

import torch


def parse_args(runs=20):
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--quick", action="store_true")
    return ap.parse_args()


def time_ms(fn, runs, warmup=3):
    """Median and minimum milliseconds of fn() over max(runs, 20) cold-L2 runs."""
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(runs, 20)):
        flush.zero_()  # evicts L2 (50 MB) before every timed run
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def finish(args, bench, rows):
    out = {"bench": bench, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
