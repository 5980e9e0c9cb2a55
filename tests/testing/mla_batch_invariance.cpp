// SPDX-License-Identifier: Apache-2.0
#include "testing/mla_batch_invariance.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "testing/mla_case.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

constexpr std::int64_t kPage = 16, kDc = kMlaHeadDimCkv, kDp = kMlaHeadDimKpe;

std::vector<std::uint8_t> host_bytes(const TensorView& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  copy(h, t);
  std::vector<std::uint8_t> v(h.nbytes());
  std::memcpy(v.data(), h.data(), h.nbytes());
  return v;
}

}  // namespace

void expect_mla_batch_invariance(const MLABatchInvariance& c, Device device) {
  Rng rng(c.seed);
  const std::int64_t H = c.num_heads;
  std::vector<std::int32_t> qo{0};
  for (std::int32_t n : c.qo_lens) qo.push_back(qo.back() + n);
  const std::int64_t nnz = qo.back();
  const HostPageTable table = random_page_table(c.kv_lens, kPage, 2, rng);
  const Tensor indices = table.indices.to(device);
  const Tensor cache = random_bf16({table.num_pages, kPage, kDc + kDp}, rng).to(device);
  const Tensor q_nope = random_bf16({nnz, H, kDc}, rng).to(device), q_pe = random_bf16({nnz, H, kDp}, rng).to(device);
  const Tensor qo_indptr = int32_tensor(qo), kv_len = int32_tensor(c.kv_lens);
  const MLACache mla = MLACache::combined(cache);
  const auto plan_and_run = [&](BatchMLAPagedAttention& w, const MLAPlanArgs& args, std::int64_t r0,
                                std::int64_t r1) {
    Tensor out = Tensor::empty({r1 - r0, H, kDc}, DType::kBF16, device);
    Tensor lse = Tensor::empty({r1 - r0, H}, DType::kF32, device);
    w.plan(args);
    w.run(q_nope.view().slice(0, r0, r1), q_pe.view().slice(0, r0, r1), mla, out, {.lse = lse});
    return std::pair{host_bytes(out), host_bytes(lse)};
  };

  BatchMLAPagedAttention w(device);
  MLAPlanArgs args = mla_plan_args(qo_indptr, table.indptr, indices, kv_len, H, kPage, 0.07f, c.causal,
                                   {.fixed_split_size = c.fixed_split_size});
  const auto [out_full, lse_full] = plan_and_run(w, args, 0, nnz);

  const std::size_t b = c.alone;
  const std::vector<std::int32_t> indptr = to_vector_i32(table.indptr);
  const Tensor qo_one = int32_tensor({0, c.qo_lens[b]});
  const Tensor kv_indptr_one = int32_tensor({0, indptr[b + 1] - indptr[b]});
  const Tensor kv_len_one = int32_tensor({c.kv_lens[b]});
  args.qo_indptr = qo_one;
  args.kv_indptr = kv_indptr_one;
  args.kv_indices = indices.view().slice(0, indptr[b], indptr[b + 1]);
  args.kv_len = kv_len_one;
  const auto [out_one, lse_one] = plan_and_run(w, args, qo[b], qo[b + 1]);

  // Request b's rows of the batch's outputs.
  const std::size_t o_row = std::size_t(H * kDc * 2), lse_row = std::size_t(H * 4);
  EXPECT_EQ(out_one, std::vector<std::uint8_t>(out_full.begin() + qo[b] * o_row, out_full.begin() + qo[b + 1] * o_row));
  EXPECT_EQ(lse_one,
            std::vector<std::uint8_t>(lse_full.begin() + qo[b] * lse_row, lse_full.begin() + qo[b + 1] * lse_row));
}

}  // namespace kvinfer::testing
