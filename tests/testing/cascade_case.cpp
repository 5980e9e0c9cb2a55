// SPDX-License-Identifier: Apache-2.0
#include "testing/cascade_case.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kvinfer/core/float_convert.hpp"
#include "oracle/oracle.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kHq = 8, kHk = 2, kD = 64, kPage = 16, kPages = 512;

// A page pool and the dense values of every page slot written so far.
struct Pool {
  Tensor cache = Tensor::zeros({kPages, 2, kPage, kHk, kD}, DType::kF16);
  std::vector<std::int32_t> free_pages;
  Rng rng;
  explicit Pool(std::uint64_t seed) : rng(seed) {
    free_pages.resize(kPages);
    std::iota(free_pages.begin(), free_pages.end(), 0);
    std::shuffle(free_pages.begin(), free_pages.end(), rng);
  }
  // Pages for a segment of `len` tokens, filled with random values.
  std::vector<std::int32_t> segment(std::int32_t len) {
    std::vector<std::int32_t> pages;
    std::normal_distribution<float> nd;
    for (std::int32_t t = 0; t < len; t += kPage) {
      pages.push_back(free_pages.back());
      free_pages.pop_back();
    }
    auto* p = cache.data_as<std::uint16_t>();
    for (std::int32_t t = 0; t < len; ++t)
      for (int kv = 0; kv < 2; ++kv)
        for (std::int64_t h = 0; h < kHk; ++h)
          for (std::int64_t d = 0; d < kD; ++d) {
            const std::int64_t page = pages[std::size_t(t / kPage)];
            p[(((page * 2 + kv) * kPage + t % kPage) * kHk + h) * kD + d] = f32_to_f16(nd(rng));
          }
    return pages;
  }
  double value(std::int32_t page, std::int32_t slot, int kv, std::int64_t h, std::int64_t d) const {
    return f16_to_f32(cache.data_as<std::uint16_t>()[(((std::int64_t(page) * 2 + kv) * kPage + slot) * kHk + h) * kD + d]);
  }
};

struct Built {
  std::vector<Tensor> qo_indptr, indptr, indices, last;
  std::vector<std::vector<std::vector<std::int32_t>>> pages;  // [level][subtree] pages
};

}  // namespace

void run_cascade_case(const std::vector<LevelSpec>& levels, const std::vector<std::int32_t>& qo_lens,
                      AttentionOptions options, std::uint64_t seed, MultiLevelCascadeAttention* wrapper, Device device,
                      const RunExecutor& execute) {
  Pool pool(seed);
  const int batch = int(qo_lens.size());
  std::vector<std::int32_t> qo_indptr(1, 0);
  for (auto q : qo_lens) qo_indptr.push_back(qo_indptr.back() + q);
  const std::int64_t nnz_q = qo_indptr.back();

  Built b;
  CascadePlanArgs args{.num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage,
                       .options = options, .q_dtype = DType::kF16, .kv_dtype = DType::kF16, .o_dtype = DType::kF16};
  for (const LevelSpec& lv : levels) {
    std::vector<std::int32_t> qi{0}, ip{0}, ids, last;
    b.pages.emplace_back();
    for (std::size_t s = 0; s < lv.lens.size(); ++s) {
      const int r_end = s + 1 < lv.lens.size() ? lv.first_request[s + 1] : batch;
      qi.push_back(qo_indptr[std::size_t(r_end)]);
      const auto pages = pool.segment(lv.lens[s]);
      b.pages.back().push_back(pages);
      ids.insert(ids.end(), pages.begin(), pages.end());
      ip.push_back(ip.back() + std::int32_t(pages.size()));
      last.push_back(pages.empty() ? 0 : lv.lens[s] - (std::int32_t(pages.size()) - 1) * std::int32_t(kPage));
    }
    b.qo_indptr.push_back(int32_tensor(qi));
    b.indptr.push_back(int32_tensor(ip));
    b.indices.push_back(device.is_cpu() ? int32_tensor(ids) : int32_tensor(ids).to(device));
    b.last.push_back(int32_tensor(last));
    args.levels.push_back({b.qo_indptr.back(), {b.indptr.back(), b.indices.back(), b.last.back()}});
  }

  Tensor q = Tensor::empty({nnz_q, kHq, kD}, DType::kF16);
  std::normal_distribution<float> nd;
  for (std::int64_t i = 0; i < q.numel(); ++i) q.data_as<std::uint16_t>()[i] = f32_to_f16(nd(pool.rng));
  Tensor out = Tensor::empty({nnz_q, kHq, kD}, DType::kF16), lse = Tensor::empty({nnz_q, kHq}, DType::kF32);
  fill_bytes(out, 0xFF);
  fill_bytes(lse, 0xFF);

  MultiLevelCascadeAttention fresh(int(levels.size()), device);
  MultiLevelCascadeAttention& w = wrapper ? *wrapper : fresh;
  w.plan(args);
  if (device.is_cpu()) {
    w.run(q, PagedKVCache::combined(pool.cache), out, {.lse = lse});
  } else {
    // Poisoned outputs on the device, then the results back on the host.
    const Tensor cache_dev = pool.cache.to(device), q_dev = q.to(device);
    Tensor out_dev = out.to(device), lse_dev = lse.to(device);
    const auto run = [&](Stream stream) {
      w.run(q_dev, PagedKVCache::combined(cache_dev), out_dev, {.lse = lse_dev, .stream = stream});
    };
    if (execute) execute(run);
    else run(nullptr);
    out = out_dev.to(Device::cpu());
    lse = lse_dev.to(Device::cpu());
  }

  double max_err = 0, max_lse_err = 0;
  for (int r = 0; r < batch; ++r) {
    // The request's KV: its subtree's segment at every level, in level order.
    std::vector<double> k, v;
    std::int64_t kv_len = 0;
    for (std::size_t l = 0; l < levels.size(); ++l) {
      const LevelSpec& lv = levels[l];
      std::size_t s = 0;
      while (s + 1 < lv.first_request.size() && lv.first_request[s + 1] <= r) ++s;
      const auto& pages = b.pages[l][s];
      for (std::int32_t t = 0; t < lv.lens[s]; ++t, ++kv_len)
        for (std::int64_t h = 0; h < kHk; ++h)
          for (std::int64_t d = 0; d < kD; ++d) {
            k.push_back(pool.value(pages[std::size_t(t / kPage)], t % kPage, 0, h, d));
            v.push_back(pool.value(pages[std::size_t(t / kPage)], t % kPage, 1, h, d));
          }
    }
    std::vector<double> qd;
    for (std::int64_t i = qo_indptr[r] * kHq * kD; i < qo_indptr[r + 1] * kHq * kD; ++i)
      qd.push_back(f16_to_f32(q.data_as<std::uint16_t>()[i]));
    const oracle::AttentionSpec spec = oracle::spec_from_options(options, qo_lens[r], kv_len, kHq, kHk, kD, kD);
    const oracle::AttentionResult ref = oracle::attention(spec, qd, k, v);
    for (std::int64_t i = 0; i < qo_lens[r] * kHq; ++i) {
      const double got_lse = lse.data_as<float>()[qo_indptr[r] * kHq + i];
      ASSERT_EQ(std::isinf(got_lse), std::isinf(ref.lse[i])) << "request " << r;
      if (!std::isinf(got_lse)) max_lse_err = std::max(max_lse_err, std::abs(got_lse - ref.lse[i]));
      for (std::int64_t d = 0; d < kD; ++d) {
        const double got = f16_to_f32(out.data_as<std::uint16_t>()[(qo_indptr[r] * kHq + i) * kD + d]);
        ASSERT_FALSE(std::isnan(got));
        max_err = std::max(max_err, std::abs(got - ref.o[i * kD + d]));
      }
    }
  }
  // fp16 outputs rounded once per level before the merge: a few half-ulps of |o| <= 4.
  EXPECT_LT(max_err, 4e-3);
  EXPECT_LT(max_lse_err, 1e-4);
}


}  // namespace kvinfer::testing
