// SPDX-License-Identifier: Apache-2.0
// Thin wrappers over the PTX memory instructions the kernels use, so that the width
// and caching of every global access is explicit. Each names its PTX instruction.
#pragma once

#include <cstdint>

namespace kvinfer::cuda::ptx {

// ld.global.nc.L1::no_allocate.v4.u32: 16-byte read-only load that bypasses L1.
// Only for data no thread of the same kernel writes (the non-coherent path).
__device__ __forceinline__ uint4 ld_nc_na_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// ld.global.nc.L1::no_allocate.v2.u32: the 8-byte variant.
__device__ __forceinline__ uint2 ld_nc_na_v2(const void* p) {
  uint2 r;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}

// ld.global.nc.L1::no_allocate.L2::256B.v4.u32: streaming 16-byte load that also asks
// L2 to prefetch the surrounding 256 bytes (pure streams: bandwidth ceilings).
__device__ __forceinline__ uint4 ld_stream_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// ld.global.nc.v4.u32: 16-byte read-only load through L1 (no cache hints).
__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// ld.global.v4.u32: coherent 16-byte load, for data the kernel may also write
// (in-place merges, where v_out aliases v_a).
__device__ __forceinline__ uint4 ld_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p)
               : "memory");
  return r;
}

// st.global.v4.u32: 16-byte store.
__device__ __forceinline__ void st_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// st.global.v2.u32: 8-byte store.
__device__ __forceinline__ void st_v2(void* p, uint2 v) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

// cp.async.cg.shared.global: asynchronous 16-byte copy global -> shared that bypasses
// L1 and holds no registers while in flight (sm_80+).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

// The same, to a shared-state-space address.
__device__ __forceinline__ void cp_async_16(unsigned smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem), "l"(gmem) : "memory");
}

// cp.async.cg.shared.global (16 bytes, bypassing L1) or cp.async.ca.shared.global
// (4 or 8 bytes: .cg takes only 16) by size.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(gmem), "n"(kBytes) : "memory");
  }
}

// cp.async with a source size: copies kBytes when `valid`, else writes kBytes of
// zeros and reads nothing (tile rows past the end of a sequence). 16 bytes bypass L1
// (.cg); 8 bytes (fp8 rows are only 8-byte aligned) take .ca, as .cg copies 16 only.
// `s` is a shared-state-space address (the overload below takes a pointer); the
// source is gmem + kOffset bytes, the offset an immediate of the instruction.
template <int kBytes, int kOffset = 0>
__device__ __forceinline__ void cp_async_or_zero(unsigned s, const void* gmem, bool valid) {
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1+%2], 16, %3;" ::"r"(s), "l"(gmem), "n"(kOffset),
                 "r"(valid ? 16 : 0)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1+%2], %3, %4;" ::"r"(s), "l"(gmem), "n"(kOffset), "n"(kBytes),
                 "r"(valid ? kBytes : 0)
                 : "memory");
  }
}
template <int kBytes>
__device__ __forceinline__ void cp_async_or_zero(void* smem, const void* gmem, bool valid) {
  cp_async_or_zero<kBytes>(static_cast<unsigned>(__cvta_generic_to_shared(smem)), gmem, valid);
}

// cp.async.wait_group N: waits until at most N of this thread's committed groups
// are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// cp.async.commit_group: closes the group of this thread's cp.async issued so far.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// cp.async.wait_all: waits for all of this thread's cp.async (they are then visible
// to this thread; other threads need a barrier too).
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// prefetch.global.L2: brings the line holding p into L2, no register result.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

}  // namespace kvinfer::cuda::ptx
