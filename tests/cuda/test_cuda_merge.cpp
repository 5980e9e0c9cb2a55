// SPDX-License-Identifier: Apache-2.0
// merge_state, merge_state_in_place and merge_states on the GPU against the CPU
// backend (within float tolerance): dtypes, head dims that do and do not allow
// vectors, strided states, empty states (whose v may be garbage), row masks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "kvinfer/core/float_convert.hpp"
#include "kvinfer/ops/merge.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void store_float(void* p, DType t, float x) {
  switch (t) {
    case DType::kF32:
      std::memcpy(p, &x, 4);
      break;
    case DType::kF16: {
      const std::uint16_t b = f32_to_f16(x);
      std::memcpy(p, &b, 2);
      break;
    }
    default: {
      const std::uint16_t b = f32_to_bf16(x);
      std::memcpy(p, &b, 2);
      break;
    }
  }
}

// A state tensor: values uniform in [-2, 2) through a (possibly padded) view.
struct State {
  Mirror v;
  TensorView v_view;
  Mirror s;
  TensorView s_view;
};

// v [lead..., H, D] and s [lead..., H]; `empty_frac` of the LSEs are -inf, and those
// rows' values are NaN (an empty state's v is not to be read).
State random_state(std::vector<std::int64_t> lead, std::int64_t H, std::int64_t D, DType dtype, bool strided,
                   double empty_frac, Rng& rng) {
  std::vector<std::int64_t> vshape = lead, sshape = lead;
  vshape.push_back(H);
  vshape.push_back(D);
  sshape.push_back(H);
  std::vector<std::int64_t> vpad(vshape.size(), strided ? 1 : 0), spad(sshape.size(), strided ? 2 : 0);
  if (strided) vpad.back() = 8;
  Padded vp = padded(vshape, dtype, vpad);
  Padded sp = padded(sshape, DType::kF32, spad);
  fill_bytes(vp.storage, kPoison);
  fill_bytes(sp.storage, kPoison);
  std::uniform_real_distribution<float> val(-2.f, 2.f), lse(-12.f, 12.f), unit(0.f, 1.f);
  const std::int64_t rows = sp.view.numel();
  const std::size_t es = dtype_size(dtype);
  // Walk rows in the order of the dims (lead..., H) through element_ptr.
  std::vector<std::int64_t> idx(sshape.size(), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool empty = unit(rng) < empty_frac;
    *static_cast<float*>(sp.view.element_ptr(idx)) = empty ? kNegInf : lse(rng);
    std::vector<std::int64_t> vidx = idx;
    vidx.push_back(0);
    char* row = static_cast<char*>(vp.view.element_ptr(vidx));
    for (std::int64_t d = 0; d < D; ++d)
      store_float(row + d * std::int64_t(es), dtype, empty ? NAN : val(rng));
    for (int k = int(idx.size()) - 1; k >= 0; --k) {
      if (++idx[std::size_t(k)] < sshape[std::size_t(k)]) break;
      idx[std::size_t(k)] = 0;
    }
  }
  State st{Mirror(std::move(vp.storage)), vp.view, Mirror(std::move(sp.storage)), sp.view};
  return st;
}

struct MergeCase {
  DType dtype;
  std::int64_t n, H, D;
  bool strided;
};

void PrintTo(const MergeCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " n " << c.n << " H " << c.H << " D " << c.D << (c.strided ? " strided" : "");
}

class CudaMergeState : public ::testing::TestWithParam<MergeCase> {};

TEST_P(CudaMergeState, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  const MergeCase c = GetParam();
  Rng rng(0x3E + c.n * 7 + c.D);
  State a = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0.15, rng);
  State b = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0.15, rng);
  State o = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0, rng);
  o.v.poison();
  o.s.poison();
  merge_state(a.v_view, a.s_view, b.v_view, b.s_view, o.v_view, o.s_view);
  merge_state(a.v.on_dev(a.v_view), a.s.on_dev(a.s_view), b.v.on_dev(b.v_view), b.s.on_dev(b.s_view),
              o.v.on_dev(o.v_view), o.s.on_dev(o.s_view));
  EXPECT_TRUE(close_floats(o.v.host, o.v.download(), 1e-6, rel_tol(c.dtype)));
  EXPECT_TRUE(close_floats(o.s.host, o.s.download(), 1e-5, 1e-6));
}

TEST_P(CudaMergeState, InPlaceWithAndWithoutMask) {
  KVINFER_SKIP_WITHOUT_GPU();
  const MergeCase c = GetParam();
  Rng rng(0x3F + c.n * 7 + c.D);
  for (const bool use_mask : {false, true}) {
    State a = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0.15, rng);
    State b = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0.15, rng);
    Mirror mask(random_bools(c.n, rng, 0.6));
    const TensorView mh = use_mask ? mask.host.view() : TensorView();
    const TensorView md = use_mask ? mask.dev.view() : TensorView();
    merge_state_in_place(a.v_view, a.s_view, b.v_view, b.s_view, mh);
    merge_state_in_place(a.v.on_dev(a.v_view), a.s.on_dev(a.s_view), b.v.on_dev(b.v_view),
                         b.s.on_dev(b.s_view), md);
    EXPECT_TRUE(close_floats(a.v.host, a.v.download(), 1e-6, rel_tol(c.dtype))) << "mask " << use_mask;
    EXPECT_TRUE(close_floats(a.s.host, a.s.download(), 1e-5, 1e-6)) << "mask " << use_mask;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaMergeState,
    ::testing::Values(MergeCase{DType::kBF16, 37, 8, 128, false}, MergeCase{DType::kF16, 300, 4, 64, false},
                      MergeCase{DType::kF32, 50, 32, 256, false}, MergeCase{DType::kBF16, 41, 5, 128, true},
                      MergeCase{DType::kF16, 17, 3, 40, true},  // 80-byte rows: scalar path
                      MergeCase{DType::kF32, 9, 2, 1, false}, MergeCase{DType::kBF16, 0, 4, 128, false},
                      MergeCase{DType::kF16, 2000, 32, 128, false}),
    [](const auto& info) {
      const MergeCase& c = info.param;
      return std::string(dtype_name(c.dtype)) + "_n" + std::to_string(c.n) + "_h" + std::to_string(c.H) +
             "_d" + std::to_string(c.D) + (c.strided ? "_strided" : "");
    });

TEST(CudaMergeState, TwoEmptyStatesGiveZeroAndNegInf) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(9);
  State a = random_state({4}, 2, 128, DType::kBF16, false, 1.0, rng);
  State b = random_state({4}, 2, 128, DType::kBF16, false, 1.0, rng);
  State o = random_state({4}, 2, 128, DType::kBF16, false, 0, rng);
  o.v.poison();
  o.s.poison();
  merge_state(a.v.dev, a.s.dev, b.v.dev, b.s.dev, o.v.dev, o.s.dev);
  const Tensor v = o.v.download(), s = o.s.download();
  for (std::int64_t i = 0; i < v.numel(); ++i)
    ASSERT_EQ(bf16_to_f32(v.data_as<std::uint16_t>()[i]), 0.f) << i;
  for (std::int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(s.data_as<float>()[i], kNegInf) << i;
}

struct StatesCase {
  DType dtype;
  std::int64_t n, K, H, D;
  bool strided;
};

void PrintTo(const StatesCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " n " << c.n << " K " << c.K << " H " << c.H << " D " << c.D
      << (c.strided ? " strided" : "");
}

class CudaMergeStates : public ::testing::TestWithParam<StatesCase> {};

TEST_P(CudaMergeStates, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  const StatesCase c = GetParam();
  Rng rng(0x51 + c.K * 13 + c.D);
  State in = random_state({c.n, c.K}, c.H, c.D, c.dtype, c.strided, 0.3, rng);
  State o = random_state({c.n}, c.H, c.D, c.dtype, c.strided, 0, rng);
  o.v.poison();
  o.s.poison();
  merge_states(in.v_view, in.s_view, o.v_view, o.s_view);
  merge_states(in.v.on_dev(in.v_view), in.s.on_dev(in.s_view), o.v.on_dev(o.v_view), o.s.on_dev(o.s_view));
  EXPECT_TRUE(close_floats(o.v.host, o.v.download(), 1e-6, rel_tol(c.dtype)));
  EXPECT_TRUE(close_floats(o.s.host, o.s.download(), 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaMergeStates,
                         ::testing::Values(StatesCase{DType::kBF16, 33, 1, 8, 128, false},
                                           StatesCase{DType::kF16, 20, 3, 4, 64, true},
                                           StatesCase{DType::kF32, 12, 8, 2, 256, false},
                                           StatesCase{DType::kBF16, 7, 5, 3, 40, true},
                                           StatesCase{DType::kF16, 0, 2, 4, 128, false},
                                           StatesCase{DType::kBF16, 500, 4, 32, 128, false}),
                         [](const auto& info) {
                           const StatesCase& c = info.param;
                           return std::string(dtype_name(c.dtype)) + "_n" + std::to_string(c.n) + "_k" +
                                  std::to_string(c.K) + "_h" + std::to_string(c.H) + "_d" +
                                  std::to_string(c.D) + (c.strided ? "_strided" : "");
                         });

}  // namespace
}  // namespace kvinfer::testing
