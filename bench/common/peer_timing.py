# SPDX-License-Identifier: Apache-2.0
"""Timing and reporting shared by the peer benchmarks (bench/peer_*.py), measured as
bench/common measures ours: CUDA events, warm-up, L2 evicted (by a read) before every timed run,
median (and minimum) of >= 20 runs; the JSON has the shape of bench/common/report.hpp's."""
import argparse
import json
import statistics
import time

import torch
from torch.nn.attention import sdpa_kernel


def parse_args(runs=20, extra=()):
    """The common options, and (name, default) string options of one benchmark."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--quick", action="store_true")
    for name, default in extra:
        ap.add_argument(name, default=default)
    return ap.parse_args()


def time_ms(fn, runs, warmup=3, warmup_ms=50.0):
    """Median and minimum milliseconds of fn() over max(runs, 20) cold-L2 runs, after
    untimed calls (at least `warmup`, for at least warmup_ms), as bench/common does."""
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")  # 256 MB, 4x the L2, as ours

    def evict():
        # A read, as ours: a write would leave the L2 full of dirty lines whose
        # write-back the timed run would pay (50 MB: 12 us of a 45 us decode).
        torch.sum(flush, dtype=torch.int64)

    start = time.perf_counter()
    i = 0
    while i < warmup or (time.perf_counter() - start) * 1e3 < warmup_ms:
        evict()
        fn()
        i += 1
        if i % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(runs, 20)):
        evict()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def sdpa_rows(name, backends, call, runs, metrics, warmup=3, profile=False):
    """call() (a torch SDPA call on one shape) under each (peer, SDPBackend) of
    `backends`: a row per backend with the median and minimum µs and metrics(median ms),
    or the error of a backend that does not take the shape; each printed as it comes.
    profile: three untimed calls each, for a profiler, and no rows."""
    rows = []
    for peer, backend in backends:
        try:
            with sdpa_kernel(backend):
                call()
                if profile:
                    for _ in range(3):
                        call()
                    torch.cuda.synchronize()
                    continue
                med, mn = time_ms(call, runs, warmup=warmup)
            row = {"name": name, "peer": f"torch sdpa {peer}", "median_us": med * 1e3, "min_us": mn * 1e3,
                   **metrics(med)}
        except Exception as e:  # a backend that does not take this shape
            row = {"name": name, "peer": f"torch sdpa {peer}", "error": str(e).splitlines()[0][:200]}
        rows.append(row)
        print(json.dumps(row))
    return rows


def finish(args, bench, rows):
    out = {"bench": bench, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
