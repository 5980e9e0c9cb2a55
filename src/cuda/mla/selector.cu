// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's side of MLA: one registry of compiled instances (generated from
// cmake/KvinferInstances.cmake), the capabilities plan/mla_selector.hpp selects from,
// and the launch of the key the plan holds.
// (No fmt here: nvcc rejects its compile-time format strings.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuda/backend.hpp"
#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/merge_partials.hpp"
#include "cuda/check.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/runtime.hpp"
#include "plan/mla_selector.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

// Defined in mla_kernel.cuh, instantiated per (q, KV) type in the generated files.
template <class TQ, class TKV>
void launch_mla(const MlaKernelParams& p, int row_blocks, bool kpe, std::int64_t grid, cudaStream_t stream);
template <class TQ, class TKV>
int mla_occupancy(int row_blocks, bool kpe);
// Defined in wgmma/kernel.cuh, likewise.
template <class TQ, class TKV>
void launch_mla_wgmma(const MlaKernelParams& p, bool kpe, std::int64_t grid, cudaStream_t stream);
template <class TQ, class TKV>
int mla_wgmma_occupancy(bool kpe);

namespace {

constexpr const char* kOp = "BatchMLAPagedAttention";

struct Instance {
  DType q, kv;
  void (*launch)(const MlaKernelParams&, int, bool, std::int64_t, cudaStream_t);
  int (*occupancy)(int, bool);
  void (*launch_wgmma)(const MlaKernelParams&, bool, std::int64_t, cudaStream_t);
  int (*wgmma_occupancy)(bool);
};

#define KVINFER_MLA_INSTANCE(TQ, QD, TKV, KVD)                                   \
  {DType::QD, DType::KVD, &launch_mla<TQ, TKV>, &mla_occupancy<TQ, TKV>, \
   &launch_mla_wgmma<TQ, TKV>, &mla_wgmma_occupancy<TQ, TKV>},
constexpr Instance kInstances[] = {
#include "mla_instances.inc"
};
#undef KVINFER_MLA_INSTANCE

// The compiled instances as the selector sees them (plain values), on a Hopper device
// or another.
const detail::MlaKernelCaps& mla_caps(bool hopper) {
  static const auto make = [](bool on_hopper) {
    detail::MlaKernelCaps c;
    for (const Instance& inst : kInstances) c.instances.push_back({inst.q, inst.kv});
    c.hopper = on_hopper;
    c.preset = KVINFER_INSTANCE_PRESET;
    if (const char* env = std::getenv("KVINFER_MLA_WGMMA"); env != nullptr) {
      const std::string_view v(env);
      if (v != "0" && v != "1") throw Error(kOp, "KVINFER_MLA_WGMMA", std::string(v), "must be 0 or 1");
      c.wgmma = v == "1";
    }
    return c;
  };
  static const detail::MlaKernelCaps with_hopper = make(true), without = make(false);
  return hopper ? with_hopper : without;
}

const Instance& instance_of(const detail::KernelKey& key) {
  const bool mla = key.family == detail::KernelFamily::kMla || key.family == detail::KernelFamily::kMlaWgmma;
  if (!mla || key.instance < 0 ||
      std::size_t(key.instance) >= std::size(kInstances)) {
    throw Error(kOp, "plan", "kernel " + std::to_string(key.instance),
                "not a kernel of this build's CUDA registry (a plan made for another device?)");
  }
  return kInstances[key.instance];
}

// Item rows -> row blocks of 16.
int row_blocks(const detail::KernelKey& key) { return key.launch_rows / 16; }

// cp.async copies whole 16-byte chunks: every row (pointer and every stride but the
// last) must be 16-byte aligned.
void check_aligned(const char* name, const TensorView& t) {
  const auto bytes = std::int64_t(t.element_size());
  bool ok = reinterpret_cast<std::uintptr_t>(t.data()) % 16 == 0;
  for (int d = 0; d + 1 < t.rank(); ++d) ok = ok && (t.stride(d) * bytes) % 16 == 0;
  if (!ok) {
    throw Error(kOp, name, t.describe(),
                "the CUDA MLA kernel needs 16-byte aligned rows (pointer and every stride but the last)");
  }
}

}  // namespace

detail::MlaKernelTraits CudaBackend::mla_kernel(const detail::MLAProblem& pr, std::int64_t max_item_rows,
                                                int device) const {
  KVINFER_CUDA_CHECK(cudaSetDevice(device));
  const detail::KernelKey key = detail::select_mla_kernel(pr, max_item_rows, mla_caps(hopper_device(device)));
  const Instance& inst = instance_of(key);
  const bool kpe = pr.head_dim_kpe > 0;
  const int occupancy = key.family == detail::KernelFamily::kMlaWgmma ? inst.wgmma_occupancy(kpe)
                                                                       : inst.occupancy(row_blocks(key), kpe);
  // One wave of items at the full rate, as attention's.
  return {.key = key, .q_tile_rows = key.launch_rows, .work_items_per_processor = std::max(1, occupancy), .split_waves = 1};
}

void CudaBackend::run_mla(const detail::MLAParams& p) const {
  const detail::MLAProblem& pr = p.problem;
  const Instance& inst = instance_of(p.kernel);
  check_aligned("q_nope", p.q_nope);
  check_aligned("out", p.o);
  check_aligned("ckv_cache", p.ckv);
  if (pr.head_dim_kpe > 0) {
    check_aligned("q_pe", p.q_pe);
    check_aligned("kpe_cache", p.kpe);
  }

  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  MlaKernelParams k{};
  k.q_nope = query_tensor(p.q_nope);
  k.q_pe = query_tensor(pr.head_dim_kpe > 0 ? p.q_pe : TensorView());
  k.out = output_tensors(p.o, p.lse);
  k.ckv = latent_cache_tensor(p.ckv);
  k.kpe = latent_cache_tensor(pr.head_dim_kpe > 0 ? p.kpe : TensorView());
  k.pages = page_lookup(p.kv_indices, pr.page_size,
                        pr.head_dim_kpe > 0 ? std::min(p.ckv.size(0), p.kpe.size(0)) : p.ckv.size(0));
  k.schedule = p.schedule;
  k.num_heads = FastDivmod(std::uint32_t(pr.num_heads));
  k.nope_scale = pr.sm_scale * kLog2e * p.ckv_scale;
  k.pe_scale = pr.sm_scale * kLog2e * p.kpe_scale;
  k.v_scale = p.ckv_scale;
  k.lse_scale = p.lse_base_e ? kLn2 : 1.0f;
  k.causal = pr.causal;

  int device = 0;
  KVINFER_CUDA_CHECK(cudaGetDevice(&device));
  const cudaStream_t stream = to_cuda_stream(p.stream);
  if (p.max_items > 0) {
    if (p.kernel.family == detail::KernelFamily::kMlaWgmma) {
      inst.launch_wgmma(k, pr.head_dim_kpe > 0, p.max_items, stream);
    } else {
      inst.launch(k, row_blocks(p.kernel), pr.head_dim_kpe > 0, p.max_items, stream);
    }
    KVINFER_CUDA_CHECK_LAUNCH();
  }

  // The merge of split requests is attention's: the same partial-state layout
  // ([rows, H, 512] and [rows, H], base 2).
  const MergeParams merge{.out = k.out,
                          .lse_scale = k.lse_scale,
                          .schedule = p.schedule,
                          .num_qo_heads = std::int32_t(pr.num_heads)};
  launch_merge_partials(merge, pr.o_dtype, int(pr.head_dim_ckv), p.max_merge_tokens, p.max_chunks, p.fixed_split,
                        hopper_device(device), stream);
}

}  // namespace kvinfer::cuda
