// SPDX-License-Identifier: Apache-2.0
// Appending tokens to a paged KV cache (and to the MLA cache): a scatter of rows of
// bytes from a ragged [nnz, H, D] tensor to (page, slot, head) locations of the cache.
// Memory-bound; the kernel is dtype-agnostic and copies in the widest vector (up to
// 16 bytes) that every pointer and stride allows.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "cuda/backend.hpp"
#include "cuda/common/fast_divmod.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/page/append.hpp"

namespace kvinfer::cuda {
namespace {

// One source tensor and its destination in the cache; all strides in bytes.
struct ScatterPart {
  const char* src;  // [nnz, heads, row_bytes]
  char* dst;        // pages, addressed by (page, slot, head)
  std::int64_t src_token, src_head;
  std::int64_t dst_page, dst_slot, dst_head;
  FastDivmod items_per_token;  // heads * chunks_per_row
  FastDivmod chunks_per_row;   // row_bytes / vector width
  std::uint32_t total;         // nnz * items_per_token
  std::uint32_t blocks;        // blocks of the register kernel for this part
};

// K and V (or ckv and kpe): two parts in one launch, so that small appends pay one
// launch and every thread has independent loads in flight.
struct ScatterParams {
  ScatterPart part[2];
  std::uint32_t total;                // part[0].total + part[1].total
  const std::int32_t* batch_indices;  // [nnz]
  const std::int32_t* positions;      // [nnz]
  const std::int32_t* indptr;         // [batch_size + 1] pages
  const std::int32_t* indices;        // [indptr[batch_size]] page ids
  std::uint32_t indptr_len, indices_len;
  FastDivmod page_size;
  // Register kernel: 128-byte lines of index arrays to prefetch into L2 at the start,
  // lines [prefetch_end[k-1], prefetch_end[k]) from prefetch_base[k] (launch_scatter).
  const char* prefetch_base[4];
  std::uint32_t prefetch_end[4];
};

// Computes the source of item i (a vector of one row of one token) and starts its
// index chain; the destination needs three dependent loads (token -> request and
// position -> the request's first page -> the page id).
struct ItemAddr {
  const char* src;
  std::uint32_t t, h, c;
  bool second;  // item of part[1]
};

__device__ __forceinline__ ItemAddr locate_src(const ScatterParams& p, std::uint32_t i, int vec) {
  const bool second = i >= p.part[0].total;
  const ScatterPart& part = second ? p.part[1] : p.part[0];
  if (second) i -= p.part[0].total;
  std::uint32_t r, c;
  const std::uint32_t t = part.items_per_token.divmod(i, &r);
  const std::uint32_t h = part.chunks_per_row.divmod(r, &c);
  return {part.src + t * part.src_token + h * part.src_head + std::int64_t(c) * vec, t, h, c, second};
}

__device__ __forceinline__ char* locate_dst(const ScatterParams& p, const ItemAddr& a, int vec) {
  const std::int32_t b = __ldg(p.batch_indices + a.t);
  const std::uint32_t pos = std::uint32_t(__ldg(p.positions + a.t));
  std::uint32_t slot;
  const std::uint32_t page_in_request = p.page_size.divmod(pos, &slot);
  const std::int64_t page = __ldg(p.indices + __ldg(p.indptr + b) + page_in_request);
  const ScatterPart& part = a.second ? p.part[1] : p.part[0];
  return part.dst + page * part.dst_page + std::int64_t(slot) * part.dst_slot + a.h * part.dst_head +
         std::int64_t(a.c) * vec;
}

// With a cold L2 the index chain costs three HBM latencies; the page table is small,
// so every block first asks L2 for its share of it, and the chain's second and third
// loads then hit L2.
__device__ __forceinline__ void prefetch_page_table(const ScatterParams& p, int threads) {
  const std::uint32_t lines_indptr = (p.indptr_len * 4 + 127) / 128;
  const std::uint32_t lines = lines_indptr + (p.indices_len * 4 + 127) / 128;
  for (std::uint32_t k = blockIdx.x * threads + threadIdx.x; k < lines; k += gridDim.x * threads) {
    ptx::prefetch_l2(k < lines_indptr ? static_cast<const void*>(p.indptr + 32 * k)
                                      : static_cast<const void*>(p.indices + 32 * (k - lines_indptr)));
  }
}

// The register kernel's prefetch: the first threads of the grid each ask L2 for one
// line of the index arrays, so that the index chains of most blocks hit L2 rather
// than queue in HBM behind the data loads of the first wave.
__device__ __forceinline__ void prefetch_index_arrays(const ScatterParams& p, int threads) {
  for (std::uint32_t k = blockIdx.x * threads + threadIdx.x; k < p.prefetch_end[3];
       k += gridDim.x * threads) {
    int a = 0;
    while (k >= p.prefetch_end[a]) ++a;
    ptx::prefetch_l2(p.prefetch_base[a] + 128 * (k - (a == 0 ? 0 : p.prefetch_end[a - 1])));
  }
}

// Issue order. ptxas schedules a dependent index load as early as it can, above
// independent data loads, and then waits there for the index: the data loads would
// leave only after a full memory latency. Loads of the non-coherent path (ld.global.nc)
// move freely across any barrier; coherent ones do not cross bar.warp.sync, so the
// register kernel loads data and indices through these (ld.global, no L1 allocation
// for the data) and separates its two phases with __syncwarp().
__device__ __forceinline__ std::int32_t ld_index(const std::int32_t* p) {  // ld.global.s32
  std::int32_t v;
  asm volatile("ld.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

template <int kBytes>
__device__ __forceinline__ typename RawVec<kBytes>::Type ld_data(const void* p) {
  typename RawVec<kBytes>::Type v;
  if constexpr (kBytes == 16) {  // ld.global.L1::no_allocate.v4.u32
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else if constexpr (kBytes == 8) {  // ld.global.L1::no_allocate.v2.u32
    asm volatile("ld.global.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  } else if constexpr (kBytes == 4) {  // ld.global.L1::no_allocate.u32
    asm volatile("ld.global.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  } else if constexpr (kBytes == 2) {  // ld.global.L1::no_allocate.u16
    asm volatile("ld.global.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  } else {  // ld.global.L1::no_allocate.u8 (into a 16-bit register: PTX has no 8-bit ones)
    std::uint16_t w;
    asm volatile("ld.global.L1::no_allocate.u8 %0, [%1];" : "=h"(w) : "l"(p));
    v = std::uint8_t(w);
  }
  return v;
}

// A copy of x that the compiler cannot see through (mov.u32 in volatile asm): values
// derived from it are recomputed where used rather than kept in registers across the
// loads (an index computation is cheaper than the occupancy the registers cost).
__device__ __forceinline__ std::uint32_t opaque(std::uint32_t x) {
  asm volatile("mov.u32 %0, %0;" : "+r"(x));
  return x;
}

// Byte offset of vector i of a part within its source and within its token's
// (page, slot) row of the cache; *t receives the token.
struct VecOffsets {
  std::int64_t src, dst;
};
__device__ __forceinline__ VecOffsets vec_offsets(const ScatterPart& part, std::uint32_t i, std::uint32_t* t,
                                                  int vec) {
  std::uint32_t r, c;
  *t = part.items_per_token.divmod(i, &r);
  const std::uint32_t h = part.chunks_per_row.divmod(r, &c);
  return {*t * part.src_token + h * part.src_head + std::int64_t(c) * vec,
          h * part.dst_head + std::int64_t(c) * vec};
}

// One tile of kThreads * kUnroll vectors of one part. A warp owns 32 * kUnroll
// consecutive vectors and lane l the vectors l + 32 j, so each warp-wide access is
// contiguous and a lane's vectors mostly share a token (a 2 KiB K row of 8 heads x
// d 128 bf16 is exactly one warp's span at kUnroll 4): the page lookup runs once per
// token change, not per vector. Phase 1 issues every data load, phase 2 each token's
// request and position, phase 3 the rest of the chain (request -> its first page ->
// the page id), then the stores: no load waits for another before all data are in
// flight, so the data stream during the whole chain. Vectors past the end of the part
// load the part's last vector and store nothing, so no branch precedes the loads.
template <int kVec, int kThreads, int kUnroll>
__device__ __forceinline__ void scatter_tile(const ScatterParams& p, const ScatterPart& part,
                                             std::uint32_t tile) {
  using V = typename RawVec<kVec>::Type;
  const std::uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::uint32_t first = tile * (kThreads * kUnroll) + warp * (32 * kUnroll) + lane;
  const std::uint32_t last = part.total - 1;
  std::uint32_t t[kUnroll];
  V data[kUnroll];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const VecOffsets o = vec_offsets(part, min(first + 32 * j, last), &t[j], kVec);
    data[j] = ld_data<kVec>(part.src + o.src);
  }
  __syncwarp();
  std::int32_t b[kUnroll] = {}, pos[kUnroll] = {};
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j == 0 || t[j] != t[j - 1]) {
      b[j] = ld_index(p.batch_indices + t[j]);
      pos[j] = ld_index(p.positions + t[j]);
    }
  }
  __syncwarp();
  std::int32_t first_page[kUnroll] = {};
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j == 0 || t[j] != t[j - 1]) first_page[j] = ld_index(p.indptr + b[j]);
  }
  std::int64_t row[kUnroll] = {};  // byte offset of the token's (page, slot)
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j == 0 || t[j] != t[j - 1]) {
      std::uint32_t slot;
      const std::uint32_t page_in_request = p.page_size.divmod(std::uint32_t(pos[j]), &slot);
      const std::int64_t page = ld_index(p.indices + (std::int64_t(first_page[j]) + page_in_request));
      row[j] = page * part.dst_page + std::int64_t(slot) * part.dst_slot;
    }
  }
  const std::uint32_t again = opaque(first);
  std::int64_t token_row = row[0];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (j > 0 && t[j] != t[j - 1]) token_row = row[j];
    const std::uint32_t i = again + 32 * j;
    std::uint32_t tj;
    const VecOffsets o = vec_offsets(part, i, &tj, kVec);
    if (i <= last) store<kVec>(part.dst + token_row + o.dst, data[j]);
  }
}

// Blocks [0, part[0].blocks) copy part 0 and the rest part 1: the part is uniform
// in a block, so its fields are constant-bank operands rather than indexed loads.
template <int kVec, int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads) paged_scatter_kernel(const __grid_constant__ ScatterParams p) {
  allow_next_kernel();  // the attention after an append may launch now, and wait for it
  prefetch_index_arrays(p, kThreads);
  if (blockIdx.x < p.part[0].blocks) {
    scatter_tile<kVec, kThreads, kUnroll>(p, p.part[0], blockIdx.x);
  } else {
    scatter_tile<kVec, kThreads, kUnroll>(p, p.part[1], blockIdx.x - p.part[0].blocks);
  }
}

// 16-byte vectors staged in shared memory by cp.async: a thread keeps kUnroll
// vectors in flight without holding registers for them, so one wave of blocks can
// have the whole append in flight. Each thread reads back only its own slots, so
// cp.async.wait_all suffices (no barrier).
template <int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    paged_scatter_async_kernel(const __grid_constant__ ScatterParams p) {
  allow_next_kernel();
  __shared__ uint4 stage[kUnroll][kThreads];  // (unroll, thread)
  prefetch_page_table(p, kThreads);
  const std::uint32_t base = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
  char* dst[kUnroll];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const std::uint32_t i = base + j * kThreads;
    dst[j] = nullptr;
    if (i >= p.total) continue;
    const ItemAddr a = locate_src(p, i, 16);
    ptx::cp_async_16(&stage[j][threadIdx.x], a.src);
    dst[j] = locate_dst(p, a, 16);
  }
  ptx::cp_async_commit();
  ptx::cp_async_wait_all();
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (dst[j] != nullptr) ptx::st_v4(dst[j], stage[j][threadIdx.x]);
  }
}

// Geometry of one part before the vector width is known.
struct PartDesc {
  const void* src;
  void* dst;
  std::int64_t nnz, heads, row_bytes;
  std::int64_t src_token, src_head;           // bytes
  std::int64_t dst_page, dst_slot, dst_head;  // bytes
};

void launch_scatter(std::string_view op, PartDesc* parts, int num_parts, const PageTable& table,
                    const TensorView& batch_indices, const TensorView& positions, std::int64_t page_size,
                    Stream stream, AppendKernel kernel) {
  std::uint64_t align_bits = 0;
  for (int k = 0; k < num_parts; ++k) {
    PartDesc& d = parts[k];
    // A stride of a dimension of size 1 is never multiplied by a non-zero index:
    // zero it so that an odd value there does not narrow the vectors.
    if (d.heads == 1) d.src_head = d.dst_head = 0;
    if (d.nnz == 1) d.src_token = 0;
    if (page_size == 1) d.dst_slot = 0;
    align_bits |= reinterpret_cast<std::uintptr_t>(d.src) | reinterpret_cast<std::uintptr_t>(d.dst) |
                  std::uint64_t(d.row_bytes) | std::uint64_t(d.src_token) | std::uint64_t(d.src_head) |
                  std::uint64_t(d.dst_page) | std::uint64_t(d.dst_slot) | std::uint64_t(d.dst_head);
  }
  const int vec = common_vec_bytes(16, {align_bits});

  ScatterParams p{};
  std::uint64_t total = 0;
  for (int k = 0; k < 2; ++k) {
    ScatterPart& q = p.part[k];
    if (k >= num_parts) {
      q = ScatterPart{};
      continue;
    }
    const PartDesc& d = parts[k];
    const std::int64_t chunks = d.row_bytes / vec;
    const std::uint64_t items = std::uint64_t(d.nnz) * std::uint64_t(d.heads) * std::uint64_t(chunks);
    if (items >= (std::uint64_t(1) << 31) || std::uint64_t(d.heads * chunks) >= (std::uint64_t(1) << 31)) {
      throw Error(op, "nnz", std::to_string(d.nnz),
                  "the append is too large for one launch (2^31 vectors per tensor)");
    }
    q.src = static_cast<const char*>(d.src);
    q.dst = static_cast<char*>(d.dst);
    q.src_token = d.src_token;
    q.src_head = d.src_head;
    q.dst_page = d.dst_page;
    q.dst_slot = d.dst_slot;
    q.dst_head = d.dst_head;
    q.items_per_token = FastDivmod(std::uint32_t(d.heads * chunks));
    q.chunks_per_row = FastDivmod(std::uint32_t(chunks));
    q.total = std::uint32_t(items);
    total += items;
  }
  if (total >= (std::uint64_t(1) << 31)) {
    throw Error(op, "nnz", std::to_string(parts[0].nnz),
                "the append is too large for one launch (2^31 vectors)");
  }
  if (total == 0) return;
  p.total = std::uint32_t(total);
  p.batch_indices = batch_indices.data_as<const std::int32_t>();
  p.positions = positions.data_as<const std::int32_t>();
  p.indptr = table.indptr.data_as<const std::int32_t>();
  p.indices = table.indices.data_as<const std::int32_t>();
  p.page_size = FastDivmod(std::uint32_t(page_size));

  p.indptr_len = std::uint32_t(table.indptr.size(0));
  p.indices_len = std::uint32_t(table.indices.size(0));

  // The register kernel prefetches index arrays into L2 while together they stay under
  // 1/64 of the data read: indptr and the token indices, then the page ids, which a
  // decode step over long requests may hold far more of than it uses.
  const std::uint64_t nnz = std::uint64_t(parts[0].nnz);
  const std::pair<const std::int32_t*, std::uint64_t> arrays[4] = {
      {p.indptr, p.indptr_len}, {p.batch_indices, nnz}, {p.positions, nnz}, {p.indices, p.indices_len}};
  const std::uint64_t budget = total * std::uint64_t(vec) / 64;
  std::uint64_t bytes = 0;
  std::uint32_t lines = 0;
  for (int a = 0; a < 4; ++a) {
    const auto begin = reinterpret_cast<std::uintptr_t>(arrays[a].first);
    bytes += 4 * arrays[a].second;
    if (bytes <= budget && arrays[a].second > 0) {  // bytes only grow: a prefix of the list
      lines += std::uint32_t((begin + 4 * arrays[a].second + 127) / 128 - begin / 128);
    }
    p.prefetch_base[a] = reinterpret_cast<const char*>(begin / 128 * 128);
    p.prefetch_end[a] = lines;
  }

  const cudaStream_t s = to_cuda_stream(stream);
  // The register kernel: blocks of kThreads x kUnroll vectors, each in one part.
  auto launch_registers = [&](auto kernel, int threads, int unroll) {
    const std::uint32_t per_block = std::uint32_t(threads * unroll);
    p.part[0].blocks = (p.part[0].total + per_block - 1) / per_block;
    p.part[1].blocks = (p.part[1].total + per_block - 1) / per_block;
    kernel<<<p.part[0].blocks + p.part[1].blocks, threads, 0, s>>>(p);
  };
  if (vec == 16) {
    switch (kernel) {
      case AppendKernel::kRegisters4:
        launch_registers(paged_scatter_kernel<16, 128, 4>, 128, 4);
        break;
      case AppendKernel::kRegisters8:
        launch_registers(paged_scatter_kernel<16, 128, 8>, 128, 8);
        break;
      case AppendKernel::kAsync8Prefetch:
        // Flat over both parts; prefetches the page table whatever its size.
        paged_scatter_async_kernel<256, 8><<<grid_for(std::int64_t(total), 256 * 8), 256, 0, s>>>(p);
        break;
    }
  } else {
    switch (vec) {
      case 8:
        launch_registers(paged_scatter_kernel<8, 128, 4>, 128, 4);
        break;
      case 4:
        launch_registers(paged_scatter_kernel<4, 128, 4>, 128, 4);
        break;
      case 2:
        launch_registers(paged_scatter_kernel<2, 128, 4>, 128, 4);
        break;
      default:
        launch_registers(paged_scatter_kernel<1, 128, 4>, 128, 4);
        break;
    }
  }
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Measured on the H200 (docs/kernels.md, "Append and page operations"; 5000-token append, cold L2):
// registers_x4 12.8-12.9 us, registers_x8 13.3-13.5 us, cp_async_x8_prefetch 13.4-14.4 us;
// 128 x 2 vectors 13.0, 64 x 4 12.9, one wave of resident blocks taking tiles in turn
// 13.0-13.1. A plain copy kernel of the same bytes takes 12.7-12.8 us whatever its
// shape (an empty kernel 2.7); only cudaMemcpy, on the copy engines, is faster (11.6).
AppendKernel default_append_kernel() {
  return AppendKernel::kRegisters4;
}

std::string_view append_kernel_name(AppendKernel k) {
  switch (k) {
    case AppendKernel::kRegisters4:
      return "registers_x4";
    case AppendKernel::kRegisters8:
      return "registers_x8";
    case AppendKernel::kAsync8Prefetch:
      return "cp_async_x8_prefetch";
  }
  return "?";
}

void CudaBackend::append_paged_kv_cache(const detail::AppendPagedKVParams& p) const {
  append_paged_kv_cache_with(p, default_append_kernel());
}

void append_paged_kv_cache_with(const detail::AppendPagedKVParams& p, AppendKernel kernel) {
  const PagedKVCache& cache = p.cache;
  const std::int64_t es = std::int64_t(dtype_size(cache.dtype()));
  const bool nhd = cache.layout == KVLayout::kNHD;
  const std::int64_t nnz = p.key.size(0);
  const std::int64_t heads = cache.num_heads();
  PartDesc parts[2];
  const TensorView* src[2] = {&p.key, &p.value};
  const TensorView* dst[2] = {&cache.k, &cache.v};
  for (int k = 0; k < 2; ++k) {
    const TensorView& s = *src[k];
    const TensorView& d = *dst[k];
    parts[k] = PartDesc{s.data(),
                        d.data(),
                        nnz,
                        heads,
                        cache.head_dim() * es,
                        s.stride(0) * es,
                        s.stride(1) * es,
                        d.stride(0) * es,
                        d.stride(nhd ? 1 : 2) * es,
                        d.stride(nhd ? 2 : 1) * es};
  }
  launch_scatter("append_paged_kv_cache", parts, 2, p.table, p.batch_indices, p.positions, cache.page_size(),
                 p.stream, kernel);
}

void CudaBackend::append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) const {
  const MLACache& cache = p.cache;
  const std::int64_t es = std::int64_t(dtype_size(cache.ckv.dtype()));
  const std::int64_t nnz = p.ckv.size(0);
  PartDesc parts[2];
  int num_parts = 0;
  // Rows have no heads dimension: one head, head stride unused.
  parts[num_parts++] = PartDesc{p.ckv.data(),
                                cache.ckv.data(),
                                nnz,
                                1,
                                cache.head_dim_ckv() * es,
                                p.ckv.stride(0) * es,
                                0,
                                cache.ckv.stride(0) * es,
                                cache.ckv.stride(1) * es,
                                0};
  if (cache.kpe.defined() && cache.head_dim_kpe() > 0) {
    parts[num_parts++] = PartDesc{p.kpe.data(),
                                  cache.kpe.data(),
                                  nnz,
                                  1,
                                  cache.head_dim_kpe() * es,
                                  p.kpe.stride(0) * es,
                                  0,
                                  cache.kpe.stride(0) * es,
                                  cache.kpe.stride(1) * es,
                                  0};
  }
  launch_scatter("append_paged_mla_kv_cache", parts, num_parts, p.table, p.batch_indices, p.positions,
                 cache.page_size(), p.stream, default_append_kernel());
}

}  // namespace kvinfer::cuda
