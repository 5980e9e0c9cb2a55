# SPDX-License-Identifier: Apache-2.0
"""FlashInfer as a benchmark peer on the GPU machine, from the bundle that
bench/flashinfer/stage.sh staged into .deps/flashinfer (carry `.deps`).

  python3 bench/flashinfer/peer_flashinfer.py --out results.json [--quick] [--no-jit]

(a) BatchPrefillWithRaggedKVCacheWrapper, backends fa2 and fa3, bf16, 32 qo / 32 kv
    heads, head_dim 64/128/256, causal and not, 16k tokens as 16x1k, 4x4k, 1x16k
    (qo_len == kv_len per request). FLOPs = 4 * heads * head_dim * pairs, pairs =
    sum L*L (non-causal) or sum L*(L+1)/2 (causal).
(b) BatchDecodeWithPagedKVCacheWrapper, bf16, 32 qo / 8 kv heads, head_dim 128,
    page 16, NHD, combined cache [pages, 2, 16, 8, 128], shuffled page ids (as in
    bench_decode), (B, L) in PERF.md's shapes; CUDA-core decode (use_tensor_cores
    False, backend auto) and tensor-core decode (use_tensor_cores True, fa2).
    GBps = (KV bytes + q + out bytes) / time; kv_GBps = KV bytes / time.
(c) BatchMLAPagedAttentionWrapper (backend fa3 by default, --mla-backends), bf16,
    DeepSeek's latent cache (ckv 512 + kpe 64 as two caches), page 64, one query
    token per request, batch 128 at kv 4k and 8k, 16 and 128 heads (bench_mla's
    shapes, shuffled page ids). FLOPs = 2 * rows * keys * (576 + 512) as bench_mla
    counts them; GBps = (latent bytes + q + out bytes) / time.
Timing: CUDA events around run() only, a 256 MB buffer read before every run
(cold L2), median (and min) of --runs >= 20 runs after at least 50 ms (and 3 calls)
of untimed ones. Each row also
carries max |err| against torch SDPA on one request. A failure is recorded as
the row's "error" and the script goes on."""
import argparse
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fi_bundle  # noqa: E402

HEADS, PREFILL_TOKENS = 32, 16384
PREFILL_SPLITS = [(16, 1024), (4, 4096), (1, 16384)]
HEAD_DIMS = [64, 128, 256]
DEC_HQ, DEC_HK, DEC_D, PAGE = 32, 8, 128, 16
DECODE_SHAPES = [(1, 32768), (16, 8192), (64, 4096), (128, 2048), (256, 1024), (64, 16384)]
MLA_CKV, MLA_KPE, MLA_PAGE = 512, 64, 64
MLA_SHAPES = [(128, 4096, 16), (128, 8192, 16), (128, 4096, 128), (128, 8192, 128)]  # (batch, kv, heads)


def err_str(e):
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 2000 else s[:2000] + "...(cut)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results.json")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="one shape of each kind (smoke test)")
    ap.add_argument("--no-jit", action="store_true",
                    help="FLASHINFER_DISABLE_JIT=1: a module missing from the bundle is an error, not a build")
    ap.add_argument("--backends", default="fa2,fa3")
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--skip-mla", action="store_true")
    ap.add_argument("--mla-backends", default="fa3")
    ap.add_argument("--bundle", default=None, help="bundle folder (default <repo>/.deps/flashinfer)")
    args = ap.parse_args()
    runs = max(args.runs, 20)
    out = {"bench": "peer_flashinfer", "python": sys.version.split()[0], "rows": [], "errors": []}

    def dump():
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)

    t0 = time.time()
    try:
        out["bundle"] = fi_bundle.activate(args.bundle, allow_jit=not args.no_jit)
        import torch
        import flashinfer
        from flashinfer.jit import env as jit_env
    except Exception as e:  # no bundle / wrong Python / import error: say so and stop
        out["errors"].append("setup: " + err_str(e))
        out["traceback"] = traceback.format_exc()
        dump()
        print(out["traceback"], file=sys.stderr)
        print(f"FAILED to set up FlashInfer: {err_str(e)}", file=sys.stderr)
        sys.exit(2)
    out.update(flashinfer=flashinfer.__version__, torch=torch.__version__, flashinfer_file=flashinfer.__file__,
               setup_s=round(time.time() - t0, 1))
    if not torch.cuda.is_available():
        out["errors"].append("no CUDA device")
        dump()
        print("no CUDA device", file=sys.stderr)
        sys.exit(2)
    dev = torch.device("cuda")
    out["device"] = torch.cuda.get_device_name()
    out["capability"] = list(torch.cuda.get_device_capability())
    jit_dir = str(jit_env.FLASHINFER_JIT_DIR)
    print(f"flashinfer {flashinfer.__version__} on {out['device']}, torch {torch.__version__}, "
          f"setup {out['setup_s']} s", flush=True)

    workspace = torch.zeros(512 << 20, dtype=torch.uint8, device=dev)
    # bench/common/peer_timing.py's timer (cold L2, warm-up), importable now that the
    # bundle's torch is.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
    from peer_timing import time_ms

    def time_us(fn):
        med, mn = time_ms(fn, runs)
        return med * 1e3, mn * 1e3

    def jit_built():  # modules compiled on this machine (not loaded from the bundle)
        try:
            return sorted(d for d in os.listdir(jit_dir) if d != "tmp" and
                          os.path.exists(os.path.join(jit_dir, d, d + ".so")))
        except OSError:
            return []

    def add(row):
        out["rows"].append(row)
        print(json.dumps(row), flush=True)
        dump()

    def sdpa_ref(q, k, v, causal):  # q,k,v [L, H, D] -> [L, Hq, D] fp32; torch SDPA in bf16
        qh, kh, vh = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
        if kh.shape[1] != qh.shape[1]:
            rep = qh.shape[1] // kh.shape[1]
            kh, vh = kh.repeat_interleave(rep, 1), vh.repeat_interleave(rep, 1)
        o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
        return o[0].transpose(0, 1).float()

    # (a) ragged prefill
    backends = [b for b in args.backends.split(",") if b]
    splits = PREFILL_SPLITS[:1] if args.quick else PREFILL_SPLITS
    hds = [128] if args.quick else HEAD_DIMS
    if not args.skip_prefill:
        torch.manual_seed(0)
        for hd in hds:
            q = torch.randn(PREFILL_TOKENS, HEADS, hd, dtype=torch.bfloat16, device=dev)
            k = torch.randn_like(q)
            v = torch.randn_like(q)
            for backend in backends:
                for nreq, L in splits:
                    for causal in (False, True):
                        row = {"kind": "prefill_ragged", "backend": backend, "head_dim": hd, "causal": causal,
                               "num_requests": nreq, "qo_len": L, "kv_len": L, "qo_heads": HEADS,
                               "kv_heads": HEADS, "dtype": "bf16"}
                        pairs = nreq * (L * (L + 1) // 2 if causal else L * L)
                        row["flops"] = 4.0 * HEADS * hd * pairs
                        try:
                            indptr = torch.arange(0, nreq * L + 1, L, dtype=torch.int32, device=dev)
                            workspace.zero_()  # FlashInfer wants a zeroed workspace on first use
                            w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD", backend=backend)
                            tp = time.time()
                            w.plan(indptr, indptr, HEADS, HEADS, hd, causal=causal,
                                   q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
                            row["plan_s"] = round(time.time() - tp, 2)
                            o = w.run(q, k, v)
                            torch.cuda.synchronize()
                            ref = sdpa_ref(q[:L], k[:L], v[:L], causal)
                            row["max_abs_err_req0"] = float((o[:L].float() - ref).abs().max())
                            med, mn = time_us(lambda: w.run(q, k, v, out=o))
                            row.update(time_us=med, min_us=mn, TFLOPs=row["flops"] / (med * 1e-6) / 1e12,
                                       backend_resolved=getattr(w, "_backend", backend))
                        except Exception as e:
                            row["error"] = err_str(e)
                        add(row)
            del q, k, v
            torch.cuda.empty_cache()

    # (b) paged decode
    if not args.skip_decode:
        shapes = DECODE_SHAPES[:2] if args.quick else DECODE_SHAPES
        for b, L in shapes:
            try:
                g = torch.Generator(device="cpu").manual_seed(b * 100003 + L)
                pages_per = math.ceil(L / PAGE)
                num_pages = b * pages_per
                indptr = torch.arange(0, num_pages + 1, pages_per, dtype=torch.int32, device=dev)
                indices = torch.randperm(num_pages, generator=g).to(torch.int32).to(dev)  # a serving pool's order
                last = torch.full((b,), L - (pages_per - 1) * PAGE, dtype=torch.int32, device=dev)
                cache = torch.randn(num_pages, 2, PAGE, DEC_HK, DEC_D, dtype=torch.bfloat16, device=dev)
                q = torch.randn(b, DEC_HQ, DEC_D, dtype=torch.bfloat16, device=dev)
                setup_err = None
            except Exception as e:
                setup_err = err_str(e)
            kv_bytes = 2.0 * b * L * DEC_HK * DEC_D * 2
            io_bytes = 2.0 * b * DEC_HQ * DEC_D * 2
            for tc in (False, True):
                row = {"kind": "decode_paged", "batch": b, "kv_len": L, "qo_heads": DEC_HQ, "kv_heads": DEC_HK,
                       "head_dim": DEC_D, "page_size": PAGE, "layout": "NHD", "dtype": "bf16",
                       "use_tensor_cores": tc, "kv_bytes": kv_bytes}
                if setup_err:
                    row["error"] = setup_err
                    add(row)
                    continue
                try:
                    workspace.zero_()
                    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                        workspace, "NHD", use_tensor_cores=tc, backend="fa2" if tc else "auto")
                    tp = time.time()
                    w.plan(indptr, indices, last, DEC_HQ, DEC_HK, DEC_D, PAGE,
                           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
                    row["plan_s"] = round(time.time() - tp, 2)
                    try:
                        row["backend_resolved"] = str(getattr(w, "resolved_backend", getattr(w, "_backend", "?")))
                    except Exception:
                        row["backend_resolved"] = str(getattr(w, "_backend", "?"))
                    o = w.run(q, cache)
                    torch.cuda.synchronize()
                    # reference on request 0: gather its pages
                    pg = indices[indptr[0]:indptr[1]].long()
                    k0 = cache[pg, 0].reshape(-1, DEC_HK, DEC_D)[:L]
                    v0 = cache[pg, 1].reshape(-1, DEC_HK, DEC_D)[:L]
                    ref = sdpa_ref(q[:1], k0, v0, False)
                    row["max_abs_err_req0"] = float((o[:1].float() - ref).abs().max())
                    med, mn = time_us(lambda: w.run(q, cache, out=o))
                    row.update(time_us=med, min_us=mn, GBps=(kv_bytes + io_bytes) / (med * 1e3),
                               kv_GBps=kv_bytes / (med * 1e3))
                except Exception as e:
                    row["error"] = err_str(e)
                add(row)
            try:
                del cache, q
            except NameError:
                pass
            torch.cuda.empty_cache()

    # (c) MLA paged decode
    if not args.skip_mla:
        shapes = MLA_SHAPES[:1] if args.quick else MLA_SHAPES
        sm_scale = 0.0721  # bench_mla's
        for b, L, heads in shapes:
            try:
                g = torch.Generator(device="cpu").manual_seed(b * 7919 + L + heads)
                pages_per = math.ceil(L / MLA_PAGE)
                num_pages = b * pages_per
                qo_indptr = torch.arange(0, b + 1, dtype=torch.int32, device=dev)
                kv_indptr = torch.arange(0, num_pages + 1, pages_per, dtype=torch.int32, device=dev)
                kv_indices = torch.randperm(num_pages, generator=g).to(torch.int32).to(dev)
                kv_lens = torch.full((b,), L, dtype=torch.int32, device=dev)
                ckv = torch.randn(num_pages, MLA_PAGE, MLA_CKV, dtype=torch.bfloat16, device=dev)
                kpe = torch.randn(num_pages, MLA_PAGE, MLA_KPE, dtype=torch.bfloat16, device=dev)
                q_nope = torch.randn(b, heads, MLA_CKV, dtype=torch.bfloat16, device=dev)
                q_pe = torch.randn(b, heads, MLA_KPE, dtype=torch.bfloat16, device=dev)
                setup_err = None
            except Exception as e:
                setup_err = err_str(e)
            kv_bytes = float(b) * L * (MLA_CKV + MLA_KPE) * 2
            io_bytes = float(b) * heads * (MLA_CKV + MLA_KPE + MLA_CKV) * 2
            flops = 2.0 * b * heads * L * (MLA_CKV + MLA_KPE + MLA_CKV)
            for backend in [x for x in args.mla_backends.split(",") if x]:
                row = {"kind": "mla_decode", "backend": backend, "batch": b, "kv_len": L, "heads": heads,
                       "page_size": MLA_PAGE, "dtype": "bf16", "kv_bytes": kv_bytes, "flops": flops}
                if setup_err:
                    row["error"] = setup_err
                    add(row)
                    continue
                try:
                    workspace.zero_()
                    w = flashinfer.BatchMLAPagedAttentionWrapper(workspace, backend=backend)
                    tp = time.time()
                    w.plan(qo_indptr, kv_indptr, kv_indices, kv_lens, heads, MLA_CKV, MLA_KPE, MLA_PAGE, False,
                           sm_scale, torch.bfloat16, torch.bfloat16)
                    row["plan_s"] = round(time.time() - tp, 2)
                    o = w.run(q_nope, q_pe, ckv, kpe)
                    torch.cuda.synchronize()
                    # reference on request 0: its latent rows, absorbed attention in fp32
                    pg = kv_indices[kv_indptr[0]:kv_indptr[1]].long()
                    c0 = ckv[pg].reshape(-1, MLA_CKV)[:L].float()
                    p0 = kpe[pg].reshape(-1, MLA_KPE)[:L].float()
                    logits = (q_nope[0].float() @ c0.T + q_pe[0].float() @ p0.T) * sm_scale
                    ref = torch.softmax(logits, dim=-1) @ c0
                    row["max_abs_err_req0"] = float((o[0].float() - ref).abs().max())
                    med, mn = time_us(lambda: w.run(q_nope, q_pe, ckv, kpe, out=o))
                    row.update(time_us=med, min_us=mn, TFLOPs=flops / (med * 1e-6) / 1e12,
                               GBps=(kv_bytes + io_bytes) / (med * 1e3),
                               backend_resolved=str(getattr(w, "_backend", backend)))
                except Exception as e:
                    row["error"] = err_str(e)
                add(row)
            try:
                del ckv, kpe, q_nope, q_pe
            except NameError:
                pass
            torch.cuda.empty_cache()

    out["jit_built_on_this_machine"] = jit_built()
    out["total_s"] = round(time.time() - t0, 1)
    dump()
    nerr = sum(1 for r in out["rows"] if "error" in r)
    print(f"{len(out['rows'])} rows, {nerr} errors, JIT-built here: {out['jit_built_on_this_machine']}, "
          f"{out['total_s']} s -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
