# SPDX-License-Identifier: Apache-2.0
"""Pre-build (AOT) the FlashInfer JIT modules that peer_flashinfer.py needs, on a
machine without a GPU.  Run by stage.sh inside its build venv with
FLASHINFER_CUDA_ARCH_LIST=9.0a and FLASHINFER_WORKSPACE_BASE set.

  prebuild.py list              print the module names (uris) the bench needs
  prebuild.py build NAME...     build those modules (all when no NAME), one ninja job

Which modules: FI_PREFILL_BACKENDS ("fa2 fa3"), FI_PREFILL_HEAD_DIMS (fa2, "64 128 256"),
FI_FA3_HEAD_DIMS (fa3, "64 128 256"); the decode module is always included, and the MLA
module of FI_MLA_BACKENDS ("fa3"; "" for none): bf16, ckv 512, kpe 64, int32 indices; and the
cascade module (merge_state and its kin, for the Python differential tests).
  prebuild.py install DEST      copy built .so files to DEST/<uri>/<uri>.so

The module arguments are exactly those the wrappers compute in plan():
BatchPrefillWithRaggedKVCacheWrapper (bf16 q/kv/o, int32 indptr, no RoPE, no
sliding window, no soft cap, no fp16 qk reduction) and
BatchDecodeWithPagedKVCacheWrapper (same, head_dim 128)."""
import os
import shutil
import sys
from pathlib import Path

import torch

from flashinfer.jit import env as jit_env
from flashinfer.jit.cascade import gen_cascade_module
from flashinfer.jit.core import build_jit_specs
from flashinfer.jit.attention.modules import (
    _gen_batch_prefill_primary_module,
    gen_batch_decode_module,
    gen_batch_mla_module,
    gen_batch_prefill_module,
)

BF16, I32 = torch.bfloat16, torch.int32
MLA_BACKENDS = os.environ.get("FI_MLA_BACKENDS", "fa3").split()
BACKENDS = os.environ.get("FI_PREFILL_BACKENDS", "fa2 fa3").split()
HEAD_DIMS = {  # fa3 modules take ~3x longer to build than fa2 ones
    "fa2": [int(x) for x in os.environ.get("FI_PREFILL_HEAD_DIMS", "64 128 256").split()],
    "fa3": [int(x) for x in os.environ.get("FI_FA3_HEAD_DIMS", "64 128 256").split()],
}


def prefill_args(hd):
    # (dtype_q, dtype_kv, dtype_o, dtype_idx, head_dim_qk, head_dim_vo,
    #  pos_encoding_mode, use_sliding_window, use_logits_soft_cap,
    #  use_fp16_qk_reduction, use_token_head_sf)
    return (BF16, BF16, BF16, I32, hd, hd, 0, False, False, False, False)


def specs():
    out = []
    for backend in BACKENDS:
        for hd in HEAD_DIMS[backend]:
            if backend == "fa2":  # what get_batch_prefill_module('fa2', ...) loads
                out.append(("prefill", backend, hd, _gen_batch_prefill_primary_module(backend, *prefill_args(hd))))
            else:
                out.append(("prefill", backend, hd, gen_batch_prefill_module(backend, *prefill_args(hd))))
    # BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=False
    out.append(("decode", "cuda-cores", 128, gen_batch_decode_module(BF16, BF16, BF16, I32, 128, 128, 0, False, False)))
    # BatchMLAPagedAttentionWrapper: (backend, dtype_q, dtype_kv, dtype_o, dtype_idx,
    # head_dim_ckv, head_dim_kpe, use_profiler)
    for backend in MLA_BACKENDS:
        out.append(("mla", backend, 512, gen_batch_mla_module(backend, BF16, BF16, BF16, I32, 512, 64, False)))
    # merge_state / merge_state_in_place / merge_states (tests/python/test_flashinfer_diff.py)
    out.append(("cascade", "merge", 0, gen_cascade_module()))
    return out


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "list"
    all_specs = specs()
    if cmd == "list":
        for kind, backend, hd, s in all_specs:
            print(f"{s.name}\t{kind}\t{backend}\thd{hd}\t{len(s.sources)} sources\tbuilt={s.jit_library_path.exists()}")
    elif cmd == "build":
        names = set(sys.argv[2:])
        todo = [s for _, _, _, s in all_specs if not names or s.name in names]
        for s in todo:
            print(f"building {s.name} ({len(s.sources)} sources) into {s.build_dir}", flush=True)
            build_jit_specs([s], verbose=False, skip_prebuilt=False)
            print(f"built {s.jit_library_path} {s.jit_library_path.stat().st_size} bytes", flush=True)
    elif cmd == "install":
        dest = Path(sys.argv[2])
        missing = 0
        for _, _, _, s in all_specs:
            if not s.jit_library_path.exists():
                print(f"NOT BUILT: {s.name}")
                missing += 1
                continue
            d = dest / s.name
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s.jit_library_path, d / f"{s.name}.so")
            print(f"installed {d / (s.name + '.so')}")
        sys.exit(1 if missing else 0)
    print("workspace:", jit_env.FLASHINFER_WORKSPACE_DIR, file=sys.stderr)


if __name__ == "__main__":
    main()
