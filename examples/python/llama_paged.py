#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A transformers Llama-style model (random weights, a small GQA config) generating
tokens with kvinfer's paged KV cache: each step appends the new keys/values of every
layer (append_paged_kv_cache), plans once and runs every layer's attention through
kvinfer (prefill wrapper for the prompts, decode wrapper for the generated tokens),
several requests of different lengths at once, the tokens packed without padding.

Checked against the model's own attention: the logits of every generated position,
teacher-forced through the model (attn_implementation "sdpa"), must be within the bf16
tolerance (2x the sdpa-vs-eager difference, plus 1% of the logits' range), and the
greedy tokens identical wherever the reference's top-2 margin exceeds that tolerance.

    python3 examples/python/llama_paged.py [--device cuda|cpu] [--tokens 32] [--json out.json]

Needs torch and transformers (the GPU machine has both); exits 0 with a message
where they are missing. On the CPU it runs kvinfer's CPU backend with torch CPU tensors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def build_model(torch, transformers, device, dtype, seed):
    cfg = transformers.LlamaConfig(vocab_size=2048, hidden_size=1024, intermediate_size=2048, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                                   max_position_embeddings=1024, rope_theta=10000.0, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    return model, cfg


class PagedKV:
    """kvinfer's side of the model: one page pool per layer, a CSR page table per
    request, and the wrappers planned once per step for every layer."""

    def __init__(self, torch, kvinfer, cfg, device, dtype, page_size=16, num_pages=256):
        self.torch, self.kvinfer = torch, kvinfer
        self.device, self.dtype, self.page_size = device, dtype, page_size
        self.hq, self.hk, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.caches = [torch.zeros(num_pages, 2, page_size, self.hk, self.d, dtype=dtype, device=device)
                       for _ in range(cfg.num_hidden_layers)]
        self.free = list(range(num_pages))
        self.pages: list[list[int]] = []
        self.lens: list[int] = []
        ws = torch.zeros(128 << 20, dtype=torch.uint8, device=device)  # one buffer, both wrappers
        self.prefill = kvinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
        self.decode = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        self.step = None

    def add_requests(self, n):
        self.pages += [[] for _ in range(n)]
        self.lens += [0] * n

    def begin_step(self, new_lens):
        """Extends each request by new_lens[i] tokens (allocating pages), builds the page
        table and the append indices, and plans the step's wrapper."""
        torch, ki, ps = self.torch, self.kvinfer, self.page_size
        for i, n in enumerate(new_lens):
            self.lens[i] += n
            while len(self.pages[i]) * ps < self.lens[i]:
                self.pages[i].append(self.free.pop())
        ints = lambda x: torch.tensor(x, dtype=torch.int32, device=self.device)  # noqa: E731
        indptr = [0]
        for p in self.pages:
            indptr.append(indptr[-1] + len(p))
        table = (ints(indptr), ints([x for p in self.pages for x in p]),
                 ints([n - (len(p) - 1) * ps for n, p in zip(self.lens, self.pages)]))
        append_indptr = [0]
        for n in new_lens:
            append_indptr.append(append_indptr[-1] + n)
        nnz = append_indptr[-1]
        bi, pos = ki.get_batch_indices_positions(ints(append_indptr), ki.get_seq_lens(*table[::2], ps), nnz)
        positions = [self.lens[i] - n + j for i, n in enumerate(new_lens) for j in range(n)]
        if all(n == 1 for n in new_lens):
            self.decode.plan(*table, self.hq, self.hk, self.d, ps, q_data_type=self.dtype)
            wrapper = self.decode
        else:
            self.prefill.plan(ints(append_indptr), *table, self.hq, self.hk, self.d, ps, causal=True,
                              q_data_type=self.dtype)
            wrapper = self.prefill
        self.step = dict(table=table, batch_indices=bi, positions=pos, wrapper=wrapper)
        return torch.tensor(positions, device=self.device)[None]

    def close(self):
        """Drops the wrappers, the step and the page pools. transformers' attention
        registry is global and keeps the registered `attention` (and this object) until
        the interpreter exits, after kvinfer's bindings are torn down: nanobind would
        then report the wrappers as leaked."""
        self.prefill = self.decode = self.step = None
        self.caches = []

    def attention(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        """transformers' attention interface: query [1, Hq, nnz, D], key / value
        [1, Hk, nnz, D] (RoPE applied) of this step's tokens -> [1, nnz, Hq, D]."""
        s = self.step
        cache = self.caches[module.layer_idx]
        k = key[0].transpose(0, 1).contiguous()
        v = value[0].transpose(0, 1).contiguous()
        self.kvinfer.append_paged_kv_cache(k, v, s["batch_indices"], s["positions"], cache, s["table"][1],
                                           s["table"][0], s["table"][2])
        q = query[0].transpose(0, 1)  # [nnz, Hq, D], a strided view: no copy
        return s["wrapper"].run(q, cache)[None], None


def register_attention(transformers, fn):
    try:
        from transformers import AttentionInterface
    except ImportError as e:
        raise SystemExit(f"transformers {transformers.__version__} has no AttentionInterface (needs >= 4.48)") from e
    AttentionInterface.register("kvinfer", fn)
    try:  # kvinfer's attention applies the mask itself: the model need not build one
        from transformers.masking_utils import AttentionMaskInterface
        AttentionMaskInterface.register("kvinfer", lambda *args, **kwargs: None)
    except ImportError:
        pass


def set_attention(model, name):
    model.config._attn_implementation = name
    for m in model.modules():
        if hasattr(m, "config") and m.config is not model.config:
            m.config._attn_implementation = name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--tokens", type=int, default=32, help="tokens generated per request")
    ap.add_argument("--prompts", default="40,23,7", help="prompt lengths of the requests")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"llama_paged: skipped ({e.name} is not installed; needs torch and transformers)")
        return 0
    import kvinfer

    device = args.device or ("cuda" if torch.cuda.is_available() and kvinfer.cuda_backend_built() else "cpu")
    dtype = torch.bfloat16
    model, cfg = build_model(torch, transformers, device, dtype, args.seed)
    prompt_lens = [int(x) for x in args.prompts.split(",")]
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompts = [torch.randint(0, cfg.vocab_size, (n,), generator=gen).tolist() for n in prompt_lens]

    # ---- generation through kvinfer's paged cache
    kv = PagedKV(torch, kvinfer, cfg, device, dtype)
    register_attention(transformers, kv.attention)
    set_attention(model, "kvinfer")
    try:
        kv.add_requests(len(prompts))
        tokens = [list(p) for p in prompts]
        step_logits = [[] for _ in prompts]  # the logits that chose each generated token
        new = [list(p) for p in prompts]
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(args.tokens):
                positions = kv.begin_step([len(n) for n in new])
                ids = torch.tensor([t for n in new for t in n], device=device)[None]
                logits = model(input_ids=ids, position_ids=positions, use_cache=False).logits[0].float()
                ends = torch.tensor([len(n) for n in new]).cumsum(0) - 1
                last = logits[ends.to(device)]
                nxt = last.argmax(-1).tolist()
                for i, t in enumerate(nxt):
                    step_logits[i].append(last[i])
                    tokens[i].append(t)
                new = [[t] for t in nxt]
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        kvinfer_s = time.perf_counter() - t0
    finally:
        kv.close()

    # ---- the model's own attention: teacher-forced, and its own generation speed
    ref_logits, noise = [], 0.0
    with torch.no_grad():
        for i, seq in enumerate(tokens):
            ids = torch.tensor(seq[:-1], device=device)[None]
            set_attention(model, "sdpa")
            sdpa = model(input_ids=ids).logits[0].float()
            set_attention(model, "eager")
            eager = model(input_ids=ids).logits[0].float()
            noise = max(noise, (sdpa - eager).abs().max().item())
            ref_logits.append(sdpa[len(prompts[i]) - 1:])
        set_attention(model, "sdpa")
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for p in prompts:  # one request at a time: the HF cache pads batched prompts
            model.generate(torch.tensor(p, device=device)[None], max_new_tokens=args.tokens, do_sample=False,
                           min_new_tokens=args.tokens, pad_token_id=0)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        hf_s = time.perf_counter() - t0

    scale = max(r.abs().max().item() for r in ref_logits)
    tol = 2.0 * noise + 0.01 * scale
    max_err, mismatches, checked = 0.0, [], 0
    for i in range(len(prompts)):
        got = torch.stack(step_logits[i])
        ref = ref_logits[i]
        max_err = max(max_err, (got - ref).abs().max().item())
        top2 = ref.topk(2, dim=-1).values
        margin = top2[:, 0] - top2[:, 1]
        for j in range(args.tokens):
            if margin[j].item() > tol:
                checked += 1
                if ref[j].argmax().item() != tokens[i][len(prompts[i]) + j]:
                    mismatches.append((i, j))
    n_tok = args.tokens * len(prompts)
    report = {"device": device, "transformers": transformers.__version__, "torch": torch.__version__,
              "requests": prompt_lens, "tokens_per_request": args.tokens, "max_logit_error": max_err,
              "tolerance": tol, "sdpa_vs_eager": noise, "tokens_checked": checked, "token_mismatches": mismatches,
              "kvinfer_tokens_per_s": n_tok / kvinfer_s, "model_attention_tokens_per_s": n_tok / hf_s}
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    ok = max_err <= tol and not mismatches
    print(f"llama_paged: {'OK' if ok else 'FAILED'}: max |logit error| {max_err:.4g} (tolerance {tol:.4g}), "
          f"{checked} greedy tokens checked, {len(mismatches)} differ; {n_tok / kvinfer_s:.0f} tokens/s with "
          f"kvinfer, {n_tok / hf_s:.0f} with the model's own attention")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
