// SPDX-License-Identifier: Apache-2.0
// MLA attention on sm_90a tensor cores (wgmma): items of 64 packed query rows (the
// compute-bound case: 64 or more heads), one CTA of three warpgroups per item. The
// producer warpgroup gathers the item's latent key tiles (64 rows of ckv and kpe) into
// a ring of two stages (wgmma/gather.cuh); the two consumer warpgroups read Q, K and V
// from shared memory through wgmma descriptors (no ldmatrix: the mma.sync kernel's
// re-reads of every operand through the register file made shared memory its bound at
// 128 heads). How the work is split between the consumers: wgmma/shape.cuh.
//
// Per key tile t, in each consumer warpgroup w (keys [32 w, 32 w + 32) of its logits,
// columns [256 w, 256 w + 256) of O):
//   wait for O += P_{t-1} V_{t-1}: release tile t - 1's stage to the producer
//   wait for tile t; issue S_w = Q K_w^T and wait for it
//   mask; row maxima of the half, exchanged; exponentials; rescale O
//   P_w as A fragments, exchanged; issue O_w += [P_0 P_1] V_w
// The softmax runs while the tensor cores are idle; the stage of tile t - 1 is
// released as soon as its last reader is done, so that a whole tile's work hides the
// copy of tile t + 1 into it. (Waiting for O += P V only after issuing S, as the
// prefill kernels do, lets ptxas no longer tell which group a wait retires: it then
// serialises every wgmma.) docs/kernels.md, "MLA on wgmma".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/attention/attention_kernel_params.cuh"
#include "cuda/attention/tile/math.cuh"
#include "cuda/attention/tile/online_softmax.cuh"
#include "cuda/attention/tile/warpgroup_tile.cuh"
#include "cuda/check.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mbarrier.cuh"
#include "cuda/common/named_barrier.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/tma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/mla/mla_epilogue.cuh"
#include "cuda/mla/mla_kernel_params.cuh"
#include "cuda/mla/mla_keys.cuh"
#include "cuda/mla/wgmma/gather.cuh"
#include "cuda/mla/wgmma/shape.cuh"
#include "kvinfer/core/error.hpp"

namespace kvinfer::cuda {

// Copies the q tile by the consumers' threads: packed row i < rows is q_nope (then
// q_pe) of token (row_begin + i) / H, head (row_begin + i) % H, in 64-column panels;
// rows past the item's are zeros.
template <class S>
__device__ __forceinline__ void mla_wgmma_load_q(const MlaKernelParams& p, const detail::WorkItem& item,
                                                 const detail::RequestInfo& r, int rows, unsigned char* q_tile,
                                                 int thread) {
  constexpr int kChunks = S::kDqk / 8;
  for (int idx = thread; idx < S::kRows * kChunks; idx += S::kConsumerThreads) {
    const int row = idx / kChunks, c = idx % kChunks;
    const bool valid = row < rows;
    std::uint32_t head = 0;
    const std::int64_t token = valid ? p.num_heads.divmod(std::uint32_t(item.row_begin + row), &head) : 0;
    const std::int64_t n = r.qo_begin + token;
    const char* src = c < S::kDc / 8
                          ? static_cast<const char*>(p.q_nope.data) +
                                (n * p.q_nope.stride_n + head * p.q_nope.stride_h) * 2 + c * 16
                          : static_cast<const char*>(p.q_pe.data) +
                                (n * p.q_pe.stride_n + head * p.q_pe.stride_h) * 2 + (c - S::kDc / 8) * 16;
    ptx::cp_async_or_zero<16>(q_tile + (c / 8) * S::kPanelBytes + row * 128 + (((c & 7) ^ (row & 7)) * 16), src,
                              valid);
  }
}

// A consumer warpgroup's wgmma over shared memory: Q (all 64 rows), its half of each
// key tile's rows as K (K-major, 8-row groups 1024 bytes apart) and its half of the
// columns as V (MN-major: panels of 64 columns kPanelBytes apart).
template <class T, class S>
struct MlaWgmmaMma {
  using QK = wgmma::Mma<S::kHalfKeys, T>;
  using PV = wgmma::Mma<S::kHalfCols, T>;
  std::uint64_t q_desc, k_desc, v_desc;  // k and v of stage 0
  int own;                               // the warpgroup
  __device__ __forceinline__ MlaWgmmaMma(unsigned base, int warpgroup)
      : q_desc(wgmma::make_desc_sw128(base + S::q, 16, 1024)),
        k_desc(wgmma::make_desc_sw128(base + S::kv + unsigned(warpgroup) * S::kHalfKeys * 128, 16, 1024)),
        v_desc(wgmma::make_desc_sw128(base + S::kv + unsigned(warpgroup) * (S::kHalfCols / 64) * S::kPanelBytes,
                                      S::kPanelBytes, 1024)),
        own(warpgroup) {}
  __device__ __forceinline__ static std::uint64_t advance(std::uint64_t desc, unsigned bytes) {
    return desc + std::uint64_t(bytes >> 4);
  }
  // k-step kk of a row: panel kk / 4, 32 bytes per step inside its 128-byte rows.
  __device__ __forceinline__ static unsigned step(int kk) {
    return unsigned(kk / 4) * S::kPanelBytes + unsigned(kk % 4) * 32;
  }
  // S_w = Q K_w^T of tile t: the nope and pe terms apart (each has its own scale), one group.
  __device__ __forceinline__ void issue_qk(int t, float (&nope)[S::kKeyFrags][4],
                                           float (&pe)[S::kKeyFrags][4]) const {
    const unsigned stage = unsigned(t % S::kStages) * S::kTileBytes;
#pragma unroll
    for (int kk = 0; kk < S::kNopeSteps; ++kk) {
      QK::ss(nope, advance(q_desc, step(kk)), advance(k_desc, stage + step(kk)), kk > 0);
    }
    if constexpr (S::kKpe) {
#pragma unroll
      for (int kk = S::kNopeSteps; kk < S::kNopeSteps + S::kPeSteps; ++kk) {
        QK::ss(pe, advance(q_desc, step(kk)), advance(k_desc, stage + step(kk)), kk > S::kNopeSteps);
      }
    }
    wgmma::commit();
  }
  // O_w += P V_w of tile t: this warpgroup's keys with its own P, the other half's
  // with the P it received; one group.
  __device__ __forceinline__ void issue_pv(int t, float (&o)[S::kOFrags][4],
                                           const std::uint32_t (&mine)[S::kPSteps][4],
                                           const std::uint32_t (&theirs)[S::kPSteps][4]) const {
    const unsigned stage = unsigned(t % S::kStages) * S::kTileBytes;
#pragma unroll
    for (int j = 0; j < S::kPSteps; ++j) {
      PV::template rs<true>(o, mine[j], advance(v_desc, stage + unsigned(own * S::kPSteps + j) * 16 * 128), true);
    }
#pragma unroll
    for (int j = 0; j < S::kPSteps; ++j) {
      PV::template rs<true>(o, theirs[j], advance(v_desc, stage + unsigned((1 - own) * S::kPSteps + j) * 16 * 128),
                            true);
    }
    wgmma::commit();
  }
};

// The consumer warpgroups' part of an item: Q, the key tiles, the epilogue.
template <class T, class S>
__device__ __forceinline__ void mla_wgmma_consume(const MlaKernelParams& p, const detail::WorkItem& item,
                                                  const detail::RequestInfo& r, const MlaKeys& keys,
                                                  const MlaWgmmaRing<S>& ring, const HopperSmem& smem, int rows) {
  const int thread = int(threadIdx.x), w = thread / 128, warp = (thread % 128) / 32, lane = thread % 32;
  const int g = lane / 4, quad = lane % 4;
  const bool leader = thread % 128 == 0;  // releases stages for its warpgroup

  mla_wgmma_load_q<S>(p, item, r, rows, smem.ptr + S::q, thread);
  ptx::cp_async_wait_all();
  wgmma::fence_proxy_async_shared();
  named_barrier::sync<S::kQBarrier, S::kConsumerThreads>();  // Q landed for both warpgroups

  const MlaWgmmaMma<T, S> mma(smem.addr, w);
  int lim[2];  // where the keys of this thread's rows warp * 16 + g (+ 8) end
  mla_row_key_ends<S>(lim, p, item, keys, warp, g);
  float* const maxima = reinterpret_cast<float*>(smem.ptr + S::row_exchange);  // [warpgroup][row]
  uint4* const p_exchange = reinterpret_cast<uint4*>(smem.ptr + S::p_exchange);
  const int my_row[2] = {warp * 16 + g, warp * 16 + g + 8};

  float o[S::kOFrags][4], nope[S::kKeyFrags][4], pe[S::kKeyFrags][4];
  std::uint32_t mine[S::kPSteps][4], theirs[S::kPSteps][4];
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < S::kOFrags; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
  if constexpr (!S::kKpe) {  // unused: no pe term
#pragma unroll
    for (int n = 0; n < S::kKeyFrags; ++n) pe[n][0] = pe[n][1] = pe[n][2] = pe[n][3] = 0.0f;
  }

  // One key tile; kFirst: no O += P V in flight before it (the groups in flight are
  // known at every wait, or ptxas serialises the wgmma).
  const auto key_tile = [&]<bool kFirst>(int t) {
    if constexpr (!kFirst) {
      wgmma::wait<0>();  // O += P_{t-1} V_{t-1}: its stage is free
      if (leader) mbarrier::arrive(ring.empty(t - 1));
    }
    fence_operands(o);  // (the first tile: its zeros) before S's wgmma are in flight
    mbarrier::wait(ring.full(t), ring.pass(t));
    wgmma::fence();
    mma.issue_qk(t, nope, pe);
    wgmma::wait<0>();
    fence_operands(nope);
    fence_operands(pe);

    // Base-2 logits of this warpgroup's keys, masked where some row does not see them.
    const int key0 = keys.key_begin + t * S::kKeys + w * S::kHalfKeys;
    float s[S::kKeyFrags][4];
#pragma unroll
    for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = S::kKpe ? nope[n][e] * p.nope_scale + pe[n][e] * p.pe_scale
                                                    : nope[n][e] * p.nope_scale;
    if (keys.needs_mask(keys.key_begin + t * S::kKeys, S::kKeys)) {
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (key0 + 8 * n + 2 * quad + e % 2 >= lim[e / 2]) s[n][e] = -INFINITY;
        }
    }
    // The rows' maxima over both halves of the tile.
    float mx[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float part[S::kKeyFrags];
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n) part[n] = fmaxf(s[n][2 * h], s[n][2 * h + 1]);
      mx[h] = tree_reduce(part, [](float x, float y) { return fmaxf(x, y); });
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      if (quad == 0) maxima[w * S::kRows + my_row[h]] = mx[h];
    }
    named_barrier::sync<S::kMaxBarrier, S::kConsumerThreads>();
    // The online softmax of the half against the rows' common maxima (both warpgroups
    // compute the same ones, so their halves of O scale alike); the sums stay per half.
    float rescale[2];
    bool changed = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(row_max[h], fmaxf(mx[h], maxima[(1 - w) * S::kRows + my_row[h]]));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // all masked so far: keep zeros, no NaN
      rescale[h] = exp2_approx(row_max[h] - m_use);
      changed |= m_new != row_max[h];
      row_max[h] = m_new;
      float part[S::kKeyFrags];
#pragma unroll
      for (int n = 0; n < S::kKeyFrags; ++n) {
        s[n][2 * h] = exp2_approx(s[n][2 * h] - m_use);
        s[n][2 * h + 1] = exp2_approx(s[n][2 * h + 1] - m_use);
        part[n] = s[n][2 * h] + s[n][2 * h + 1];
      }
      row_sum[h] = row_sum[h] * rescale[h] + tree_reduce(part, [](float x, float y) { return x + y; });
    }
    if (__any_sync(0xffffffffu, changed)) {
#pragma unroll
      for (int c = 0; c < S::kOFrags; ++c) {
        o[c][0] *= rescale[0];
        o[c][1] *= rescale[0];
        o[c][2] *= rescale[1];
        o[c][3] *= rescale[1];
      }
    }
    // P of this half as A fragments, to the other warpgroup (whose thread of the same
    // warp and lane holds the same rows) and from it.
#pragma unroll
    for (int j = 0; j < S::kPSteps; ++j) {
      p_fragment<T>(s, j, mine[j]);
      p_exchange[((w * S::kPSteps + j) * 4 + warp) * 32 + lane] = make_uint4(mine[j][0], mine[j][1], mine[j][2], mine[j][3]);
    }
    named_barrier::sync<S::kPBarrier, S::kConsumerThreads>();
#pragma unroll
    for (int j = 0; j < S::kPSteps; ++j) {
      const uint4 v = p_exchange[(((1 - w) * S::kPSteps + j) * 4 + warp) * 32 + lane];
      theirs[j][0] = v.x;
      theirs[j][1] = v.y;
      theirs[j][2] = v.z;
      theirs[j][3] = v.w;
    }
    fence_operands(o);
    fence_operands(mine);
    fence_operands(theirs);
    wgmma::fence();
    mma.issue_pv(t, o, mine, theirs);
  };
  if (keys.num_tiles > 0) key_tile.template operator()<true>(0);
  for (int t = 1; t < keys.num_tiles; ++t) key_tile.template operator()<false>(t);
  wgmma::wait<0>();
  fence_operands(o);

  // The rows' sums: over the quad, then both halves (the maxima's buffer: the other
  // warpgroup read this one's last maxima before the last P exchange).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    if (quad == 0) maxima[w * S::kRows + my_row[h]] = row_sum[h];
  }
  named_barrier::sync<S::kMaxBarrier, S::kConsumerThreads>();
  float total[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) total[h] = row_sum[h] + maxima[(1 - w) * S::kRows + my_row[h]];
  mla_store_rows<S>(p, item, r, rows, o, row_max, total, warp, w * S::kHalfCols, lane);
}

template <class T, bool kKpe>
__global__ void __launch_bounds__(MlaWgmmaShape<kKpe>::kThreads, 1)
    mla_wgmma_kernel(const __grid_constant__ MlaKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = MlaWgmmaShape<kKpe>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const HopperSmem smem = align_hopper_smem(smem_raw);
  const detail::WorkItem item = load_work_item(p.schedule.items + blockIdx.x);
  if (unused_item(item)) return;
  const MlaWgmmaRing<S> ring{smem.ptr};
  if (threadIdx.x == 0) ring.init();
  __syncthreads();  // the barriers are initialised before any thread uses them
  const detail::RequestInfo r = p.schedule.requests[item.request];
  wait_for_inputs();
  const int rows = item.row_end - item.row_begin;
  const MlaKeys keys = mla_keys<S>(p, item, r);
  if (int(threadIdx.x) >= S::kConsumerThreads) {
    tma::shrink_registers<S::kProducerRegs>();
    mla_wgmma_produce<S>(p, keys, ring, smem.ptr, int(threadIdx.x) - S::kConsumerThreads);
  } else {
    tma::grow_registers<S::kConsumerRegs>();
    mla_wgmma_consume<T, S>(p, item, r, keys, ring, smem, rows);
  }
  mla_discard_bad_item<S>(p, item, r, keys, rows);
#endif
}

// One compiled kernel: its shared memory, set once as the kernel's limit.
template <class T, bool kKpe>
struct MlaWgmmaKernel {
  static constexpr int kSmem = MlaWgmmaShape<kKpe>::kSmem;
  static constexpr int kThreads = MlaWgmmaShape<kKpe>::kThreads;
  static constexpr auto kernel = mla_wgmma_kernel<T, kKpe>;
  static void prepare() {
    static const bool prepared = [] {
      KVINFER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)prepared;
  }
};

// The (q, KV) instances the family has: 16-bit KV of the query's type.
template <class TQ, class TKV>
inline constexpr bool kMlaWgmmaInstance = std::is_same_v<TQ, TKV> && sizeof(TQ) == 2;

template <class TQ, class TKV, class F>
void with_mla_wgmma_kernel(bool kpe, F&& f) {
  if constexpr (kMlaWgmmaInstance<TQ, TKV>) {
    if (kpe) {
      f(MlaWgmmaKernel<TQ, true>{});
    } else {
      f(MlaWgmmaKernel<TQ, false>{});
    }
  } else {
    throw Error("BatchMLAPagedAttention", "kernel", "MLA on wgmma",
                "runs 16-bit KV of the query's type (a selector bug)");
  }
}

template <class TQ, class TKV>
void launch_mla_wgmma(const MlaKernelParams& p, bool kpe, std::int64_t grid, cudaStream_t stream) {
  with_mla_wgmma_kernel<TQ, TKV>(kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    launch_after_previous(K::kernel, dim3(unsigned(grid)), dim3(K::kThreads), std::size_t(K::kSmem), stream, false,
                          p);
  });
}

template <class TQ, class TKV>
int mla_wgmma_occupancy(bool kpe) {
  int blocks = 0;
  with_mla_wgmma_kernel<TQ, TKV>(kpe, [&](auto k) {
    using K = decltype(k);
    K::prepare();
    KVINFER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, K::kernel, K::kThreads, std::size_t(K::kSmem)));
  });
  return blocks;
}

}  // namespace kvinfer::cuda
