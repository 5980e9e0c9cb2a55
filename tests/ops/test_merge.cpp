// SPDX-License-Identifier: Apache-2.0
// merge_state, merge_state_in_place and merge_states on the CPU against the
// oracle's float64 merge, plus the exact cases (empty states) and every rejected input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kvinfer/core/error.hpp"
#include "kvinfer/core/float_convert.hpp"
#include "kvinfer/ops/merge.hpp"
#include "oracle/oracle.hpp"

namespace kvinfer {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------- element access

double load(const void* p, DType t) {
  switch (t) {
    case DType::kF32: return *static_cast<const float*>(p);
    case DType::kF16: return f16_to_f32(*static_cast<const std::uint16_t*>(p));
    case DType::kBF16: return bf16_to_f32(*static_cast<const std::uint16_t*>(p));
    default: ADD_FAILURE() << "unexpected dtype " << dtype_name(t); return 0;
  }
}

void store(void* p, DType t, float x) {
  switch (t) {
    case DType::kF32: *static_cast<float*>(p) = x; return;
    case DType::kF16: *static_cast<std::uint16_t*>(p) = f32_to_f16(x); return;
    case DType::kBF16: *static_cast<std::uint16_t*>(p) = f32_to_bf16(x); return;
    default: ADD_FAILURE() << "unexpected dtype " << dtype_name(t);
  }
}

// Visits every element of a (possibly strided) view in row-major order.
template <class Fn>
void for_each_element(const TensorView& t, Fn&& fn) {
  std::vector<std::int64_t> idx(std::size_t(t.rank()), 0);
  auto* base = static_cast<std::byte*>(t.data());
  const auto elem = std::int64_t(t.element_size());
  const std::span<const std::int64_t> shape = t.shape(), strides = t.strides();
  std::int64_t offset = 0;  // elements from base to the element at idx
  for (std::int64_t flat = 0, count = t.numel(); flat < count; ++flat) {
    fn(static_cast<void*>(base + offset * elem));
    for (int d = t.rank() - 1; d >= 0; --d) {
      offset += strides[d];
      if (++idx[d] < shape[d]) break;
      offset -= idx[d] * strides[d];
      idx[d] = 0;
    }
  }
}

std::vector<double> to_doubles(const TensorView& t) {
  std::vector<double> out;
  for_each_element(t, [&](void* p) { out.push_back(load(p, t.dtype())); });
  return out;
}

std::vector<std::uint16_t> raw_halves(const TensorView& t) {
  std::vector<std::uint16_t> out;
  for_each_element(t, [&](void* p) { out.push_back(*static_cast<std::uint16_t*>(p)); });
  return out;
}

// Unit roundoff of the output dtype: rounding to nearest errs by at most u |x|.
double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF32: return std::ldexp(1.0, -24);
    case DType::kF16: return std::ldexp(1.0, -11);
    case DType::kBF16: return std::ldexp(1.0, -8);
    default: return 0;
  }
}

// ---------------------------------------------------------------- random states

// An attention state: values v [n, heads, dim] and their LSEs s [n, heads] (float32).
struct State {
  Tensor v, s;
};

struct RandomStates {
  std::mt19937 rng;
  explicit RandomStates(unsigned seed) : rng(seed) {}

  // Two random states (fill_values, then fill_lse), `empty_fraction` of their rows
  // empty; with `poison`, NaN values in the empty ones (poison_empty).
  std::pair<State, State> two(std::int64_t n, std::int64_t heads, std::int64_t dim, DType dtype,
                              double empty_fraction, bool poison = false) {
    State a{Tensor::empty({n, heads, dim}, dtype), Tensor::empty({n, heads}, DType::kF32)};
    State b{Tensor::empty({n, heads, dim}, dtype), Tensor::empty({n, heads}, DType::kF32)};
    fill_values(a.v);
    fill_values(b.v);
    fill_lse(a.s, empty_fraction);
    fill_lse(b.s, empty_fraction);
    if (poison) {
      poison_empty(a.v, a.s);
      poison_empty(b.v, b.s);
    }
    return {std::move(a), std::move(b)};
  }

  // Values ~ N(0, 1), rounded to `dtype`.
  void fill_values(const TensorView& v) {
    std::normal_distribution<float> dist;
    for_each_element(v, [&](void* p) { store(p, v.dtype(), dist(rng)); });
  }

  // LSEs in [-20, 20] with -inf (empty states) sprinkled in and, now and then, a
  // value far from the rest so that one weight underflows.
  void fill_lse(const TensorView& s, double empty_fraction) {
    std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for_each_element(s, [&](void* p) {
      const double c = coin(rng);
      float x = dist(rng);
      if (c < empty_fraction) x = kNegInf;
      else if (c < empty_fraction + 0.03) x = x < 0 ? -200.0f : 150.0f;
      *static_cast<float*>(p) = x;
    });
  }

  // Writes NaN into the values of every empty state (s = -inf): they must be ignored.
  static void poison_empty(const TensorView& v, const TensorView& s) {
    const std::int64_t rows = s.numel(), dim = v.size(-1);
    std::vector<float> lse;
    for_each_element(s, [&](void* p) { lse.push_back(*static_cast<float*>(p)); });
    std::int64_t flat = 0;
    for_each_element(v, [&](void* p) {
      const std::int64_t row = flat++ / dim;
      if (row < rows && lse[std::size_t(row)] == kNegInf) store(p, v.dtype(), kNaN);
    });
  }
};

// Compares a merged state with the oracle's. `scale[i]` bounds the magnitude of
// the inputs that element i was computed from (float32 accumulation errs relative to it).
void expect_close(const TensorView& v, const TensorView& s, const oracle::AttentionResult& ref,
                  const std::vector<double>& scale, const std::string& what) {
  const std::vector<double> got_v = to_doubles(v), got_s = to_doubles(s);
  ASSERT_EQ(got_v.size(), ref.o.size()) << what;
  ASSERT_EQ(got_s.size(), ref.lse.size()) << what;
  const double u = unit_roundoff(v.dtype());
  int bad = 0;
  for (std::size_t i = 0; i < got_v.size() && bad < 5; ++i) {
    const double tol = 2 * u * std::abs(ref.o[i]) + 1e-6 * scale[i];
    if (!(std::abs(got_v[i] - ref.o[i]) <= tol)) {  // NaN fails
      ADD_FAILURE() << what << ": v[" << i << "] = " << got_v[i] << ", oracle " << ref.o[i]
                    << ", tolerance " << tol;
      ++bad;
    }
  }
  for (std::size_t i = 0; i < got_s.size() && bad < 10; ++i) {
    if (ref.lse[i] == -INFINITY || got_s[i] == -INFINITY) {
      if (got_s[i] != ref.lse[i]) {
        ADD_FAILURE() << what << ": s[" << i << "] = " << got_s[i] << ", oracle " << ref.lse[i];
        ++bad;
      }
      continue;
    }
    if (!(std::abs(got_s[i] - ref.lse[i]) <= 1e-6 * (1 + std::abs(ref.lse[i])))) {
      ADD_FAILURE() << what << ": s[" << i << "] = " << got_s[i] << ", oracle " << ref.lse[i];
      ++bad;
    }
  }
}

// Sum of |inputs| per output element over the states, for the tolerance;
// an empty state (whose values may be NaN) does not count.
std::vector<double> input_scale(const std::vector<oracle::AttentionResult>& states) {
  const std::size_t rows = states[0].lse.size(), dim = rows ? states[0].o.size() / rows : 0;
  std::vector<double> scale(states[0].o.size(), 0.0);
  for (const auto& st : states)
    for (std::size_t r = 0; r < rows; ++r)
      if (st.lse[r] != -INFINITY)
        for (std::size_t d = 0; d < dim; ++d) scale[r * dim + d] += std::abs(st.o[r * dim + d]);
  return scale;
}

const DType kDtypes[] = {DType::kF32, DType::kF16, DType::kBF16};

struct Dims {
  std::int64_t n, heads, head_dim;
};
const Dims kDims[] = {{1, 1, 64}, {37, 3, 128}, {300, 8, 64}, {129, 5, 128}, {8, 2, 64}};

std::string label(DType t, const Dims& d) {
  return std::string(dtype_name(t)) + " n=" + std::to_string(d.n) + " H=" + std::to_string(d.heads) +
         " D=" + std::to_string(d.head_dim);
}

// ---------------------------------------------------------------- merge_state

TEST(MergeState, RandomStatesMatchOracle) {
  RandomStates gen(1);
  for (DType dtype : kDtypes) {
    for (const Dims& d : kDims) {
      auto [a, b] = gen.two(d.n, d.heads, d.head_dim, dtype, 0.15, true);
      const Tensor &va = a.v, &sa = a.s, &vb = b.v, &sb = b.s;
      Tensor vo = Tensor::empty({d.n, d.heads, d.head_dim}, dtype);
      Tensor so = Tensor::empty({d.n, d.heads}, DType::kF32);
      fill_bytes(vo, 0xFF);  // poison: every output must be written
      fill_bytes(so, 0xFF);
      merge_state(va, sa, vb, sb, vo, so);

      const std::vector<oracle::AttentionResult> states = {{to_doubles(va), to_doubles(sa)},
                                                           {to_doubles(vb), to_doubles(sb)}};
      expect_close(vo, so, oracle::merge_state(states[0], states[1]), input_scale(states),
                   label(dtype, d));
    }
  }
}

TEST(MergeState, OneEmptyStateGivesTheOtherExactly) {
  RandomStates gen(2);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::int64_t n = 4, heads = 2, dim = 64;
    auto [state_a, state_b] = gen.two(n, heads, dim, dtype, 0.0);
    Tensor &va = state_a.v, &sa = state_a.s, &vb = state_b.v, &sb = state_b.s;
    // Rows 0, 1: a is empty; rows 2, 3: b is empty.
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t h = 0; h < heads; ++h)
        (i < 2 ? sa : sb).data_as<float>()[i * heads + h] = kNegInf;
    RandomStates::poison_empty(va, sa);
    RandomStates::poison_empty(vb, sb);
    Tensor vo = Tensor::empty({n, heads, dim}, dtype), so = Tensor::empty({n, heads}, DType::kF32);
    merge_state(va, sa, vb, sb, vo, so);
    const auto out = raw_halves(vo), a = raw_halves(va), b = raw_halves(vb);
    for (std::int64_t x = 0; x < n * heads * dim; ++x) {
      const bool from_b = x / (heads * dim) < 2;
      ASSERT_EQ(out[x], from_b ? b[x] : a[x]) << dtype_name(dtype) << " element " << x;
    }
    for (std::int64_t x = 0; x < n * heads; ++x) {
      EXPECT_EQ(so.data_as<float>()[x], (x / heads < 2 ? sb : sa).data_as<float>()[x]);
    }
  }
}

TEST(MergeState, TwoEmptyStatesGiveZeroAndMinusInfinity) {
  for (DType dtype : kDtypes) {
    Tensor va = Tensor::empty({2, 1, 64}, dtype), vb = Tensor::empty({2, 1, 64}, dtype);
    Tensor sa = Tensor::empty({2, 1}, DType::kF32), sb = Tensor::empty({2, 1}, DType::kF32);
    for (Tensor* s : {&sa, &sb}) s->data_as<float>()[0] = s->data_as<float>()[1] = kNegInf;
    RandomStates::poison_empty(va, sa);
    RandomStates::poison_empty(vb, sb);
    Tensor vo = Tensor::empty({2, 1, 64}, dtype), so = Tensor::empty({2, 1}, DType::kF32);
    fill_bytes(vo, 0xFF);
    merge_state(va, sa, vb, sb, vo, so);
    for (double x : to_doubles(vo)) ASSERT_EQ(x, 0.0) << dtype_name(dtype);
    EXPECT_EQ(so.data_as<float>()[0], kNegInf);
    EXPECT_EQ(so.data_as<float>()[1], kNegInf);
  }
}

TEST(MergeState, StridedViewsAndOutputAliasingInput) {
  RandomStates gen(3);
  const std::int64_t n = 23, heads = 4, dim = 64;
  // Every other head of a wider tensor, and LSEs with a row stride of 2 * heads.
  Tensor big_a = Tensor::empty({n, 2 * heads, dim}, DType::kBF16);
  Tensor big_s = Tensor::empty({n, 2 * heads}, DType::kF32);
  const std::int64_t v_shape[] = {n, heads, dim}, v_strides[] = {2 * heads * dim, 2 * dim, 1};
  const std::int64_t s_shape[] = {n, heads}, s_strides[] = {2 * heads, 1};
  const TensorView va(big_a.data(), DType::kBF16, v_shape, v_strides);
  const TensorView sa(big_s.data(), DType::kF32, s_shape, s_strides);
  Tensor vb = Tensor::empty({n, heads, dim}, DType::kBF16), sb = Tensor::empty({n, heads}, DType::kF32);
  gen.fill_values(big_a);
  gen.fill_values(vb);
  gen.fill_lse(big_s, 0.1);
  gen.fill_lse(sb, 0.1);
  const std::vector<oracle::AttentionResult> states = {{to_doubles(va), to_doubles(sa)},
                                                       {to_doubles(vb), to_doubles(sb)}};
  const TensorView odd_heads(big_a.data_as<std::uint16_t>() + dim, DType::kBF16, v_shape, v_strides);
  const std::vector<std::uint16_t> untouched = raw_halves(odd_heads);
  merge_state(va, sa, vb, sb, va, sa);  // v_out = v_a, s_out = s_a
  expect_close(va, sa, oracle::merge_state(states[0], states[1]), input_scale(states), "strided");
  // The heads between the view's heads are not written.
  EXPECT_EQ(raw_halves(odd_heads), untouched);
}

TEST(MergeState, EmptyBatchDoesNothing) {
  Tensor v = Tensor::empty({0, 4, 64}, DType::kF16), s = Tensor::empty({0, 4}, DType::kF32);
  EXPECT_NO_THROW(merge_state(v, s, v, s, v, s));
  EXPECT_NO_THROW(merge_state_in_place(v, s, v, s));
  Tensor vk = Tensor::empty({0, 3, 4, 64}, DType::kF16), sk = Tensor::empty({0, 3, 4}, DType::kF32);
  EXPECT_NO_THROW(merge_states(vk, sk, v, s));
}

// ---------------------------------------------------------------- merge_state_in_place

TEST(MergeStateInPlace, MaskedRowsAreSkipped) {
  RandomStates gen(4);
  for (DType dtype : kDtypes) {
    for (DType mask_dtype : {DType::kBool, DType::kU8}) {
      const std::int64_t n = 200, heads = 3, dim = 128;
      auto [mine, other] = gen.two(n, heads, dim, dtype, 0.1);
      Tensor &v = mine.v, &s = mine.s, &vo = other.v, &so = other.s;
      Tensor mask = Tensor::empty({n}, mask_dtype);
      std::bernoulli_distribution keep(0.6);
      for (std::int64_t i = 0; i < n; ++i) mask.data_as<std::uint8_t>()[i] = keep(gen.rng) ? 1 : 0;
      mask.data_as<std::uint8_t>()[0] = 0;
      mask.data_as<std::uint8_t>()[1] = mask_dtype == DType::kU8 ? 7 : 1;  // any non-zero byte merges

      const std::vector<oracle::AttentionResult> states = {{to_doubles(v), to_doubles(s)},
                                                           {to_doubles(vo), to_doubles(so)}};
      oracle::AttentionResult want = oracle::merge_state(states[0], states[1]);
      std::vector<double> scale = input_scale(states);
      // Skipped rows keep their state, to the bit (checked with tolerance 0 below).
      for (std::int64_t i = 0; i < n; ++i) {
        if (mask.data_as<std::uint8_t>()[i] != 0) continue;
        for (std::int64_t x = i * heads * dim; x < (i + 1) * heads * dim; ++x) {
          want.o[x] = states[0].o[x];
          scale[x] = 0;
        }
        for (std::int64_t x = i * heads; x < (i + 1) * heads; ++x) want.lse[x] = states[0].lse[x];
      }
      const std::vector<double> s_before = to_doubles(s);
      merge_state_in_place(v, s, vo, so, mask);
      // Bitwise (memcmp, so NaN and -inf compare too) on the skipped rows.
      const std::vector<double> got_v = to_doubles(v), got_s = to_doubles(s);
      for (std::int64_t i = 0; i < n; ++i) {
        if (mask.data_as<std::uint8_t>()[i] != 0) continue;
        const std::size_t ov = std::size_t(i * heads * dim), os = std::size_t(i * heads);
        ASSERT_EQ(std::memcmp(&got_v[ov], &want.o[ov], sizeof(double) * heads * dim), 0) << "row " << i;
        ASSERT_EQ(std::memcmp(&got_s[os], &s_before[os], sizeof(double) * heads), 0) << "row " << i;
      }
      expect_close(v, s, want, scale, std::string(dtype_name(dtype)) + " mask " +
                                          std::string(dtype_name(mask_dtype)));
    }
  }
}

TEST(MergeStateInPlace, WithoutMaskMergesEveryRow) {
  RandomStates gen(5);
  const std::int64_t n = 64, heads = 8, dim = 64;
  auto [mine, other] = gen.two(n, heads, dim, DType::kF16, 0.2);
  Tensor &v = mine.v, &s = mine.s, &vo = other.v, &so = other.s;
  const std::vector<oracle::AttentionResult> states = {{to_doubles(v), to_doubles(s)},
                                                       {to_doubles(vo), to_doubles(so)}};
  merge_state_in_place(v, s, vo, so);
  expect_close(v, s, oracle::merge_state(states[0], states[1]), input_scale(states), "no mask");
}

// ---------------------------------------------------------------- merge_states

TEST(MergeStates, KStatesMatchOracle) {
  RandomStates gen(6);
  for (DType dtype : kDtypes) {
    for (std::int64_t k : {1, 2, 5}) {
      for (const Dims& d : {Dims{1, 1, 64}, Dims{150, 6, 128}, Dims{33, 8, 64}}) {
        Tensor v = Tensor::empty({d.n, k, d.heads, d.head_dim}, dtype);
        Tensor s = Tensor::empty({d.n, k, d.heads}, DType::kF32);
        gen.fill_values(v);
        gen.fill_lse(s, k == 1 ? 0.2 : 0.4);  // many rows with every state empty
        RandomStates::poison_empty(v, s);
        Tensor vo = Tensor::empty({d.n, d.heads, d.head_dim}, dtype);
        Tensor so = Tensor::empty({d.n, d.heads}, DType::kF32);
        fill_bytes(vo, 0xFF);
        fill_bytes(so, 0xFF);
        merge_states(v, s, vo, so);

        std::vector<oracle::AttentionResult> states;
        for (std::int64_t i = 0; i < k; ++i) {
          states.push_back({to_doubles(v.view().select(1, i)), to_doubles(s.view().select(1, i))});
        }
        expect_close(vo, so, oracle::merge_states(states), input_scale(states),
                     label(dtype, d) + " K=" + std::to_string(k));
        if (k == 1 && dtype == DType::kF32) {
          // One state comes out unchanged (an empty one as zeros).
          const std::vector<double> got = to_doubles(vo);
          for (std::size_t r = 0; r < states[0].lse.size(); ++r)
            for (std::int64_t x = 0; x < d.head_dim; ++x) {
              const std::size_t at = r * std::size_t(d.head_dim) + std::size_t(x);
              ASSERT_EQ(got[at], states[0].lse[r] == -INFINITY ? 0.0 : states[0].o[at]);
            }
        }
      }
    }
  }
}

TEST(MergeStates, StridedInput) {
  RandomStates gen(7);
  const std::int64_t n = 17, k = 3, heads = 2, dim = 64;
  // The first k of 4 states per row.
  Tensor big_v = Tensor::empty({n, 4, heads, dim}, DType::kBF16);
  Tensor big_s = Tensor::empty({n, 4, heads}, DType::kF32);
  gen.fill_values(big_v);
  gen.fill_lse(big_s, 0.2);
  const TensorView v = big_v.view().slice(1, 0, k), s = big_s.view().slice(1, 0, k);
  Tensor vo = Tensor::empty({n, heads, dim}, DType::kBF16), so = Tensor::empty({n, heads}, DType::kF32);
  merge_states(v, s, vo, so);
  std::vector<oracle::AttentionResult> states;
  for (std::int64_t i = 0; i < k; ++i) states.push_back({to_doubles(v.select(1, i)), to_doubles(s.select(1, i))});
  expect_close(vo, so, oracle::merge_states(states), input_scale(states), "strided K=3");
}

// ---------------------------------------------------------------- rejected input

template <class Fn>
void expect_rejected(Fn&& fn, const std::string& argument) {
  try {
    fn();
    ADD_FAILURE() << "expected kvinfer::Error naming " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_FALSE(e.rule().empty());
  }
}

TEST(MergeState, RejectsBadArguments) {
  const std::int64_t n = 4, h = 2, d = 64;
  Tensor v = Tensor::zeros({n, h, d}, DType::kF16), v2 = Tensor::zeros({n, h, d}, DType::kF16);
  Tensor vo = Tensor::zeros({n, h, d}, DType::kF16);
  Tensor s = Tensor::zeros({n, h}, DType::kF32), s2 = Tensor::zeros({n, h}, DType::kF32);
  Tensor so = Tensor::zeros({n, h}, DType::kF32);
  Tensor v_bf16 = Tensor::zeros({n, h, d}, DType::kBF16);
  Tensor v_fp8 = Tensor::zeros({n, h, d}, DType::kE4M3);
  Tensor v_rank2 = Tensor::zeros({n, h * d}, DType::kF16);
  Tensor v_heads = Tensor::zeros({n, h + 1, d}, DType::kF16);
  Tensor v_rows = Tensor::zeros({n + 1, h, d}, DType::kF16);
  Tensor v_dim0 = Tensor::zeros({n, h, 0}, DType::kF16);
  Tensor s_f16 = Tensor::zeros({n, h}, DType::kF16);
  Tensor s_rows = Tensor::zeros({n - 1, h}, DType::kF32);
  Tensor s_rank3 = Tensor::zeros({n, h, 1}, DType::kF32);
  Tensor wide = Tensor::zeros({n, h, 2 * d}, DType::kF16);
  const std::int64_t shape[] = {n, h, d}, strides[] = {h * 2 * d, 2 * d, 2};
  const TensorView v_strided(wide.data(), DType::kF16, shape, strides);
  const TensorView v_gpu(v.data(), DType::kF16, shape, Device::cuda(0));
  const std::int64_t s_shape[] = {n, h};
  const TensorView s_gpu(s.data(), DType::kF32, s_shape, Device::cuda(0));

  expect_rejected([&] { merge_state(v_fp8, s, v, s2, vo, so); }, "v_a.dtype");
  expect_rejected([&] { merge_state(v_rank2, s, v, s2, vo, so); }, "v_a.shape");
  expect_rejected([&] { merge_state(v_strided, s, v, s2, vo, so); }, "v_a.stride(-1)");
  expect_rejected([&] { merge_state(v_dim0, s, v, s2, vo, so); }, "v_a.shape[2]");
  expect_rejected([&] { merge_state(TensorView(), s, v, s2, vo, so); }, "v_a");
  expect_rejected([&] { merge_state(v, s_f16, v2, s2, vo, so); }, "s_a.dtype");
  expect_rejected([&] { merge_state(v, s_rows, v2, s2, vo, so); }, "s_a.shape[0]");
  expect_rejected([&] { merge_state(v, s_rank3, v2, s2, vo, so); }, "s_a.shape");
  expect_rejected([&] { merge_state(v, s, v_bf16, s2, vo, so); }, "v_b.dtype");
  expect_rejected([&] { merge_state(v, s, v_heads, s2, vo, so); }, "v_b.shape[1]");
  expect_rejected([&] { merge_state(v, s, v_rows, s2, vo, so); }, "v_b.shape[0]");
  expect_rejected([&] { merge_state(v, s, v_strided, s2, vo, so); }, "v_b.stride(-1)");
  expect_rejected([&] { merge_state(v, s, v_gpu, s2, vo, so); }, "v_b.device");
  expect_rejected([&] { merge_state(v, s, v2, s_gpu, vo, so); }, "s_b.device");
  expect_rejected([&] { merge_state(v, s, v2, s2, v_bf16, so); }, "v_out.dtype");
  expect_rejected([&] { merge_state(v, s, v2, s2, TensorView(), so); }, "v_out");
  expect_rejected([&] { merge_state(v, s, v2, s2, vo, TensorView()); }, "s_out");
  expect_rejected([&] { merge_state(v, s, v2, s2, vo, s_rows); }, "s_out.shape[0]");
  if (!cuda_backend_built()) {
    // Every tensor on a GPU that this build cannot reach.
    expect_rejected([&] { merge_state(v_gpu, s_gpu, v_gpu, s_gpu, v_gpu, s_gpu); }, "v_a.device");
  }
}

TEST(MergeStateInPlace, RejectsBadArguments) {
  const std::int64_t n = 4, h = 2, d = 64;
  Tensor v = Tensor::zeros({n, h, d}, DType::kBF16), vo = Tensor::zeros({n, h, d}, DType::kBF16);
  Tensor s = Tensor::zeros({n, h}, DType::kF32), so = Tensor::zeros({n, h}, DType::kF32);
  Tensor mask_i32 = Tensor::zeros({n}, DType::kI32);
  Tensor mask_short = Tensor::zeros({n - 1}, DType::kBool);
  Tensor mask_2d = Tensor::zeros({n, 1}, DType::kU8);
  Tensor mask_wide = Tensor::zeros({2 * n}, DType::kU8);
  const std::int64_t m_shape[] = {n}, m_strides[] = {2};
  const TensorView mask_strided(mask_wide.data(), DType::kU8, m_shape, m_strides);
  const TensorView mask_gpu(mask_wide.data(), DType::kU8, m_shape, Device::cuda(0));
  Tensor s_f32_3d = Tensor::zeros({n, h, 1}, DType::kF32);
  Tensor v_f16 = Tensor::zeros({n, h, d}, DType::kF16);

  expect_rejected([&] { merge_state_in_place(v, s, vo, so, mask_i32); }, "mask.dtype");
  expect_rejected([&] { merge_state_in_place(v, s, vo, so, mask_short); }, "mask.shape[0]");
  expect_rejected([&] { merge_state_in_place(v, s, vo, so, mask_2d); }, "mask.shape");
  expect_rejected([&] { merge_state_in_place(v, s, vo, so, mask_strided); }, "mask.stride(-1)");
  expect_rejected([&] { merge_state_in_place(v, s, vo, so, mask_gpu); }, "mask.device");
  expect_rejected([&] { merge_state_in_place(v, s_f32_3d, vo, so); }, "s.shape");
  expect_rejected([&] { merge_state_in_place(v, s, v_f16, so); }, "v_other.dtype");
  expect_rejected([&] { merge_state_in_place(v, s, vo, TensorView()); }, "s_other");
}

TEST(MergeStates, RejectsBadArguments) {
  const std::int64_t n = 4, k = 3, h = 2, d = 64;
  Tensor v = Tensor::zeros({n, k, h, d}, DType::kF32), s = Tensor::zeros({n, k, h}, DType::kF32);
  Tensor vo = Tensor::zeros({n, h, d}, DType::kF32), so = Tensor::zeros({n, h}, DType::kF32);
  Tensor v_rank3 = Tensor::zeros({n, h, d}, DType::kF32);
  Tensor v_i32 = Tensor::zeros({n, k, h, d}, DType::kI32);
  Tensor v_k0 = Tensor::zeros({n, 0, h, d}, DType::kF32), s_k0 = Tensor::zeros({n, 0, h}, DType::kF32);
  Tensor s_k = Tensor::zeros({n, k + 1, h}, DType::kF32);
  Tensor s_bf16 = Tensor::zeros({n, k, h}, DType::kBF16);
  Tensor vo_dim = Tensor::zeros({n, h, d / 2}, DType::kF32);
  Tensor vo_heads = Tensor::zeros({n, h + 1, d}, DType::kF32);
  Tensor vo_f16 = Tensor::zeros({n, h, d}, DType::kF16);
  Tensor so_rows = Tensor::zeros({n + 1, h}, DType::kF32);
  const std::int64_t so_shape[] = {n, h};
  const TensorView so_gpu(so.data(), DType::kF32, so_shape, Device::cuda(0));

  expect_rejected([&] { merge_states(v_rank3, s, vo, so); }, "v.shape");
  expect_rejected([&] { merge_states(v_i32, s, vo, so); }, "v.dtype");
  expect_rejected([&] { merge_states(v_k0, s_k0, vo, so); }, "v.shape[1]");
  expect_rejected([&] { merge_states(v, s_k, vo, so); }, "s.shape[1]");
  expect_rejected([&] { merge_states(v, s_bf16, vo, so); }, "s.dtype");
  expect_rejected([&] { merge_states(v, s, vo_dim, so); }, "v_out.shape[2]");
  expect_rejected([&] { merge_states(v, s, vo_heads, so); }, "v_out.shape[1]");
  expect_rejected([&] { merge_states(v, s, vo_f16, so); }, "v_out.dtype");
  expect_rejected([&] { merge_states(v, s, vo, so_rows); }, "s_out.shape[0]");
  expect_rejected([&] { merge_states(v, s, vo, so_gpu); }, "s_out.device");
}

}  // namespace
}  // namespace kvinfer
