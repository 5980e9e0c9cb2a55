// SPDX-License-Identifier: Apache-2.0
// CPU backend of merge_state / merge_states: the base-2 LSE merge of SPEC §4,
// accumulated in float32, one row of n per parallel_for index, with its row buffers
// from the thread's Scratch. Empty states (LSE -inf) weigh nothing: a state merged
// only with empty ones comes out bit for bit; otherwise a NaN LSE gives NaN (the
// rule of kvinfer/attention/options.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/backend.hpp"
#include "cpu/convert.hpp"
#include "cpu/thread_pool.hpp"

namespace kvinfer::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A tensor's base pointer and strides, read once: the accessors below run per
// (row, head) and must not go through TensorView's checked size()/stride().
struct Strided {
  std::byte* base;
  std::int64_t elem;
  std::int64_t stride[4];

  explicit Strided(const TensorView& t)
      : base(static_cast<std::byte*>(t.data())), elem(std::int64_t(t.element_size())), stride{} {
    for (int d = 0; d < t.rank() && d < 4; ++d) stride[d] = t.strides()[std::size_t(d)];
  }
  std::byte* at(std::int64_t i0, std::int64_t i1) const {
    return base + (i0 * stride[0] + i1 * stride[1]) * elem;
  }
  std::byte* at(std::int64_t i0, std::int64_t i1, std::int64_t i2) const {
    return base + (i0 * stride[0] + i1 * stride[1] + i2 * stride[2]) * elem;
  }
  float& lse(std::int64_t i0, std::int64_t i1) const { return *reinterpret_cast<float*>(at(i0, i1)); }
  float& lse(std::int64_t i0, std::int64_t i1, std::int64_t i2) const {
    return *reinterpret_cast<float*>(at(i0, i1, i2));
  }
};

}  // namespace

void CpuBackend::merge_state(const detail::MergeStateParams& p) const {
  const std::int64_t n = p.v_a.size(0), num_heads = p.v_a.size(1), head_dim = p.v_a.size(2);
  const DType dtype = p.v_a.dtype();
  const std::size_t row_bytes = std::size_t(head_dim) * p.v_a.element_size();
  const Strided v_a(p.v_a), s_a(p.s_a), v_b(p.v_b), s_b(p.s_b), v_out(p.v_out), s_out(p.s_out);
  const auto* mask = p.mask.defined() ? p.mask.data_as<const std::uint8_t>() : nullptr;
  const std::int64_t mask_stride = p.mask.defined() ? p.mask.stride(0) : 0;
  parallel_for(n, [&](std::int64_t i, Scratch& scratch) {
    if (mask != nullptr && mask[i * mask_stride] == 0) return;
    scratch.begin(2 * Scratch::bytes_for<float>(std::size_t(head_dim)));
    float* a = scratch.take<float>(std::size_t(head_dim));
    float* b = scratch.take<float>(std::size_t(head_dim));
    for (std::int64_t h = 0; h < num_heads; ++h) {
      const float sa = s_a.lse(i, h), sb = s_b.lse(i, h);
      std::byte* out = v_out.at(i, h);
      float& so = s_out.lse(i, h);
      // An empty state (s = -inf) has weight 0: the result is exactly the other state,
      // copied bit for bit, whatever the empty one's v holds.
      if (sa == kNegInf && sb == kNegInf) {
        std::fill(a, a + head_dim, 0.0f);
        store_row(a, dtype, out, head_dim);
        so = kNegInf;
        continue;
      }
      if (sb == kNegInf || sa == kNegInf) {
        const bool keep_a = sb == kNegInf;
        std::memmove(out, keep_a ? v_a.at(i, h) : v_b.at(i, h), row_bytes);
        so = keep_a ? sa : sb;
        continue;
      }
      const float m = std::max(sa, sb);
      const float wa = std::exp2(sa - m), wb = std::exp2(sb - m);
      const float sum = wa + wb;
      load_row(v_a.at(i, h), dtype, a, head_dim);
      load_row(v_b.at(i, h), dtype, b, head_dim);
      for (std::int64_t d = 0; d < head_dim; ++d) a[d] = (wa * a[d] + wb * b[d]) / sum;
      store_row(a, dtype, out, head_dim);  // v_out may be v_a: written after both are read
      so = m + std::log2(sum);
    }
  });
}

void CpuBackend::merge_states(const detail::MergeStatesParams& p) const {
  const std::int64_t n = p.v.size(0), num_states = p.v.size(1), num_heads = p.v.size(2),
                     head_dim = p.v.size(3);
  const DType dtype = p.v.dtype();
  const std::size_t row_bytes = std::size_t(head_dim) * p.v.element_size();
  const Strided v(p.v), s(p.s), v_out(p.v_out), s_out(p.s_out);
  parallel_for(n, [&](std::int64_t i, Scratch& scratch) {
    scratch.begin(2 * Scratch::bytes_for<float>(std::size_t(head_dim)));
    float* acc = scratch.take<float>(std::size_t(head_dim));
    float* row = scratch.take<float>(std::size_t(head_dim));
    for (std::int64_t h = 0; h < num_heads; ++h) {
      float m = kNegInf;
      bool nan = false;
      std::int64_t non_empty = 0, last = -1;
      for (std::int64_t k = 0; k < num_states; ++k) {
        const float sk = s.lse(i, k, h);
        if (sk == kNegInf) continue;
        ++non_empty;
        last = k;
        nan |= std::isnan(sk);
        m = std::max(m, sk);
      }
      if (non_empty == 1) {  // the one non-empty state, bit for bit
        std::memmove(v_out.at(i, h), v.at(i, last, h), row_bytes);
        s_out.lse(i, h) = s.lse(i, last, h);
        continue;
      }
      std::fill(acc, acc + head_dim, nan ? kNaN : 0.0f);
      float sum = 0.0f;
      // Every state empty: o = 0, s = -inf; empty states are skipped, not multiplied by 0.
      for (std::int64_t k = 0; k < num_states && non_empty > 0 && !nan; ++k) {
        const float sk = s.lse(i, k, h);
        if (sk == kNegInf) continue;
        const float w = std::exp2(sk - m);
        sum += w;
        load_row(v.at(i, k, h), dtype, row, head_dim);
        for (std::int64_t d = 0; d < head_dim; ++d) acc[d] += w * row[d];
      }
      if (non_empty > 0 && !nan) {
        for (std::int64_t d = 0; d < head_dim; ++d) acc[d] /= sum;
      }
      store_row(acc, dtype, v_out.at(i, h), head_dim);
      s_out.lse(i, h) = nan ? kNaN : (non_empty == 0 ? kNegInf : m + std::log2(sum));
    }
  });
}

}  // namespace kvinfer::cpu
