// SPDX-License-Identifier: Apache-2.0
// Checks the float64 oracle against cases worked out by hand (closed forms in the
// test), so that the oracle can be trusted as the reference for every backend.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "oracle/oracle.hpp"

namespace kvinfer::oracle {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kLn2 = std::log(2.0);
constexpr double kTol = 1e-12;

using Mask = std::vector<std::uint8_t>;

// A spec with one head and the given lengths; sm_scale 1 so scores are plain dot products.
AttentionSpec one_head(std::int64_t qo_len, std::int64_t kv_len, std::int64_t dim_qk,
                       std::int64_t dim_vo) {
  return {.qo_len = qo_len, .kv_len = kv_len, .head_dim_qk = dim_qk, .head_dim_vo = dim_vo, .sm_scale = 1.0};
}

std::vector<double> random_vec(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<double> dist;
  std::vector<double> x(n);
  for (double& v : x) v = dist(rng);
  return x;
}

TEST(Oracle, SingleKeyGivesItsValue) {
  AttentionSpec spec = one_head(1, 1, 4, 3);
  spec.sm_scale = 0.5;
  const std::vector<double> q = {1, 2, 3, 4}, k = {0.5, -1, 0, 2}, v = {7, -8, 9};
  const AttentionResult r = attention(spec, q, k, v);
  ASSERT_EQ(r.o.size(), 3u);
  EXPECT_EQ(r.o, v);
  // s = (0.5 - 2 + 0 + 8) * 0.5 = 3.25; lse = log2(e^3.25) = 3.25 / ln 2.
  EXPECT_NEAR(r.lse[0], 3.25 / kLn2, kTol);
}

TEST(Oracle, DefaultScaleIsInverseSqrtHeadDim) {
  AttentionSpec spec = one_head(1, 1, 4, 1);
  spec.sm_scale.reset();
  const AttentionResult r = attention(spec, std::vector<double>{1, 1, 1, 1},
                                      std::vector<double>{1, 1, 1, 1}, std::vector<double>{5});
  // s = 4 / sqrt(4) = 2.
  EXPECT_NEAR(r.lse[0], 2.0 / kLn2, kTol);
}

TEST(Oracle, TwoKeysWithKnownScores) {
  // Scores 0 and ln 3: probabilities 1/4 and 3/4.
  const AttentionSpec spec = one_head(1, 2, 1, 1);
  const AttentionResult r =
      attention(spec, std::vector<double>{1}, std::vector<double>{0, std::log(3.0)},
                std::vector<double>{4, 8});
  EXPECT_NEAR(r.o[0], 4 * 0.25 + 8 * 0.75, kTol);
  EXPECT_NEAR(r.lse[0], 2.0, kTol);  // log2(1 + 3)
}

// q = 0 makes every score 0, so a row's output is the mean of the values it sees
// and its LSE is log2(number of visible keys).
struct Uniform {
  std::vector<double> q, k, v;
};
Uniform uniform_inputs(const AttentionSpec& s) {
  Uniform u;
  u.q.assign(std::size_t(s.qo_len * s.num_qo_heads * s.head_dim_qk), 0.0);
  u.k.assign(std::size_t(s.kv_len * s.num_kv_heads * s.head_dim_qk), 1.0);
  for (std::int64_t j = 0; j < s.kv_len; ++j)
    for (std::int64_t h = 0; h < s.num_kv_heads * s.head_dim_vo; ++h) u.v.push_back(double(j));
  return u;
}

TEST(Oracle, CausalSquareIsLowerTriangle) {
  AttentionSpec spec = one_head(3, 3, 2, 1);
  spec.mask_mode = MaskMode::kCausal;
  EXPECT_EQ(visibility(spec), (Mask{1, 0, 0,  //
                                    1, 1, 0,  //
                                    1, 1, 1}));
  const Uniform u = uniform_inputs(spec);
  const AttentionResult r = attention(spec, u.q, u.k, u.v);
  EXPECT_NEAR(r.o[0], 0.0, kTol);
  EXPECT_NEAR(r.o[1], 0.5, kTol);
  EXPECT_NEAR(r.o[2], 1.0, kTol);
  EXPECT_NEAR(r.lse[0], 0.0, kTol);
  EXPECT_NEAR(r.lse[1], 1.0, kTol);
  EXPECT_NEAR(r.lse[2], std::log2(3.0), kTol);
}

TEST(Oracle, CausalIsBottomRightAligned) {
  AttentionSpec spec = one_head(2, 4, 2, 1);
  spec.mask_mode = MaskMode::kCausal;
  // Row i sees j <= i + 2.
  EXPECT_EQ(visibility(spec), (Mask{1, 1, 1, 0,  //
                                    1, 1, 1, 1}));
  const Uniform u = uniform_inputs(spec);
  const AttentionResult r = attention(spec, u.q, u.k, u.v);
  EXPECT_NEAR(r.o[0], 1.0, kTol);  // mean of 0, 1, 2
  EXPECT_NEAR(r.o[1], 1.5, kTol);
  EXPECT_NEAR(r.lse[0], std::log2(3.0), kTol);
  EXPECT_NEAR(r.lse[1], 2.0, kTol);
}

TEST(Oracle, MoreQueriesThanKeysGivesFullyMaskedRows) {
  AttentionSpec spec = one_head(4, 2, 2, 3);
  spec.mask_mode = MaskMode::kCausal;
  // Row i sees j <= i - 2: rows 0 and 1 see nothing.
  EXPECT_EQ(visibility(spec), (Mask{0, 0,  //
                                    0, 0,  //
                                    1, 0,  //
                                    1, 1}));
  Uniform u = uniform_inputs(spec);
  u.q.assign(u.q.size(), 1e3);  // large scores must not create NaN anywhere
  const AttentionResult r = attention(spec, u.q, u.k, u.v);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.lse[i], -kInf);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(r.o[i * 3 + d], 0.0);
  }
  for (double x : r.o) EXPECT_FALSE(std::isnan(x));
  EXPECT_NEAR(r.o[2 * 3], 0.0, kTol);
  EXPECT_NEAR(r.lse[2], 2e3 / kLn2, 1e-9);  // one key with score q·k = 2000
}

TEST(Oracle, EmptyRequestHasNoVisibleKey) {
  const AttentionSpec spec = one_head(2, 0, 2, 2);
  const AttentionResult r =
      attention(spec, std::vector<double>{1, 2, 3, 4}, std::vector<double>{}, std::vector<double>{});
  EXPECT_EQ(r.o, (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(r.lse, (std::vector<double>{-kInf, -kInf}));
}

TEST(Oracle, WindowTruthTable) {
  AttentionSpec spec = one_head(5, 5, 2, 1);
  spec.mask_mode = MaskMode::kCausal;
  spec.window_left = 1;  // w + 1 = 2 keys incl. the diagonal
  EXPECT_EQ(visibility(spec), (Mask{1, 0, 0, 0, 0,  //
                                    1, 1, 0, 0, 0,  //
                                    0, 1, 1, 0, 0,  //
                                    0, 0, 1, 1, 0,  //
                                    0, 0, 0, 1, 1}));
  spec.window_left = 0;  // only the diagonal
  EXPECT_EQ(visibility(spec), (Mask{1, 0, 0, 0, 0,  //
                                    0, 1, 0, 0, 0,  //
                                    0, 0, 1, 0, 0,  //
                                    0, 0, 0, 1, 0,  //
                                    0, 0, 0, 0, 1}));

  // Without causal the window still cuts on the left, aligned bottom-right:
  // qo 2, kv 5, i_pos = i + 3, keep j >= i_pos - 2.
  AttentionSpec none = one_head(2, 5, 2, 1);
  none.window_left = 2;
  EXPECT_EQ(visibility(none), (Mask{0, 1, 1, 1, 1,  //
                                    0, 0, 1, 1, 1}));

  // Decode: the one query sits at kv_len - 1 and sees the last w + 1 keys.
  AttentionSpec decode = one_head(1, 6, 2, 1);
  decode.window_left = 2;
  EXPECT_EQ(visibility(decode), (Mask{0, 0, 0, 1, 1, 1}));
  const Uniform u = uniform_inputs(decode);
  const AttentionResult r = attention(decode, u.q, u.k, u.v);
  EXPECT_NEAR(r.o[0], 4.0, kTol);  // mean of 3, 4, 5
  EXPECT_NEAR(r.lse[0], std::log2(3.0), kTol);
}

TEST(Oracle, CustomMaskAndWindowTogether) {
  AttentionSpec spec = one_head(2, 3, 2, 1);
  spec.mask_mode = MaskMode::kCustom;
  spec.custom_mask = {1, 0, 1,  //
                      0, 1, 1};
  EXPECT_EQ(visibility(spec), spec.custom_mask);
  const Uniform u = uniform_inputs(spec);
  const AttentionResult r = attention(spec, u.q, u.k, u.v);
  EXPECT_NEAR(r.o[0], 1.0, kTol);  // mean of 0 and 2
  EXPECT_NEAR(r.o[1], 1.5, kTol);  // mean of 1 and 2
  EXPECT_NEAR(r.lse[0], 1.0, kTol);

  // Window 0 without causal keeps j >= i_pos = i + 1 (it cuts on the left only):
  // row 0 keeps {1, 2} of its {0, 2}, row 1 keeps {2} of its {1, 2}.
  spec.window_left = 0;
  EXPECT_EQ(visibility(spec), (Mask{0, 0, 1,  //
                                    0, 0, 1}));

  // A custom mask with another mode is a caller error.
  AttentionSpec bad = one_head(1, 1, 2, 1);
  bad.custom_mask = {1};
  EXPECT_THROW(visibility(bad), std::invalid_argument);
}

TEST(Oracle, SoftCap) {
  AttentionSpec spec = one_head(1, 2, 1, 1);
  spec.logits_soft_cap = 5.0;
  // Raw scores 0 and 10; capped 0 and 5 tanh(2).
  const AttentionResult r = attention(spec, std::vector<double>{1}, std::vector<double>{0, 10},
                                      std::vector<double>{2, 6});
  const double c = 5.0 * std::tanh(2.0);
  const double p1 = std::exp(c) / (1.0 + std::exp(c));
  EXPECT_NEAR(r.o[0], 2 * (1 - p1) + 6 * p1, kTol);
  EXPECT_NEAR(r.lse[0], std::log(1.0 + std::exp(c)) / kLn2, kTol);

  // The cap applies after sm_scale: q·k = 10, scale 0.5 -> 5 -> 5 tanh(1).
  spec.sm_scale = 0.5;
  const AttentionResult r2 = attention(spec, std::vector<double>{1}, std::vector<double>{10, 10},
                                       std::vector<double>{1, 1});
  EXPECT_NEAR(r2.lse[0], (5.0 * std::tanh(1.0) + std::log(2.0)) / kLn2, kTol);
}

TEST(Oracle, RopeRotatesPairsByPositionTimesFrequency) {
  // D = 4, theta = 100: pair (0, 2) turns at frequency 1, pair (1, 3) at 100^(-1/2) = 0.1.
  std::vector<double> x = {1, 2, 3, 4};
  apply_rope(x, 3.0, 1.0, 100.0);
  EXPECT_NEAR(x[0], 1 * std::cos(3.0) - 3 * std::sin(3.0), kTol);
  EXPECT_NEAR(x[2], 3 * std::cos(3.0) + 1 * std::sin(3.0), kTol);
  EXPECT_NEAR(x[1], 2 * std::cos(0.3) - 4 * std::sin(0.3), kTol);
  EXPECT_NEAR(x[3], 4 * std::cos(0.3) + 2 * std::sin(0.3), kTol);
  // rope_scale divides every frequency.
  std::vector<double> y = {1, 0};
  apply_rope(y, 3.0, 2.0, 1e4);
  EXPECT_NEAR(y[0], std::cos(1.5), kTol);
  EXPECT_NEAR(y[1], std::sin(1.5), kTol);
}

TEST(Oracle, RopeInAttentionUsesQueryAndKeyPositions) {
  // D = 2: the one pair turns at frequency theta^0 = 1. q = k = (1, 0), so the
  // score of key j is cos(i_pos - j_pos).
  AttentionSpec spec = one_head(1, 3, 2, 1);
  spec.pos_encoding = PosEncoding::kRopeLlama;
  const std::vector<double> q = {1, 0}, k = {1, 0, 1, 0, 1, 0}, v = {1, 2, 3};
  const auto expect_scores = [&](const AttentionResult& r, double s0, double s1, double s2) {
    const double e0 = std::exp(s0), e1 = std::exp(s1), e2 = std::exp(s2);
    EXPECT_NEAR(r.o[0], (1 * e0 + 2 * e1 + 3 * e2) / (e0 + e1 + e2), kTol);
    EXPECT_NEAR(r.lse[0], std::log(e0 + e1 + e2) / kLn2, kTol);
  };
  // The query sits at i_pos = 2.
  expect_scores(attention(spec, q, k, v), std::cos(2.0), std::cos(1.0), 1.0);
  // Offsets move the query to 2 + 5 and the keys to j + 1.
  spec.q_pos_offset = 5;
  spec.kv_pos_offset = 1;
  expect_scores(attention(spec, q, k, v), std::cos(6.0), std::cos(5.0), std::cos(4.0));
}

TEST(Oracle, Alibi) {
  AttentionSpec spec = one_head(1, 2, 1, 1);
  spec.pos_encoding = PosEncoding::kAlibi;
  spec.alibi_slopes = {0.5};
  // q = 0: raw scores 0; i_pos = 1, so s_j = 0.5 (j - 1) = -0.5, 0.
  const std::vector<double> q = {0}, k = {1, 1}, v = {3, 7};
  const AttentionResult r = attention(spec, q, k, v);
  const double e0 = std::exp(-0.5);
  EXPECT_NEAR(r.o[0], (3 * e0 + 7) / (e0 + 1), kTol);
  EXPECT_NEAR(r.lse[0], std::log(e0 + 1) / kLn2, kTol);

  // Moving the query by c adds -0.5 c to every score of the row: o is unchanged,
  // the LSE drops by 0.5 c / ln 2.
  spec.q_pos_offset = 4;
  const AttentionResult shifted = attention(spec, q, k, v);
  EXPECT_NEAR(shifted.o[0], (3 * e0 + 7) / (e0 + 1), kTol);
  EXPECT_NEAR(shifted.lse[0], (std::log(e0 + 1) - 2.0) / kLn2, kTol);

  // Default slopes for 2 heads: 2^-4 and 2^-8.
  AttentionSpec two = one_head(1, 2, 1, 1);
  two.num_qo_heads = 2;
  two.pos_encoding = PosEncoding::kAlibi;
  const AttentionResult rd = attention(two, std::vector<double>{0, 0}, k, v);
  for (int h = 0; h < 2; ++h) {
    const double e = std::exp(-std::exp2(h == 0 ? -4.0 : -8.0));
    EXPECT_NEAR(rd.o[h], (3 * e + 7) / (e + 1), kTol) << "head " << h;
  }
}

TEST(Oracle, GqaHeadMapping) {
  // 4 query heads over 2 KV heads: heads 0, 1 use KV head 0; heads 2, 3 use KV head 1.
  AttentionSpec spec = one_head(1, 2, 1, 1);
  spec.num_qo_heads = 4;
  spec.num_kv_heads = 2;
  // Key layout [kv_len, Hk, D]. KV head 0 scores: 0, ln 3; KV head 1 scores: ln 3, 0.
  const std::vector<double> k = {0, std::log(3.0),  //
                                 std::log(3.0), 0};
  const std::vector<double> v = {10, 20,  //
                                 30, 40};
  const AttentionResult r = attention(spec, std::vector<double>{1, 1, 1, 1}, k, v);
  EXPECT_NEAR(r.o[0], 0.25 * 10 + 0.75 * 30, kTol);
  EXPECT_NEAR(r.o[1], 0.25 * 10 + 0.75 * 30, kTol);
  EXPECT_NEAR(r.o[2], 0.75 * 20 + 0.25 * 40, kTol);
  EXPECT_NEAR(r.o[3], 0.75 * 20 + 0.25 * 40, kTol);
  for (double lse : r.lse) EXPECT_NEAR(lse, 2.0, kTol);

  spec.num_kv_heads = 3;
  EXPECT_THROW(attention(spec, std::vector<double>(4), std::vector<double>(6), std::vector<double>(6)),
               std::invalid_argument);
}

TEST(Oracle, HeadDimQkMayDifferFromVo) {
  AttentionSpec spec = one_head(1, 1, 3, 2);
  const AttentionResult r = attention(spec, std::vector<double>{1, 1, 1},
                                      std::vector<double>{1, 2, 3}, std::vector<double>{4, 5});
  EXPECT_EQ(r.o, (std::vector<double>{4, 5}));
  EXPECT_NEAR(r.lse[0], 6.0 / kLn2, kTol);
}

TEST(Oracle, MlaTinyCase) {
  MLASpec spec{.qo_len = 1, .kv_len = 2, .num_heads = 1, .head_dim_ckv = 2, .head_dim_kpe = 1,
               .causal = false, .sm_scale = 1.0};
  // Scores: q_nope·ckv + q_pe·kpe = 1 + 0 and 0 + (1 + ln 3): weights 1/4, 3/4 (common factor e).
  const std::vector<double> q_nope = {1, 0}, q_pe = {1};
  const std::vector<double> ckv = {1, 2, 0, 3}, kpe = {0, 1 + std::log(3.0)};
  const AttentionResult r = mla_attention(spec, q_nope, q_pe, ckv, kpe);
  EXPECT_NEAR(r.o[0], 0.25, kTol);
  EXPECT_NEAR(r.o[1], 0.25 * 2 + 0.75 * 3, kTol);
  EXPECT_NEAR(r.lse[0], 1.0 / kLn2 + 2.0, kTol);  // log2(4 e)

  // Causal, qo = kv = 2: row 0 sees only key 0 (o = ckv_0), row 1 both.
  spec.qo_len = 2;
  spec.causal = true;
  spec.sm_scale = 0.5;
  const AttentionResult c = mla_attention(spec, std::vector<double>{1, 0, 1, 0},
                                          std::vector<double>{1, 1}, ckv, kpe);
  EXPECT_NEAR(c.o[0], 1.0, kTol);
  EXPECT_NEAR(c.o[1], 2.0, kTol);
  EXPECT_NEAR(c.lse[0], 0.5 / kLn2, kTol);
  const double e0 = std::exp(0.5), e1 = std::exp(0.5 * (1 + std::log(3.0)));
  EXPECT_NEAR(c.o[3], (2 * e0 + 3 * e1) / (e0 + e1), kTol);

  // Without the rotary part.
  MLASpec nope{.qo_len = 1, .kv_len = 1, .num_heads = 1, .head_dim_ckv = 2, .head_dim_kpe = 0,
               .sm_scale = 1.0};
  const AttentionResult n = mla_attention(nope, std::vector<double>{1, 1}, std::vector<double>{},
                                          std::vector<double>{2, 3}, std::vector<double>{});
  EXPECT_EQ(n.o, (std::vector<double>{2, 3}));
  EXPECT_NEAR(n.lse[0], 5.0 / kLn2, kTol);
}

TEST(Oracle, MergeOfTwoHandStates) {
  // State a: one key with score 0 and value (4, 0); state b: one key with score
  // ln 3 and value (8, 4). Union: weights 1/4, 3/4, LSE log2(4) = 2.
  const AttentionResult m = merge_state(std::vector<double>{4, 0}, std::vector<double>{0.0},
                                        std::vector<double>{8, 4}, std::vector<double>{std::log2(3.0)});
  EXPECT_NEAR(m.o[0], 7.0, kTol);
  EXPECT_NEAR(m.o[1], 3.0, kTol);
  EXPECT_NEAR(m.lse[0], 2.0, kTol);
}

TEST(Oracle, MergeWithEmptyStates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // An empty state contributes nothing, whatever its o holds.
  const AttentionResult one = merge_state(std::vector<double>{nan, kInf}, std::vector<double>{-kInf},
                                          std::vector<double>{1.5, -2}, std::vector<double>{0.75});
  EXPECT_EQ(one.o, (std::vector<double>{1.5, -2}));
  EXPECT_EQ(one.lse[0], 0.75);
  // Two empty states: o = 0, lse = -inf, no NaN.
  const AttentionResult none = merge_state(std::vector<double>{nan, 1}, std::vector<double>{-kInf},
                                           std::vector<double>{3, nan}, std::vector<double>{-kInf});
  EXPECT_EQ(none.o, (std::vector<double>{0, 0}));
  EXPECT_EQ(none.lse[0], -kInf);
}

TEST(Oracle, MergeOfSplitKeysEqualsAttentionOverUnion) {
  std::mt19937 rng(7);
  AttentionSpec full;
  full.qo_len = 3;
  full.kv_len = 9;
  full.num_qo_heads = 4;
  full.num_kv_heads = 2;
  full.head_dim_qk = 8;
  full.head_dim_vo = 4;
  const auto q = random_vec(3 * 4 * 8, rng);
  const auto k = random_vec(9 * 2 * 8, rng);
  const auto v = random_vec(9 * 2 * 4, rng);
  const AttentionResult whole = attention(full, q, k, v);

  // Keys [0, 4) and [4, 9), no mask: two disjoint key sets.
  std::vector<AttentionResult> parts;
  std::vector<double> kp, vp;
  for (auto [lo, hi] : {std::pair{0, 4}, std::pair{4, 9}}) {
    AttentionSpec part = full;
    part.kv_len = hi - lo;
    kp.assign(k.begin() + lo * 2 * 8, k.begin() + hi * 2 * 8);
    vp.assign(v.begin() + lo * 2 * 4, v.begin() + hi * 2 * 4);
    parts.push_back(attention(part, q, kp, vp));
  }
  const AttentionResult merged = merge_state(parts[0], parts[1]);
  for (std::size_t x = 0; x < whole.o.size(); ++x) EXPECT_NEAR(merged.o[x], whole.o[x], 1e-12);
  for (std::size_t x = 0; x < whole.lse.size(); ++x) EXPECT_NEAR(merged.lse[x], whole.lse[x], 1e-12);
  const AttentionResult via_k = merge_states(parts);
  EXPECT_EQ(via_k.o, merged.o);
}

TEST(Oracle, CascadeLevelsWithOffsetsEqualFullAttention) {
  // Causal + window + RoPE (and separately ALiBi): a level covering keys [lo, hi) of
  // a request with total kv_len T attends with kv_pos_offset = lo and
  // q_pos_offset = T - (hi - lo); the merged levels equal the whole request.
  std::mt19937 rng(11);
  const std::int64_t qo = 4, T = 10, H = 2, D = 4;
  const auto q = random_vec(qo * H * D, rng);
  const auto k = random_vec(T * H * D, rng);
  const auto v = random_vec(T * H * D, rng);
  for (PosEncoding pe : {PosEncoding::kRopeLlama, PosEncoding::kAlibi}) {
    AttentionSpec full;
    full.qo_len = qo;
    full.kv_len = T;
    full.num_qo_heads = full.num_kv_heads = H;
    full.head_dim_qk = full.head_dim_vo = D;
    full.mask_mode = MaskMode::kCausal;
    full.window_left = 5;
    full.pos_encoding = pe;
    full.rope_theta = 50.0;
    const AttentionResult whole = attention(full, q, k, v);
    std::vector<AttentionResult> levels;
    for (auto [lo, hi] : {std::pair<std::int64_t, std::int64_t>{0, 3}, {3, 7}, {7, 10}}) {
      AttentionSpec level = full;
      level.kv_len = hi - lo;
      level.kv_pos_offset = lo;
      level.q_pos_offset = T - (hi - lo);
      levels.push_back(attention(level, q,
                                 std::vector<double>(k.begin() + lo * H * D, k.begin() + hi * H * D),
                                 std::vector<double>(v.begin() + lo * H * D, v.begin() + hi * H * D)));
    }
    const AttentionResult merged = merge_states(levels);
    for (std::size_t x = 0; x < whole.o.size(); ++x) EXPECT_NEAR(merged.o[x], whole.o[x], 1e-12);
    for (std::size_t x = 0; x < whole.lse.size(); ++x) EXPECT_NEAR(merged.lse[x], whole.lse[x], 1e-12);
  }
}

TEST(Oracle, AlibiSlopesReference) {
  const std::vector<double> s8 = alibi_slopes_reference(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(s8[i], 1.0 / double(2 << i), 1e-15);  // 1/2 ... 1/256
  // 12 heads: the 8-head series, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (odd terms of the 16-head series).
  const std::vector<double> s12 = alibi_slopes_reference(12);
  ASSERT_EQ(s12.size(), 12u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(s12[i], s8[i], 1e-15);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(s12[8 + i], std::pow(2.0, -0.5 - i), 1e-15);
  EXPECT_NEAR(alibi_slopes_reference(1)[0], std::pow(2.0, -8.0), 1e-15);
}

}  // namespace
}  // namespace kvinfer::oracle
