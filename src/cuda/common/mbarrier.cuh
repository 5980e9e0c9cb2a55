// SPDX-License-Identifier: Apache-2.0
// Shared-memory barriers with transaction counts (mbarrier, sm_90): the handshake
// between a kernel's producer (TMA copies that complete bytes on a barrier) and its
// consumers (warps that wait for a phase to complete, then release the buffer on
// another barrier). A barrier counts arrivals and, once armed with expect_tx, bytes;
// its phase completes when both reach zero, and the next phase begins. Waiters name
// the phase by its parity: waiting for parity 1 on a fresh barrier (phase 0 running)
// returns at once, which lets a producer's first pass through a ring of "empty"
// barriers proceed without a prior release. Each wrapper names its PTX instruction.
#pragma once

#include <cstdint>

namespace kvinfer::cuda::mbarrier {

// The shared-window address of a barrier (8 bytes, 8-aligned) in shared memory.
__device__ __forceinline__ unsigned addr(const std::uint64_t* bar) {
  return static_cast<unsigned>(__cvta_generic_to_shared(bar));
}

// mbarrier.init.shared::cta.b64: a barrier expecting `arrivals` arrivals per phase.
__device__ __forceinline__ void init(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(addr(bar)), "r"(arrivals) : "memory");
}

// fence.mbarrier_init.release.cluster: makes the initialisations above visible to the
// async proxy (the TMA units that complete transactions on them); a CTA barrier after
// it orders them before any other thread's use.
__device__ __forceinline__ void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64: one arrival, and `bytes` more bytes the
// current phase waits for (the copies issued next complete them).
__device__ __forceinline__ void arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(addr(bar)), "r"(bytes) : "memory");
}

// mbarrier.arrive.shared::cta.b64: one arrival (release semantics: this thread's
// earlier memory accesses happen before the phase completes for its waiters).
__device__ __forceinline__ void arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(addr(bar)) : "memory");
}

// cp.async.mbarrier.arrive.noinc.shared::cta.b64: one arrival, made once every
// cp.async this thread issued before it has landed (noinc: the arrival is one of the
// count the barrier was initialised with). The copies are then visible to the threads
// that wait on the barrier, wgmma's reads included (as in CUTLASS's cp.async pipelines).
__device__ __forceinline__ void arrive_on_copies(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(addr(bar)) : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 in a loop: returns once the phase of
// parity `parity` has completed (acquire semantics: what its arrivals and copies
// wrote is visible to this thread).
__device__ __forceinline__ void wait(std::uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "KVINFER_MBAR_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra KVINFER_MBAR_WAIT_%=;\n}\n" ::"r"(addr(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace kvinfer::cuda::mbarrier
