#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the fixture log-4935be4/: the figures of the experiment log's last full GPU check
(docs/log/performance-2026-11-30.md, 2026-12-01 entries), typed in from its tables and put in
the exact form of scripts/gpu-check.sh's results.json and of
bench/flashinfer/peer_flashinfer.py's output. It is test data for tools/perf/make_report.py
and the source of the provisional docs/performance.md, not the output of a GPU check.

Every figure below is one the log prints. Where a benchmark's JSON holds a quantity that the
log gives only through a formula of the benchmark (GB/s from the time and the bytes, TFLOP/s
from the time and the FLOPs, a fraction from a rate and the ceiling), it is computed here with
that benchmark's formula and checked against the log's rounded figure (an assertion): the
fixture holds what the benchmark would have written, to the precision of the log. Figures the
log does not give are left out (the report prints "-").

  python3 tools/perf/testdata/transcribe_log.py   # rewrites tools/perf/testdata/log-4935be4/
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "log-4935be4")
LOG = "docs/log/performance-2026-11-30.md"

# Run 9 of the 2026-12-01 MLA entry ("session 19"), commit 4935be4: `scripts/gpu-check.sh`, every
# GPU test (335) and both sanitizers over them, every benchmark; the log records its decode,
# fp8, append, cascade and MLA figures and the ceilings as ranges over the benchmarks' own
# measurements (read 4497-4509 GB/s, cudaMemcpy 4227, cuBLAS 765-773 TFLOP/s).
RUN9 = f"{LOG}, 2026-12-01 (session 19), run 9 (4935be4)"
# The 2026-12-01 "session 18" entry: run 2 (37054ad; decode variants, layer steps, copy
# kernel) and run 7 (7c14815; FlashInfer decode), same decode kernels as run 9.
S18R2 = f"{LOG}, 2026-12-01 (session 18), run 2 (37054ad)"
S18R7 = f"{LOG}, 2026-12-01 (session 18), run 7 (7c14815)"
# The last prefill table of the log: the 2026-11-30 "session 6" entry, run G (9556201); the
# prefill kernels did not change after it (later entries: "Prefill kernels unchanged").
S6G = f"{LOG}, 2026-11-30 (session 6), run G (9556201)"

READ_CEILINGS, READ_DECODE, READ_MLA = 4497.0, 4509.0, 4497.0  # GB/s
COPY = 4227.0  # GB/s, cudaMemcpy D2D, run 9
COPY_KERNEL = 3831.0  # GB/s, session 18 run 2
GEMM_CEILINGS, GEMM_MLA = 765.0, 773.0  # TFLOP/s, run 9
GEMM_PREFILL = 792.0  # TFLOP/s, run G (bench_ceilings of that run)

DEVICE = {"name": "NVIDIA H200", "sm_count": 132, "cc": "9.0", "runtime": 13000}


def close(x, printed, digits):
    """x rounds to the log's printed figure (to `digits` decimals)."""
    assert round(x, digits) == round(printed, digits), (x, printed)
    return x


def ceiling(name, value, unit, detail, nbytes=None, flops=None):
    c = {"name": name, "value": value, "unit": unit, "detail": detail, "timing": {}}
    if nbytes:  # value = bytes / time (GB/s)
        c["timing"] = {"median_us": nbytes / (value * 1e3)}
    if flops:  # value = FLOPs / time (TFLOP/s)
        c["timing"] = {"median_us": flops / (value * 1e6)}
    return c


def bench(name, result, error=None):
    entry = {"name": name, "rc": 0 if error is None else 1, "seconds": None, "result": result}
    if error is not None:
        entry["error"] = error
    return entry


# ------------------------------------------------------------------ ceilings (run 9)
def ceilings():
    read = ceiling("read_bandwidth", READ_CEILINGS, "GB/s", "", nbytes=4 << 30)
    copy = ceiling("copy_bandwidth", COPY, "GB/s", "cudaMemcpyAsync D2D, bytes read + written", nbytes=2 * (2 << 30))
    copy_kernel = ceiling("copy_kernel_bandwidth", COPY_KERNEL, "GB/s",
                          "16-byte vector copy kernel, unroll 4, bytes read + written", nbytes=2 * (2 << 30))
    gemm = ceiling("gemm_bf16", GEMM_CEILINGS, "TFLOP/s",
                   "cublasGemmEx bf16 in/out, fp32 compute, 8192x8192x8192, random data", flops=2.0 * 8192**3)
    rows = []
    for c, name in ((read, "read_bandwidth"), (copy, "copy_bandwidth"), (copy_kernel, "copy_kernel_bandwidth"),
                    (gemm, "gemm_bf16")):
        rows.append({"name": name, "value": c["value"], "unit": c["unit"], "median_us": c["timing"]["median_us"],
                     "detail": c["detail"]})
    return {"device": DEVICE, "ceilings": {c["name"]: c for c in (read, copy, copy_kernel, gemm)}, "bench": "ceilings",
            "columns": ["name", "value", "unit", "median_us", "p10_us", "p90_us", "detail"], "rows": rows}


# ------------------------------------------------------------------ decode
HQ, HK, D = 32, 8, 128
SHAPES = [(1, 32768), (16, 8192), (64, 4096), (128, 2048), (256, 1024), (64, 16384)]
# Run 9: ours µs, of read BW, skewed of read BW, cuDNN µs, fp8 µs (None: not in the table).
RUN9_DECODE = {
    (1, 32768): (40.62, 0.73, 0.74, 41.12, 27.97),
    (16, 8192): (126.14, 0.94, 0.86, 125.14, 72.16),
    (64, 4096): (246.53, 0.97, 0.93, 244.61, 135.01),
    (128, 2048): (245.89, 0.97, 0.93, 244.99, 130.30),
    (256, 1024): (248.80, 0.96, 0.93, 247.07, None),
    (64, 16384): (961.89, 0.99, 0.99, 950.91, None),
}
# Run 9's ours/cuDNN and fp8/bf16 columns, to check the transcription.
RUN9_RATIOS = {(1, 32768): (0.988, 0.689), (16, 8192): (1.008, 0.572), (64, 4096): (1.008, 0.548),
               (128, 2048): (1.004, 0.530), (256, 1024): (1.007, None), (64, 16384): (1.012, None)}
# Session 18 run 2: the 64x4k variants, of read BW.
S18_VARIANTS = {"group1": 0.93, "group2": 0.97, "group8": 0.96, "d64": 0.93, "d256": 0.97, "page1": 0.94,
                "page64": 0.96, "HND": 0.96}
# Session 18 run 7: FlashInfer's decode (its faster path, tensor cores on, on every shape).
S18R7_FLASHINFER = {(1, 32768): 44.75, (16, 8192): 132.11, (64, 4096): 247.52, (128, 2048): 252.93,
                    (256, 1024): 260.67, (64, 16384): 953.89}


def kv_bytes(batch, length, elem=2, hk=HK, d=D):
    return 2.0 * batch * length * hk * d * elem


def decode_row(name, batch, length, kv_dtype="bfloat16", elem=2, hq=HQ, d=D, page=16, layout="NHD"):
    return {"name": name, "batch": batch, "kv_dtype": kv_dtype, "layout": layout, "Hq": hq, "Hk": HK, "D": d,
            "page": page, "kv_bytes": kv_bytes(batch, length, elem, d=d)}


def timed(row, us, read, printed_frac=None):
    io = 2.0 * row["batch"] * row["Hq"] * row["D"] * 2  # q and out, bf16
    gbps = (row["kv_bytes"] + io) / (us * 1e3)
    row.update(median_us=us, GBps=gbps, frac_read=gbps / read)
    if printed_frac is not None:
        close(row["frac_read"], printed_frac, 2)
    return row


def decode():
    rows = []
    for b, l in SHAPES:
        us, frac, _, _, _ = RUN9_DECODE[(b, l)]
        rows.append(timed(decode_row(f"{b}x{l}", b, l), us, READ_DECODE, frac))
    for b, l in SHAPES:
        row = decode_row(f"{b}x{l} skewed", b, l)
        row["frac_read"] = RUN9_DECODE[(b, l)][2]
        rows.append(row)
    for what, frac in S18_VARIANTS.items():
        hq = {"group1": 8, "group2": 16, "group8": 64}.get(what, HQ)
        d = {"d64": 64, "d256": 256}.get(what, D)
        page = {"page1": 1, "page64": 64}.get(what, 16)
        row = decode_row(f"64x4096 {what}", 64, 4096, hq=hq, d=d, page=page, layout="HND" if what == "HND" else "NHD")
        row["frac_read"] = frac
        rows.append(row)
    for b, l in [(64, 4096), (1, 32768), (16, 8192), (128, 2048)]:
        fp8_us = RUN9_DECODE[(b, l)][4]
        row = timed(decode_row(f"{b}x{l} fp8e4m3", b, l, "float8_e4m3", 1), fp8_us, READ_DECODE)
        close(fp8_us / RUN9_DECODE[(b, l)][0], RUN9_RATIOS[(b, l)][1], 3)
        rows.append(row)
    return {"device": DEVICE,
            "ceilings": {"read_bandwidth": ceiling("read_bandwidth", READ_DECODE, "GB/s", "", nbytes=4 << 30)},
            "target": "KV bytes read / time >= 90% of read bandwidth (equal lengths), >= 80% (skewed)",
            "bench": "decode",
            "columns": ["name", "kv_dtype", "median_us", "p10_us", "p90_us", "GBps", "frac_read", "read_same_us",
                        "frac_same_read"],
            "rows": rows}


def peer_decode():
    rows = []
    for b, l in SHAPES:
        us = RUN9_DECODE[(b, l)][3]
        close(RUN9_DECODE[(b, l)][0] / us, RUN9_RATIOS[(b, l)][0], 3)
        gbps = (kv_bytes(b, l) + 2 * (b * HQ * D) * 2) / (us * 1e3)
        rows.append({"name": f"{b}x{l}", "peer": "torch sdpa cudnn", "median_us": us, "GBps": gbps})
    return {"bench": "peer_decode", "device": "NVIDIA H200", "torch": "2.11", "rows": rows}


# ------------------------------------------------------------------ prefill (run G)
HEADS = 32
# shape -> (ragged µs, ragged TFLOP/s, ragged/paged16 time, FA2 / ours, cuDNN / ours, FI fa2 / ours,
# FI fa3 / ours: the peers' times over ours, as the log's table gives them).
RUN_G_PREFILL = {
    (16, 1024, 128, False): (734.3, 374, 0.986, 1.10, 0.62, 0.98, 0.71),
    (4, 4096, 128, False): (2495.8, 441, 0.953, 1.24, 0.70, 1.11, 0.68),
    (1, 16384, 128, False): (9741.4, 451, 0.960, 1.28, 0.73, 1.15, 0.73),
    (16, 1024, 128, True): (448.5, 307, 0.939, 1.18, 0.66, 1.03, 0.67),
    (4, 4096, 128, True): (1344.0, 409, 0.942, 1.24, 0.70, 1.13, 0.67),
    (1, 16384, 128, True): (4804.9, 458, 0.936, 1.35, 0.79, 1.22, 0.70),
    (16, 1024, 64, False): (382.8, 359, 0.925, 1.27, 0.81, 1.18, 0.90),
    (4, 4096, 64, False): (1423.4, 386, 0.959, 1.26, 0.80, 1.17, 0.78),
    (1, 16384, 64, False): (5561.1, 395, 0.944, 1.28, 0.85, 1.20, 0.78),
    (16, 1024, 64, True): (255.6, 269, 0.927, 1.27, 0.79, 1.13, 1.03),
    (4, 4096, 64, True): (787.0, 349, 0.951, 1.23, 0.80, 1.17, 0.83),
    (1, 16384, 64, True): (2838.9, 387, 0.937, 1.29, 0.85, 1.23, 0.79),
    (16, 1024, 256, False): (1156.4, 475, 0.969, 1.49, 0.71, 1.50, 0.75),
    (4, 4096, 256, False): (4029.3, 546, 0.983, 1.69, 0.82, 1.71, 0.93),
    (1, 16384, 256, False): (15206.0, 578, 0.946, 1.80, 0.88, 1.80, 0.86),
    (16, 1024, 256, True): (728.9, 377, 1.000, 1.50, 0.71, 1.38, 0.75),
    (4, 4096, 256, True): (2196.4, 501, 0.989, 1.63, 0.82, 1.63, 0.81),
    (1, 16384, 256, True): (7649.8, 575, 0.970, 1.82, 0.90, 1.82, 0.87),
}


def prefill_name(b, l, d, causal):
    return f"{b}x{l} d{d}" + (" causal" if causal else "")


def prefill_flops(b, l, d, causal):
    pairs = l * (l + 1) / 2 if causal else l * l
    return 4.0 * b * pairs * HEADS * d


def prefill_shapes():  # bench_prefill's order
    return [(b, l, d, c) for d in (128, 64, 256) for c in (False, True) for b, l in [(16, 1024), (4, 4096), (1, 16384)]]


def prefill():
    rows = []
    for b, l, d, causal in prefill_shapes():
        us, tflops, ratio = RUN_G_PREFILL[(b, l, d, causal)][:3]
        work = prefill_flops(b, l, d, causal)
        close(work / (us * 1e6), tflops, 0)
        for wrapper, t in (("ragged", us), ("paged16", us / ratio)):
            rows.append({"name": prefill_name(b, l, d, causal), "wrapper": wrapper, "batch": b, "len": l, "D": d,
                         "heads": HEADS, "causal": causal, "median_us": t, "TFLOPs": work / (t * 1e6),
                         "frac_gemm": work / (t * 1e6) / GEMM_PREFILL})
    return {"device": DEVICE,
            "ceilings": {"gemm_bf16": ceiling("gemm_bf16", GEMM_PREFILL, "TFLOP/s",
                                              "cublasGemmEx bf16 in/out, fp32 compute, 8192x8192x8192, random data",
                                              flops=2.0 * 8192**3)},
            "target": "ragged >= torch SDPA flash (FA2) TFLOP/s; paged16 >= 90% of ragged", "bench": "prefill",
            "columns": ["name", "wrapper", "median_us", "TFLOPs", "frac_gemm"], "rows": rows}


def peer_prefill():
    rows = []
    for b, l, d, causal in prefill_shapes():
        us, _, _, fa2, cudnn, _, _ = RUN_G_PREFILL[(b, l, d, causal)]
        work = prefill_flops(b, l, d, causal)
        for peer, ratio in (("flash", fa2), ("cudnn", cudnn)):
            t = us * ratio
            rows.append({"name": prefill_name(b, l, d, causal), "peer": f"torch sdpa {peer}", "median_us": t,
                         "TFLOPs": work / (t * 1e6)})
    return {"bench": "peer_prefill", "device": "NVIDIA H200", "torch": "2.11", "rows": rows}


def peer_flashinfer():
    rows = []
    for d in (64, 128, 256):
        for backend in ("fa2", "fa3"):
            for b, l in [(16, 1024), (4, 4096), (1, 16384)]:
                for causal in (False, True):
                    us, _, _, _, _, fa2, fa3 = RUN_G_PREFILL[(b, l, d, causal)]
                    t = us * (fa2 if backend == "fa2" else fa3)
                    work = prefill_flops(b, l, d, causal)
                    rows.append({"kind": "prefill_ragged", "backend": backend, "head_dim": d, "causal": causal,
                                 "num_requests": b, "qo_len": l, "kv_len": l, "qo_heads": HEADS, "kv_heads": HEADS,
                                 "dtype": "bf16", "flops": work, "time_us": t, "TFLOPs": work / (t * 1e6),
                                 "backend_resolved": backend})
    for b, l in SHAPES:
        t = S18R7_FLASHINFER[(b, l)]
        kvb, io = kv_bytes(b, l), 2.0 * b * HQ * D * 2
        rows.append({"kind": "decode_paged", "batch": b, "kv_len": l, "qo_heads": HQ, "kv_heads": HK, "head_dim": D,
                     "page_size": 16, "layout": "NHD", "dtype": "bf16", "use_tensor_cores": True, "kv_bytes": kvb,
                     "time_us": t, "GBps": (kvb + io) / (t * 1e3), "kv_GBps": kvb / (t * 1e3)})
    return {"bench": "peer_flashinfer", "python": "3.12", "flashinfer": "0.7.4", "torch": "2.11",
            "device": "NVIDIA H200", "capability": [9, 0], "rows": rows, "errors": [],
            "fixture": {"what": f"transcribed from {LOG} by tools/perf/testdata/transcribe_log.py",
                        "sources": {"prefill_ragged": S6G + "; times = the log's ratio (2-3 digits) x our time",
                                    "decode_paged": S18R7}}}


# ------------------------------------------------------------------ append, cascade (run 9)
def append():
    # bench_append's bytes for "even 8x625": K and V rows read and written, the token
    # indices, the page table of 8 requests whose appends start mid-page.
    nnz, batch, heads, d = 5000, 8, 8, 128
    pages = 0
    for b in range(batch):
        length = (37 * b + 11) % 53 + 625
        pages += (length + 15) // 16
    data = 2 * nnz * heads * d * 2
    nbytes = 2 * data + nnz * 8 + (batch + 1 + pages + batch) * 4
    us = 12.90
    gbps = nbytes / (us * 1e3)
    rows = [{"name": "even 8x625", "kernel": "default (registers_x4)", "dtype": "bfloat16", "layout": "NHD",
             "nnz": nnz, "batch": batch, "bytes": nbytes, "median_us": us, "GBps": gbps,
             "frac_copy": close(gbps / COPY, 0.75, 2), "matches_cpu": True},
            {"name": "same-size copy (reference)", "kernel": "cudaMemcpyAsync D2D", "dtype": "bfloat16", "layout": "-",
             "nnz": nnz, "bytes": 2.0 * data, "frac_copy": 0.83, "matches_cpu": "-"}]
    return {"device": DEVICE,
            "ceilings": {"copy_bandwidth": ceiling("copy_bandwidth", COPY, "GB/s",
                                                   "cudaMemcpyAsync D2D, bytes read + written", nbytes=2 * (2 << 30))},
            "target": "bytes read + written / time >= 80% of copy bandwidth (5000-token patterns)", "bench": "append",
            "columns": ["name", "kernel", "dtype", "layout", "nnz", "median_us", "p10_us", "p90_us", "GBps",
                        "frac_copy", "matches_cpu"],
            "rows": rows}


def cascade():
    plain, casc = 730.2, 113.8
    return {"device": DEVICE, "target": "cascade time <= 1/10 of plain paged decode of the same batch",
            "bench": "cascade", "columns": ["name", "plain_us", "cascade_us", "ratio"],
            "rows": [{"name": "64 x (32k shared + 256)", "batch": 64, "plain_us": plain, "cascade_us": casc,
                      "ratio": close(casc / plain, 0.156, 3)}]}


# ------------------------------------------------------------------ layer steps (session 18 run 2)
# B x L -> µs per layer: append+decode, with PDL, saved; decode only, with PDL, saved.
S18_LAYERS = {
    (1, 1024): (13.99, 12.53, 1.46, 10.81, 9.68, 1.13),
    (16, 1024): (24.76, 23.32, 1.44, 21.02, 19.85, 1.16),
    (64, 1024): (69.29, 67.97, 1.31, 65.27, 64.61, 0.66),
    (16, 8192): (126.09, 126.68, -0.60, 122.41, 122.99, -0.58),
    (64, 4096): (243.70, 243.46, 0.24, 239.86, 240.98, -1.12),
}


def layer_steps():
    rows = []
    for (b, l), figures in S18_LAYERS.items():
        kvb = kv_bytes(b, l)
        for append_too, (off, on, saved) in ((True, figures[:3]), (False, figures[3:])):
            for pdl, us in ((False, off), (True, on)):
                name = f"{b}x{l}" + (" append+decode" if append_too else " decode") + (" pdl" if pdl else "")
                rows.append({"name": name,
                             "batch": b, "kv_len": l, "append": append_too, "enable_pdl": pdl, "layers": 8,
                             "us_per_layer": us, "saved_us_per_layer": saved if pdl else 0.0,
                             "decode_kv_GBps": kvb / (us * 1e3)})
    return {"device": DEVICE, "layers": 8,
            "what": "per layer: append one token per request, then decode; pdl: RunOptions::enable_pdl",
            "bench": "layer_steps",
            "columns": ["name", "median_us", "us_per_layer", "saved_us_per_layer", "decode_kv_GBps"],
            "rows": rows}


# ------------------------------------------------------------------ MLA (run 9)
# shape -> µs and the log's GB/s, of read, TFLOP/s, of GEMM.
RUN9_MLA = [
    ((128, 4096, 16, "bfloat16"), 170.53, (3568, 0.79, 107.0, 0.14)),
    ((128, 8192, 16, "bfloat16"), 313.18, (3871, 0.86, 116.6, 0.15)),
    ((128, 4096, 128, "bfloat16"), 671.95, (952, 0.21, 217.3, 0.28)),
    ((128, 8192, 128, "bfloat16"), 1293.30, (962, 0.21, 225.8, 0.29)),
    ((128, 4096, 16, "float8_e4m3"), 207.26, (1479, 0.33, 88.1, 0.11)),
    ((128, 8192, 16, "float8_e4m3"), 399.84, (1522, 0.34, 91.3, 0.12)),
]


def mla():
    rows = []
    for (b, kv, h, dt), us, (gbps_p, of_read_p, tflops_p, of_gemm_p) in RUN9_MLA:
        elem = 1 if dt.startswith("float8") else 2
        kvb = b * kv * (512 + 64) * elem
        qob = b * h * (2 * 512 + 64) * 2.0
        flops = 2.0 * b * h * kv * (512 + 64 + 512)
        gbps, tflops = (kvb + qob) / (us * 1e3), flops / (us * 1e6)
        close(gbps, gbps_p, 0)
        close(tflops, tflops_p, 1)
        name = f"{b} x {kv // 1024}k H{h}" + ("" if dt == "bfloat16" else " fp8")
        rows.append({"name": name, "batch": b, "kv_len": kv, "heads": h, "kv_dtype": dt, "us": us, "gbps": gbps,
                     "of_read": close(gbps / READ_MLA, of_read_p, 2), "tflops": tflops,
                     "of_gemm": close(tflops / GEMM_MLA, of_gemm_p, 2)})
    return {"device": DEVICE,
            "ceilings": {"read_bandwidth": ceiling("read_bandwidth", READ_MLA, "GB/s", "", nbytes=4 << 30),
                         "gemm_bf16": ceiling("gemm_bf16", GEMM_MLA, "TFLOP/s",
                                              "cublasGemmEx bf16 in/out, fp32 compute, 8192x8192x8192, random data",
                                              flops=2.0 * 8192**3)},
            "target": "memory-bound >= 80% of read bandwidth; compute-bound >= 500 TFLOP/s", "bench": "mla",
            "columns": ["name", "us", "gbps", "of_read", "tflops", "of_gemm"], "rows": rows}


def main():
    os.makedirs(OUT, exist_ok=True)
    san = [{"binary": "kvinfer_test_cuda", "tool": tool, "shards": 3, "rc": "0 0 0", "tests_passed": 335, "errors": "0",
            "seconds": None} for tool in ("memcheck", "racecheck")]
    results = {
        "fixture": {
            "what": f"figures transcribed from the experiment log ({LOG}) by tools/perf/testdata/transcribe_log.py, "
                    "the test data of tools/perf/make_report.py",
            "caveat": "Where a table puts figures of different runs side by side (FlashInfer's decode and the decode "
                      "variants beside run 9's decode; prefill, from an older run, beside everything else), its ratios "
                      "compare runs, not one run. The next GPU check's JSON in docs/data/ replaces all of them "
                      "(python3 tools/perf/make_report.py).",
            "sources": {
                "run": RUN9 + ": GPU tests and sanitizers (335 tests)",
                "bench_ceilings": RUN9 + " (read and cuBLAS: the low ends of the log's ranges); copy kernel: "
                                  + S18R2,
                "bench_append": RUN9,
                "bench_cascade": RUN9,
                "bench_cpu_attention": "not in the log for the GPU machine",
                "bench_decode": RUN9 + " (equal, skewed and fp8 shapes; its read ceiling: the top of the log's range, "
                                "which its fractions imply); 64x4096 variants: " + S18R2,
                "bench_layer_steps": S18R2,
                "bench_mla": RUN9,
                "bench_prefill": S6G + " (ragged times; paged16 times from the log's time ratios; the GEMM rate "
                                 "of that run)",
                "peer_decode": RUN9 + " (cuDNN only; torch flash not in the log for these runs)",
                "peer_prefill": S6G + " (times = the log's ratio, 2-3 digits, x our time)",
            },
        },
        "run": {"date": "2026-12-01", "commit": "4935be4",
                "log_head": ["date: 2026-12-01", "commit: 4935be4", "name, driver_version", "NVIDIA H200, 580.159.04"]},
        "build_ok": True,
        "status": 0,
        "gpu_tests": {"total": 335, "ran": 335, "skipped": 0, "failed": 0, "failed_names": []},
        "sanitizer": san,
        "benchmarks": [
            bench("bench_ceilings", ceilings()),
            bench("bench_append", append()),
            bench("bench_cascade", cascade()),
            bench("bench_cpu_attention", None, "no JSON: the log has no figures of it from the GPU machine"),
            bench("bench_decode", decode()),
            bench("bench_layer_steps", layer_steps()),
            bench("bench_mla", mla()),
            bench("bench_prefill", prefill()),
            bench("peer_decode", peer_decode()),
            bench("peer_prefill", peer_prefill()),
        ],
    }
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "peer_flashinfer.json"), "w") as f:
        json.dump(peer_flashinfer(), f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}/results.json and peer_flashinfer.json")


if __name__ == "__main__":
    main()
