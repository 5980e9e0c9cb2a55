#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host cost of a decode step through the Python API: one plan() plus 32 run() calls
(Hq 32 / Hk 8, head_dim 128, page 16, bf16; batch 1, 64, 1024), host wall time per step,
median over >= 100 steps, the device synchronised between steps (untimed) so that the
launch queue never fills. Rows: kvinfer's C++ calls (the same plan and runs timed inside
the extension, no Python), kvinfer's Python API, and FlashInfer's wrapper where
flashinfer imports (the bench/flashinfer bundle). Each run() is given out= (no
allocation); "per run" subtracts the step's plan() (timed alone the same way).

    python3 bench/python/bench_host.py [--device cuda|cpu] [--steps 200] [--json out.json]

On the CPU the run() calls compute (there is no queue): there the default is one page
per request (--kv-len 16) and numpy arrays when torch is not installed, so that the
Python-minus-C++ difference, the host overhead, is what shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HQ, HK, D, PS = 32, 8, 128, 16
RUNS_PER_STEP = 32
KV_LEN = 1024  # tokens per request


def import_flashinfer():
    try:
        import flashinfer
        return flashinfer
    except ImportError:
        pass
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "flashinfer"))
    try:
        import fi_bundle
        fi_bundle.activate(allow_jit=False, quiet=True)
        import flashinfer
        return flashinfer
    except Exception as e:  # no bundle / other Python: no FlashInfer row
        print(f"flashinfer: not available ({type(e).__name__}: {e})", file=sys.stderr)
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cuda (default when a GPU is there) or cpu")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batches", default=None, help="default 1,64,1024 (GPU), 1,64 (CPU)")
    ap.add_argument("--kv-len", type=int, default=None, help=f"tokens per request ({KV_LEN} on a GPU, {PS} on the CPU)")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    fi = None if args.no_flashinfer else import_flashinfer()  # before torch: the bundle's sys.path
    try:
        import torch
    except ImportError:
        torch = None

    import kvinfer

    have_gpu = torch is not None and torch.cuda.is_available() and kvinfer.cuda_backend_built()
    device = args.device or ("cuda" if have_gpu else "cpu")
    cuda = device.startswith("cuda")
    if not cuda:
        fi = None  # FlashInfer has no CPU backend
    kv_len = args.kv_len if args.kv_len is not None else (KV_LEN if cuda else PS)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    stream_of = (lambda: torch.cuda.current_stream().cuda_stream) if cuda else (lambda: 0)
    rng = np.random.default_rng(0)

    if torch is not None:
        def randn(*shape):
            return torch.randn(*shape, dtype=torch.bfloat16, device=device)

        def ints(x, dev=device):
            return torch.from_numpy(np.asarray(x, np.int32)).to(dev)

        def zeros_u8(n):
            return torch.zeros(n, dtype=torch.uint8, device=device)
        bf16 = torch.bfloat16
    else:  # numpy: bf16 as uint16 bits, the dtype named by the plan
        def randn(*shape):
            return (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)

        def ints(x, dev=None):
            return np.asarray(x, np.int32)

        def zeros_u8(n):
            return np.zeros(n, np.uint8)
        bf16 = "bfloat16"

    rows = []
    report = {"device": torch.cuda.get_device_name() if cuda else "cpu",
              "torch": getattr(torch, "__version__", None), "kvinfer": kvinfer.__version__,
              "flashinfer": getattr(fi, "__version__", None), "runs_per_step": RUNS_PER_STEP, "steps": args.steps,
              "kv_len": kv_len, "rows": rows}
    batches = args.batches or ("1,64,1024" if cuda else "1,64")
    for batch in (int(b) for b in batches.split(",")):
        pages_per_req = (kv_len + PS - 1) // PS
        num_pages = batch * pages_per_req
        indptr_h = np.arange(0, num_pages + 1, pages_per_req, dtype=np.int32)
        last_h = np.full(batch, kv_len - (pages_per_req - 1) * PS, np.int32)
        indices = ints(rng.permutation(num_pages))
        cache = randn(num_pages, 2, PS, HK, D)
        q = randn(batch, HQ, D)
        out = randn(batch, HQ, D)
        ws = zeros_u8(256 << 20)

        def measure(step, warmup=10):
            for _ in range(warmup):
                step()
                sync()
            ts = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                step()
                ts.append((time.perf_counter() - t0) * 1e6)
                sync()
            return statistics.median(ts)

        libs = [("kvinfer", kvinfer)] + ([("flashinfer", fi)] if fi is not None else [])
        for name, lib in libs:
            w = lib.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
            # As FlashInfer's users call it: the page table on the device (plan reads
            # indptr / last_page_len back), q and KV dtypes named.
            plan_args = (ints(indptr_h), indices, ints(last_h), HQ, HK, D, PS)
            plan_kw = dict(q_data_type=bf16, kv_data_type=bf16)

            def plan_only():
                w.plan(*plan_args, **plan_kw)

            def step():
                w.plan(*plan_args, **plan_kw)
                for _ in range(RUNS_PER_STEP):
                    w.run(q, cache, out=out)

            def runs_only():
                for _ in range(RUNS_PER_STEP):
                    w.run(q, cache, out=out)

            plan_us = measure(plan_only)
            step_us = measure(step)
            w.plan(*plan_args, **plan_kw)
            runs_us = measure(runs_only)  # the runs of one plan, without plan() in the step
            rows.append({"impl": f"{name} python", "batch": batch, "step_us": round(step_us, 2),
                         "plan_us": round(plan_us, 2), "per_run_us": round((step_us - plan_us) / RUNS_PER_STEP, 3),
                         "runs_only_per_run_us": round(runs_us / RUNS_PER_STEP, 3)})
            print(json.dumps(rows[-1]), flush=True)
            if name != "kvinfer":
                continue
            # kvinfer's C++ calls on the same tensors: the plan (host lengths, read in
            # place) and the runs timed inside the extension.
            w.plan(ints(indptr_h, "cpu"), indices, ints(last_h, "cpu"), HQ, HK, D, PS, **plan_kw)
            impl, st = w._impl, stream_of()
            for _ in range(10):
                impl.time_step(q, cache, None, out, RUNS_PER_STEP, st)
                sync()
            plan_ts, step_ts, runs_ts = [], [], []
            for _ in range(args.steps):
                plan_ts.append(impl.time_step(q, cache, None, out, 0, st))
                sync()
                step_ts.append(impl.time_step(q, cache, None, out, RUNS_PER_STEP, st))
                sync()
                runs_ts.append(impl.time_step(q, cache, None, out, RUNS_PER_STEP, st, False))
                sync()
            cp, cs, cr = statistics.median(plan_ts), statistics.median(step_ts), statistics.median(runs_ts)
            rows.append({"impl": "kvinfer c++", "batch": batch, "step_us": round(cs, 2), "plan_us": round(cp, 2),
                         "per_run_us": round((cs - cp) / RUNS_PER_STEP, 3),
                         "runs_only_per_run_us": round(cr / RUNS_PER_STEP, 3)})
            print(json.dumps(rows[-1]), flush=True)

    print("\n| impl | batch | step µs | plan µs | per run µs |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['impl']} | {r['batch']} | {r['step_us']} | {r['plan_us']} | {r['per_run_us']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
