// SPDX-License-Identifier: Apache-2.0
// One MLA instance (q and KV types, cmake/KvinferInstances.cmake): the mma.sync kernel
// (mla_kernel.cuh) and, for 16-bit KV of the query's type, the wgmma kernel of sm_90a
// (wgmma/kernel.cuh), each with its launch and occupancy. Other types instantiate a
// wgmma launch that throws; the selector never picks it (plan/mla_selector.cpp).
#pragma once

#include "cuda/mla/mla_kernel.cuh"
#include "cuda/mla/wgmma/kernel.cuh"

#define KVINFER_INSTANTIATE_MLA(TQ, TKV)                                                            \
  template void launch_mla<TQ, TKV>(const MlaKernelParams&, int, bool, std::int64_t, cudaStream_t); \
  template int mla_occupancy<TQ, TKV>(int, bool);                                                   \
  template void launch_mla_wgmma<TQ, TKV>(const MlaKernelParams&, bool, std::int64_t, cudaStream_t); \
  template int mla_wgmma_occupancy<TQ, TKV>(bool);
