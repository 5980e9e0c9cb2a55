// SPDX-License-Identifier: Apache-2.0
// What every attention kernel family offers the registry (selector.cu): in namespace
// kvinfer::cuda::<family>, three function templates over the instance's dtypes and
// head dims, defined in <family>/instance.cuh and instantiated once per instance by
// the generated files (cmake/KvinferInstances.cmake). They run the key the selector
// chose; none of them chooses again.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/attention_params.hpp"

namespace kvinfer::cuda {

struct AttentionKernelParams;

// Declares the API of one family (its namespace and its three functions):
//   launch(p, key, grid, stream)  runs the kernel `key` names (its tile rows and variant)
//                                 on `grid` work items
//   occupancy(key)                resident CTAs per multiprocessor (the planner's budget;
//                                 warp slots for item-warp kernels)
//   max_item_warps(key)           the most warps one item's CTA may run (1: none)
#define KVINFER_DECLARE_ATTENTION_FAMILY(family)                                                          \
  namespace family {                                                                                      \
  template <class TQ, class TKV, int DQK, int DVO>                                                        \
  void launch(const AttentionKernelParams& p, const detail::KernelKey& key, std::int64_t grid,           \
              cudaStream_t stream);                                                                       \
  template <class TQ, class TKV, int DQK, int DVO>                                                        \
  int occupancy(const detail::KernelKey& key);                                                            \
  template <class TQ, class TKV, int DQK, int DVO>                                                        \
  int max_item_warps(const detail::KernelKey& key);                                                       \
  }

// The explicit instantiation of one instance (a generated file's one line).
#define KVINFER_INSTANTIATE_ATTENTION(family, TQ, TKV, DQK, DVO)                                          \
  template void family::launch<TQ, TKV, DQK, DVO>(const AttentionKernelParams&, const detail::KernelKey&, \
                                                  std::int64_t, cudaStream_t);                            \
  template int family::occupancy<TQ, TKV, DQK, DVO>(const detail::KernelKey&);                            \
  template int family::max_item_warps<TQ, TKV, DQK, DVO>(const detail::KernelKey&);

}  // namespace kvinfer::cuda
