// SPDX-License-Identifier: Apache-2.0
// Merging attention states (v, s) with base-2 LSE: two states per row (merge_state,
// also in place with a row mask) and K states per row (merge_states).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "cuda/backend.hpp"
#include "cuda/common/convert.cuh"
#include "cuda/common/fast_divmod.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/nan_max.cuh"
#include "cuda/common/vec.cuh"
#include "cuda/runtime.hpp"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 128;

// A state row is one (token, head) pair: head_dim values and one LSE. Each row is
// handled by a group of `group` lanes (a power of two <= 32) of one warp, so that a
// __syncwarp can order the LSE reads of all lanes before the LSE write of an
// in-place merge (s_out == s_a).
struct RowMap {
  std::uint32_t rows;  // n * heads
  FastDivmod heads;    // row -> (token, head)
  int log2_group;      // lanes per row = 1 << log2_group
  int chunks;          // head_dim / vector elements
};

// Element strides of a [n, heads, head_dim] (or [n, K, heads, head_dim]) tensor.
struct Strides2 {
  std::int64_t row, head;
};

struct MergeStateArgs {
  const void* v_a;
  const void* v_b;
  void* v_out;
  const float* s_a;
  const float* s_b;
  float* s_out;
  const std::uint8_t* mask;  // [n] or null
  Strides2 va, vb, vo, sa, sb, so;
  RowMap map;
};

__device__ __forceinline__ bool group_lane(const RowMap& m, std::uint32_t* row, int* lane) {
  const std::uint32_t lane_id = threadIdx.x & 31u;
  const std::uint64_t warp = std::uint64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  const std::uint64_t r = (warp << (5 - m.log2_group)) + (lane_id >> m.log2_group);
  *row = std::uint32_t(r);
  *lane = int(lane_id & ((1u << m.log2_group) - 1));
  return r < m.rows;
}

template <class T, int kN>
__global__ void __launch_bounds__(kThreads) merge_state_kernel(const __grid_constant__ MergeStateArgs a) {
  wait_for_previous_kernel();  // launched programmatically on Hopper: the states come from the kernel before
  allow_next_kernel();
  std::uint32_t row;
  int lane;
  const bool valid = group_lane(a.map, &row, &lane);
  std::uint32_t h = 0;
  const std::uint32_t i = valid ? a.map.heads.divmod(row, &h) : 0;
  const bool keep = valid && (a.mask == nullptr || a.mask[i] != 0);
  float sa = 0.f, sb = 0.f;
  if (valid) {
    sa = a.s_a[i * a.sa.row + h * a.sa.head];
    sb = a.s_b[i * a.sb.row + h * a.sb.head];
  }
  // Every lane has read its row's LSEs before any lane writes s_out (which may be s_a).
  __syncwarp();
  // A masked-out row is left as it is (the in-place form keeps state a).
  if (!keep) return;

  // The formula of the CPU backend: v = (wa va + wb vb) / (wa + wb), weights relative
  // to the larger LSE. An empty state (s = -inf) has weight 0 and is not read: its v
  // may be garbage, even NaN, and the other state comes out exactly (x * 1 / 1), a
  // NaN state included; otherwise a NaN LSE makes both weights, v and s NaN.
  float wa = 0.f, wb = 0.f, sum = 1.f, s = -INFINITY;  // two empty states: v = 0, s = -inf
  if (sb == -INFINITY) {
    if (sa != -INFINITY) {
      wa = 1.f;
      s = sa;
    }
  } else if (sa == -INFINITY) {
    wb = 1.f;
    s = sb;
  } else {
    const float m = fmax_nan(sa, sb);
    wa = exp2f(sa - m);
    wb = exp2f(sb - m);
    sum = wa + wb;
    s = m + log2f(sum);
  }
  const T* va = static_cast<const T*>(a.v_a) + i * a.va.row + h * a.va.head;
  const T* vb = static_cast<const T*>(a.v_b) + i * a.vb.row + h * a.vb.head;
  T* vo = static_cast<T*>(a.v_out) + i * a.vo.row + h * a.vo.head;
  for (int c = lane; c < a.map.chunks; c += 1 << a.map.log2_group) {
    Vec<T, kN> x{}, y{};
    if (wa != 0.f) x = load_vec<T, kN>(va + c * kN);
    if (wb != 0.f) y = load_vec<T, kN>(vb + c * kN);
    Vec<T, kN> o;
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      float r = 0.f;
      if (wa != 0.f) r += wa * to_float(x.v[e]);
      if (wb != 0.f) r += wb * to_float(y.v[e]);
      o.v[e] = from_float<T>(r / sum);
    }
    store_vec<T, kN>(vo + c * kN, o);
  }
  if (lane == 0) a.s_out[i * a.so.row + h * a.so.head] = s;
}

struct MergeStatesArgs {
  const void* v;                  // [n, K, heads, head_dim]
  const float* s;                 // [n, K, heads]
  void* v_out;                    // [n, heads, head_dim]
  float* s_out;                   // [n, heads]
  std::int64_t v_state, s_state;  // element strides of dim K
  Strides2 vi, si, vo, so;
  int num_states;  // K
  RowMap map;
};

template <class T, int kN>
__global__ void __launch_bounds__(kThreads) merge_states_kernel(const __grid_constant__ MergeStatesArgs a) {
  allow_next_kernel();
  std::uint32_t row;
  int lane;
  if (!group_lane(a.map, &row, &lane)) return;
  std::uint32_t h;
  const std::uint32_t i = a.map.heads.divmod(row, &h);
  const float* s = a.s + i * a.si.row + h * a.si.head;
  // As the CPU backend: empty states (s = -inf) are skipped, never read; the one
  // non-empty state comes out exactly (a weight of 1 over a sum of 1), a NaN one
  // included; otherwise a NaN LSE makes the merged v and s NaN (m is NaN, and so
  // every weight).
  float m = -INFINITY;
  int non_empty = 0, last = 0;
  for (int k = 0; k < a.num_states; ++k) {
    const float sk = s[k * a.s_state];
    if (sk == -INFINITY) continue;
    ++non_empty;
    last = k;
    m = fmax_nan(m, sk);
  }
  const auto weight = [&](int k) {
    const float sk = s[k * a.s_state];
    return sk == -INFINITY ? 0.f : non_empty == 1 ? 1.f : exp2f(sk - m);
  };
  float sum = 0.f;
  for (int k = 0; k < a.num_states; ++k) sum += weight(k);
  const T* v = static_cast<const T*>(a.v) + i * a.vi.row + h * a.vi.head;
  T* vo = static_cast<T*>(a.v_out) + i * a.vo.row + h * a.vo.head;
  for (int c = lane; c < a.map.chunks; c += 1 << a.map.log2_group) {
    float acc[kN];
#pragma unroll
    for (int e = 0; e < kN; ++e) acc[e] = 0.f;
    for (int k = 0; k < a.num_states; ++k) {
      const float w = weight(k);
      if (w == 0.f) continue;  // an empty state's v is never read
      const Vec<T, kN> x = load_vec<T, kN>(v + k * a.v_state + c * kN);
#pragma unroll
      for (int e = 0; e < kN; ++e) acc[e] += w * to_float(x.v[e]);
    }
    Vec<T, kN> o;
#pragma unroll
    for (int e = 0; e < kN; ++e) o.v[e] = from_float<T>(non_empty == 0 ? 0.f : acc[e] / sum);
    store_vec<T, kN>(vo + c * kN, o);
  }
  if (lane == 0) {
    a.s_out[i * a.so.row + h * a.so.head] =
        non_empty == 0 ? -INFINITY : non_empty == 1 ? s[last * a.s_state] : m + log2f(sum);
  }
}

// Lanes per row: enough for one vector per lane when the row is short, one warp at most.
RowMap make_row_map(std::string_view op, std::int64_t n, std::int64_t heads, std::int64_t chunks) {
  const std::int64_t rows = n * heads;
  if (rows >= (std::int64_t(1) << 31)) {
    throw Error(op, "v", std::to_string(n) + " x " + std::to_string(heads) + " rows",
                "at most 2^31 (token, head) rows per launch");
  }
  int log2_group = 0;
  while (log2_group < 5 && (std::int64_t(1) << log2_group) < chunks) ++log2_group;
  return RowMap{std::uint32_t(rows), FastDivmod(std::uint32_t(heads)), log2_group, int(chunks)};
}

unsigned grid_for_rows(const RowMap& m) {
  const std::int64_t rows_per_block = (kThreads / 32) << (5 - m.log2_group);
  return grid_for(m.rows, int(rows_per_block));
}

// 16-byte vectors when every v pointer and stride allows them, else one element.
int vector_elems(std::size_t es, std::int64_t head_dim, std::initializer_list<const void*> ptrs,
                 std::initializer_list<std::int64_t> strides) {
  std::uint64_t bits = std::uint64_t(head_dim) * es;
  for (const void* p : ptrs) bits |= reinterpret_cast<std::uintptr_t>(p);
  for (std::int64_t s : strides) bits |= std::uint64_t(s) * es;
  return common_vec_bytes(16, {bits}) == 16 ? int(16 / es) : 1;
}

Strides2 strides_of(const TensorView& t, int row_dim, int head_dim) {
  return {t.stride(row_dim), t.stride(head_dim)};
}

}  // namespace

void CudaBackend::merge_state(const detail::MergeStateParams& p) const {
  constexpr std::string_view op = "merge_state";
  const std::int64_t n = p.v_a.size(0), heads = p.v_a.size(1), head_dim = p.v_a.size(2);
  if (n == 0 || heads == 0) return;
  MergeStateArgs a{};
  a.v_a = p.v_a.data();
  a.v_b = p.v_b.data();
  a.v_out = p.v_out.data();
  a.s_a = p.s_a.data_as<const float>();
  a.s_b = p.s_b.data_as<const float>();
  a.s_out = p.s_out.data_as<float>();
  a.mask = p.mask.defined() ? p.mask.data_as<const std::uint8_t>() : nullptr;
  a.va = strides_of(p.v_a, 0, 1);
  a.vb = strides_of(p.v_b, 0, 1);
  a.vo = strides_of(p.v_out, 0, 1);
  a.sa = strides_of(p.s_a, 0, 1);
  a.sb = strides_of(p.s_b, 0, 1);
  a.so = strides_of(p.s_out, 0, 1);
  const std::size_t es = p.v_a.element_size();
  const int vec = vector_elems(es, head_dim, {a.v_a, a.v_b, a.v_out},
                               {a.va.row, a.va.head, a.vb.row, a.vb.head, a.vo.row, a.vo.head});
  a.map = make_row_map(op, n, heads, head_dim / vec);
  const unsigned grid = grid_for_rows(a.map);
  const cudaStream_t s = to_cuda_stream(p.stream);
  // Usually right after the attention kernels that produced the states (a cascade's
  // levels): a programmatic launch hides the gap between them where the device has
  // the Hopper kernels (whose code waits; see launch_after_previous).
  const bool programmatic = hopper_device(p.v_a.device().index);
  dispatch_float_dtype(p.v_a.dtype(), op, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = 16 / sizeof(T);
    const auto kernel = vec == kVec ? merge_state_kernel<T, kVec> : merge_state_kernel<T, 1>;
    launch_after_previous(kernel, dim3(grid), dim3(kThreads), 0, s, programmatic, a);
  });
  KVINFER_CUDA_CHECK_LAUNCH();
}

void CudaBackend::merge_states(const detail::MergeStatesParams& p) const {
  constexpr std::string_view op = "merge_states";
  const std::int64_t n = p.v.size(0), num_states = p.v.size(1), heads = p.v.size(2), head_dim = p.v.size(3);
  if (n == 0 || heads == 0) return;
  MergeStatesArgs a{};
  a.v = p.v.data();
  a.s = p.s.data_as<const float>();
  a.v_out = p.v_out.data();
  a.s_out = p.s_out.data_as<float>();
  a.v_state = p.v.stride(1);
  a.s_state = p.s.stride(1);
  a.vi = strides_of(p.v, 0, 2);
  a.si = strides_of(p.s, 0, 2);
  a.vo = strides_of(p.v_out, 0, 1);
  a.so = strides_of(p.s_out, 0, 1);
  a.num_states = int(num_states);
  const std::size_t es = p.v.element_size();
  const int vec =
      vector_elems(es, head_dim, {a.v, a.v_out}, {a.v_state, a.vi.row, a.vi.head, a.vo.row, a.vo.head});
  a.map = make_row_map(op, n, heads, head_dim / vec);
  const unsigned grid = grid_for_rows(a.map);
  const cudaStream_t s = to_cuda_stream(p.stream);
  dispatch_float_dtype(p.v.dtype(), op, [&](auto t) {
    using T = decltype(t);
    constexpr int kVec = 16 / sizeof(T);
    if (vec == kVec) {
      merge_states_kernel<T, kVec><<<grid, kThreads, 0, s>>>(a);
    } else {
      merge_states_kernel<T, 1><<<grid, kThreads, 0, s>>>(a);
    }
  });
  KVINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace kvinfer::cuda
