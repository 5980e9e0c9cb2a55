// SPDX-License-Identifier: Apache-2.0
// Appending tokens to a paged KV cache (and to the MLA cache): a scatter of rows of
// bytes from a ragged [nnz, H, D] tensor to (page, slot, head) locations of the cache.
// Memory-bound; the kernel is dtype-agnostic and copies in the widest vector (up to
// 16 bytes) that every pointer and stride allows.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "cuda/common/fast_divmod.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/ptx.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/ops.hpp"
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

// Vectors staged in registers: all kUnroll loads are issued before the first store.
template <int kVec, int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads) paged_scatter_kernel(const __grid_constant__ ScatterParams p) {
  using V = typename RawVec<kVec>::Type;
  const std::uint32_t base = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
  V data[kUnroll];
  char* dst[kUnroll];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const std::uint32_t i = base + j * kThreads;
    dst[j] = nullptr;
    if (i >= p.total) continue;
    const ItemAddr a = locate_src(p, i, kVec);
    // The data load does not depend on the page table: it overlaps the index chain.
    data[j] = load_ro<kVec>(a.src);
    dst[j] = locate_dst(p, a, kVec);
  }
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (dst[j] != nullptr) store<kVec>(dst[j], data[j]);
  }
}

// 16-byte vectors staged in shared memory by cp.async: a thread keeps kUnroll
// vectors in flight without holding registers for them, so one wave of blocks can
// have the whole append in flight. Each thread reads back only its own slots, so
// cp.async.wait_all suffices (no barrier).
template <int kThreads, int kUnroll>
__global__ void __launch_bounds__(kThreads)
    paged_scatter_async_kernel(const __grid_constant__ ScatterParams p) {
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

  const cudaStream_t s = to_cuda_stream(stream);
  // Blocks of kThreads threads with kUnroll vectors each.
  auto launch = [&](auto kernel, int threads, int unroll) {
    kernel<<<grid_for(std::int64_t(total), threads * unroll), threads, 0, s>>>(p);
  };
  if (vec == 16) {
    switch (kernel) {
      case AppendKernel::kRegisters4:
        launch(paged_scatter_kernel<16, 128, 4>, 128, 4);
        break;
      case AppendKernel::kRegisters8:
        launch(paged_scatter_kernel<16, 128, 8>, 128, 8);
        break;
      case AppendKernel::kAsync8Prefetch:
        launch(paged_scatter_async_kernel<256, 8>, 256, 8);
        break;
    }
  } else {
    switch (vec) {
      case 8:
        launch(paged_scatter_kernel<8, 128, 4>, 128, 4);
        break;
      case 4:
        launch(paged_scatter_kernel<4, 128, 4>, 128, 4);
        break;
      case 2:
        launch(paged_scatter_kernel<2, 128, 4>, 128, 4);
        break;
      default:
        launch(paged_scatter_kernel<1, 128, 4>, 128, 4);
        break;
    }
  }
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Measured on the H200 (bench/NOTES.md, 5000-token append, cold L2): registers_x4
// 13.1 us, cp_async_x8_prefetch 13.5 us, registers_x8 14.1 us.
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

void append_paged_kv_cache(const detail::AppendPagedKVParams& p) {
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

void append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p) {
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
