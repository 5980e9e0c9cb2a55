// SPDX-License-Identifier: Apache-2.0
// A program outside kvinfer: paged decode on the CPU through the public API, checked
// against attention computed here in double, and a bad input caught as kvinfer::Error
// (thrown inside the library, caught outside it).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;

namespace {

constexpr std::int64_t kHq = 4, kHk = 2, kD = 64, kPage = 4;

// Small multiples of 1/8: exact in bfloat16.
float value(std::int64_t a, std::int64_t b, std::int64_t c) {
  return float((a * 7 + b * 5 + c * 3) % 9 - 4) / 8;
}

}  // namespace

int main() {
  // Two requests of 6 and 3 tokens in a pool of 4 pages (NHD, page 4).
  const std::vector<std::int32_t> kv_len{6, 3};
  std::vector<std::int32_t> indptr{0, 2, 3}, indices{3, 0, 2}, last_page_len{2, 3};
  Tensor cache = Tensor::zeros({4, 2, kPage, kHk, kD}, DType::kBF16);
  Tensor q = Tensor::empty({2, kHq, kD}, DType::kBF16);
  Tensor out = Tensor::empty({2, kHq, kD}, DType::kBF16);
  Tensor lse = Tensor::empty({2, kHq}, DType::kF32);
  auto* c = cache.data_as<std::uint16_t>();
  // Token t of request b at page indices[indptr[b] + t / kPage], slot t % kPage.
  auto kv_at = [&](int b, int t, int kv, std::int64_t h, std::int64_t d) -> std::uint16_t& {
    const std::int64_t page = indices[std::size_t(indptr[std::size_t(b)] + t / kPage)];
    return c[(((page * 2 + kv) * kPage + t % kPage) * kHk + h) * kD + d];
  };
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < kv_len[std::size_t(b)]; ++t)
      for (std::int64_t h = 0; h < kHk; ++h)
        for (std::int64_t d = 0; d < kD; ++d) {
          kv_at(b, t, 0, h, d) = f32_to_bf16(value(b + t, h, d));
          kv_at(b, t, 1, h, d) = f32_to_bf16(value(t, b + h, d + 1));
        }
  for (std::int64_t i = 0; i < 2 * kHq * kD; ++i) q.data_as<std::uint16_t>()[i] = f32_to_bf16(value(i, 1, 2));

  const PageTable table{.indptr = TensorView(indptr.data(), DType::kI32, {3}),
                        .indices = TensorView(indices.data(), DType::kI32, {3}),
                        .last_page_len = TensorView(last_page_len.data(), DType::kI32, {2})};
  BatchDecodeWithPagedKVCache decode(Device::cpu());
  decode.plan(
      {.page_table = table, .num_qo_heads = kHq, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
  decode.run(q, PagedKVCache::combined(cache), out, {.lse = lse});

  double max_err = 0, max_lse_err = 0;
  const double scale = 1 / std::sqrt(double(kD));
  for (int b = 0; b < 2; ++b) {
    for (std::int64_t h = 0; h < kHq; ++h) {
      const std::int64_t hk = h / (kHq / kHk);
      std::vector<double> s(std::size_t(kv_len[std::size_t(b)]));
      double m = -INFINITY, sum = 0;
      for (int t = 0; t < kv_len[std::size_t(b)]; ++t) {
        double dot = 0;
        for (std::int64_t d = 0; d < kD; ++d)
          dot += double(bf16_to_f32(q.data_as<std::uint16_t>()[(b * kHq + h) * kD + d])) *
                 bf16_to_f32(kv_at(b, t, 0, hk, d));
        s[std::size_t(t)] = dot * scale;
        m = std::max(m, s[std::size_t(t)]);
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (std::int64_t d = 0; d < kD; ++d) {
        double o = 0;
        for (int t = 0; t < kv_len[std::size_t(b)]; ++t)
          o += s[std::size_t(t)] / sum * bf16_to_f32(kv_at(b, t, 1, hk, d));
        max_err = std::max(max_err,
                           std::abs(o - bf16_to_f32(out.data_as<std::uint16_t>()[(b * kHq + h) * kD + d])));
      }
      const double want_lse = (m + std::log(sum)) / std::log(2.0);  // base 2
      max_lse_err = std::max(max_lse_err, std::abs(want_lse - lse.data_as<float>()[b * kHq + h]));
    }
  }
  if (!(max_err < 1e-2) || !(max_lse_err < 1e-3)) {
    std::printf("consumer: FAILED: max |out - reference| = %g, max |lse - reference| = %g\n", max_err,
                max_lse_err);
    return 1;
  }

  // 3 query heads over 2 KV heads: not a whole number of groups.
  try {
    BatchDecodeWithPagedKVCache bad(Device::cpu());
    bad.plan(
        {.page_table = table, .num_qo_heads = 3, .num_kv_heads = kHk, .head_dim = kD, .page_size = kPage});
    std::printf("consumer: FAILED: num_qo_heads = 3 over 2 KV heads was accepted\n");
    return 1;
  } catch (const Error& e) {
    if (std::string(e.what()).find("num_qo_heads") == std::string::npos) {
      std::printf("consumer: FAILED: the error does not name num_qo_heads: %s\n", e.what());
      return 1;
    }
  }
  std::printf("consumer: kvinfer %s, decode matches (max error %.2g, lse %.2g), errors caught: ok\n",
              version().c_str(), max_err, max_lse_err);
  return 0;
}
