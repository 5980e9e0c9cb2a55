// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's side of the attention kernel selector: one registry of the
// compiled instances of every family (generated from cmake/KvinferInstances.cmake),
// read both to plan (the capabilities select_attention_kernel takes) and to launch
// (run_attention runs the key the plan holds), so "supported" and "launchable" cannot
// drift.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuda/backend.hpp"
#include "plan/attention_selector.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/family.hpp"
#include "cuda/attention/merge_partials.hpp"
#include "cuda/attention/tile/warp_timeline.hpp"
#include "cuda/check.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/runtime.hpp"
#include "kvinfer/core/error.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::cuda {

// The families' instance APIs (family.hpp), defined in each family's instance.cuh.
#define KVINFER_ATTENTION_FAMILY(family, key) KVINFER_DECLARE_ATTENTION_FAMILY(family)
#include "attention_families.inc"
#undef KVINFER_ATTENTION_FAMILY

namespace {

using LaunchFn = void (*)(const AttentionKernelParams&, const detail::KernelKey&, std::int64_t, cudaStream_t);
using KeyFn = int (*)(const detail::KernelKey&);

struct Instance {
  detail::KernelFamily family;
  DType q, kv;
  int head_dim_qk, head_dim_vo;
  LaunchFn launch;
  KeyFn occupancy;
  KeyFn max_item_warps;
};

// Every compiled instance of every family; a key's `instance` indexes this list.
#define KVINFER_ATTENTION_INSTANCE(family, key, TQ, QD, TKV, KVD, DQK, DVO)                                 \
  {detail::KernelFamily::key, DType::QD, DType::KVD, DQK, DVO, &family::launch<TQ, TKV, DQK, DVO>,          \
   &family::occupancy<TQ, TKV, DQK, DVO>, &family::max_item_warps<TQ, TKV, DQK, DVO>},
constexpr Instance kInstances[] = {
#include "attention_instances.inc"
};
#undef KVINFER_ATTENTION_INSTANCE

// The instances of this build as the selector sees them (plain values).
const detail::AttentionKernelCaps& kernel_caps(bool hopper) {
  static const auto make = [](bool on_hopper) {
    detail::AttentionKernelCaps c;
    for (const Instance& inst : kInstances) {
      c.instances.push_back({inst.family, inst.q, inst.kv, inst.head_dim_qk, inst.head_dim_vo});
    }
    c.hopper = on_hopper;
    c.preset = KVINFER_INSTANCE_PRESET;
    if (const char* env = std::getenv("KVINFER_WS_PREFILL_PAGED"); env != nullptr) {
      const std::string_view v(env);
      if (v != "0" && v != "1") throw Error("attention", "KVINFER_WS_PREFILL_PAGED", std::string(v), "must be 0 or 1");
      c.ws_prefill_paged = v == "1";
    }
    return c;
  };
  static const detail::AttentionKernelCaps with_hopper = make(true), without = make(false);
  return hopper ? with_hopper : without;
}

// The instance a selected key names.
const Instance& instance_of(const detail::KernelKey& key) {
  if (key.instance < 0 || std::size_t(key.instance) >= std::size(kInstances) ||
      kInstances[key.instance].family != key.family) {
    throw Error("attention", "plan", "kernel " + std::to_string(key.instance),
                "not a kernel of this build's CUDA registry (a plan made for another device?)");
  }
  return kInstances[key.instance];
}

}  // namespace

#if KVINFER_CUDA_TIMELINE
namespace {
std::uint64_t* g_warp_timeline = nullptr;
}
void set_warp_timeline(std::uint64_t* device_buffer) {
  g_warp_timeline = device_buffer;
}
#endif

detail::AttentionKernelTraits CudaBackend::attention_kernel(const detail::AttentionProblem& pr, int device) const {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  const detail::AttentionSelection sel = detail::select_attention_kernel(pr, kernel_caps(hopper_device(device)));
  const Instance& planned = instance_of(sel.plan);
  const int q_tile_rows = sel.plan.launch_rows;
  // The GPU runs a batch's items as one wave where they fit: a split beyond that
  // only adds merges (decode) or a thin last wave (prefill of equal tiles); skewed
  // lengths still get finer chunks (make_schedule). A chunk's partial state (rows x
  // head_dim floats, written and merged) should stay small next to the KV it reads:
  // chunks of at least 8 keys per row of the tile. Decode tiles take at least 512
  // keys: half the items and partial states of the 256-key one-wave split of a single
  // 32k request, which measured 0.99 of its time on the H200 (fp8 KV 0.96-0.98;
  // docs/kernels.md, "What every family shares").
  const std::int64_t min_keys = q_tile_rows <= 16 ? 512 : 8 * std::int64_t(q_tile_rows);
  return {.key = sel.run,
          .q_tile_rows = q_tile_rows,
          .work_items_per_processor = std::max(1, planned.occupancy(sel.plan)),
          .max_item_warps = std::max(1, planned.max_item_warps(sel.plan)),
          .split_waves = 1,
          .min_chunk_tokens = std::max<std::int64_t>(256, min_keys)};
}

AttentionKernelParams make_kernel_params(const detail::AttentionParams& p) {
  AttentionKernelParams k{};
  k.q = query_tensor(p.q);
  k.out = output_tensors(p.o, p.lse);
  k.kv = kv_source(p);
  k.schedule = p.schedule;
  k.item_warps = p.item_warps;
  k.heads = head_shape(p.problem);
  k.logits = logits_transform(p);
  k.mask = mask_of(p);
  k.dims = {std::int32_t(p.problem.head_dim_qk), std::int32_t(p.problem.head_dim_vo)};
#if KVINFER_CUDA_TIMELINE
  k.timeline = g_warp_timeline;
#endif
  return k;
}

void CudaBackend::run_attention(const detail::AttentionParams& p) const {
  const detail::AttentionProblem& pr = p.problem;
  int device = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&device));
  const Instance& kernel = instance_of(p.kernel);
  // Vector loads need 16-byte (8 elements) alignment of every row.
  const auto aligned = [](const TensorView& t, int dims) {
    if (reinterpret_cast<std::uintptr_t>(t.data()) % (8 * t.element_size()) != 0) return false;
    for (int d = 0; d < dims; ++d)
      if (t.stride(d) % 8 != 0) return false;
    return true;
  };
  for (auto [name, t, dims] :
       {std::tuple{"q", &p.q, 2}, std::tuple{"out", &p.o, 2}, std::tuple{"k", &p.k, p.k.rank() - 1},
        std::tuple{"v", &p.v, p.v.rank() - 1}}) {
    if (!aligned(*t, dims)) {
      throw Error("attention", name, t->describe(),
                  "the CUDA kernels need rows aligned to 8 elements (pointer and every stride but the last)");
    }
  }
  AttentionKernelParams k = make_kernel_params(p);
  // Programmatic launch needs the sm_90a code, whose kernels wait for the previous
  // kernel (wait_for_inputs); other code would not wait.
  const bool pdl_here = hopper_device(device);
  if (p.enable_pdl.value_or(false) && !pdl_here) {
    throw Error("attention", "enable_pdl", "true",
                "programmatic dependent launch needs a device of compute capability 9.0 and the sm_90a build "
                "(KVINFER_CUDA_ARCHS with 90a); leave it unset to use it where the device has it");
  }
  k.programmatic = p.enable_pdl.value_or(pdl_here);
  const cudaStream_t stream = to_cuda_stream(p.stream);
  if (p.max_items > 0) {
    kernel.launch(k, p.kernel, p.max_items, stream);
    KVINFER_CUDA_CHECK_LAUNCH();
  }
  // Programmatic launch only where the merge runs its sm_90a code, which waits for
  // the attention kernel (griddepcontrol.wait); other code would not wait.
  const MergeParams merge{.out = k.out, .schedule = p.schedule, .num_qo_heads = k.heads.num_qo_heads};
  launch_merge_partials(merge, pr.o_dtype, int(pr.head_dim_vo), p.max_merge_tokens, p.max_chunks, p.fixed_split,
                        hopper_device(device), stream);
}

}  // namespace kvinfer::cuda
