// SPDX-License-Identifier: Apache-2.0
// The README's example: paged decode and ragged prefill on the CPU through the
// public API. Built and run as a test, so the README cannot drift from the API.
#include <cstdio>
#include <vector>

#include "kvinfer/kvinfer.hpp"

using namespace kvinfer;

int main() {
  const std::int64_t num_qo_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16;

  // Paged decode: two requests of 40 and 7 tokens in a pool of 8 pages.
  Tensor kv_cache = Tensor::zeros({8, 2, page_size, num_kv_heads, head_dim}, DType::kBF16);  // NHD
  std::vector<std::int32_t> kv_indptr{0, 3, 4}, kv_indices{5, 0, 2, 7}, kv_last_page_len{8, 7};
  const PageTable table{.indptr = TensorView(kv_indptr.data(), DType::kI32, {3}),
                        .indices = TensorView(kv_indices.data(), DType::kI32, {4}),
                        .last_page_len = TensorView(kv_last_page_len.data(), DType::kI32, {2})};
  Tensor q = Tensor::zeros({2, num_qo_heads, head_dim}, DType::kBF16);
  Tensor out = Tensor::empty({2, num_qo_heads, head_dim}, DType::kBF16);
  Tensor lse = Tensor::empty({2, num_qo_heads}, DType::kF32);

  BatchDecodeWithPagedKVCache decode(Device::cpu(), KVLayout::kNHD);
  decode.plan({.page_table = table, .num_qo_heads = num_qo_heads, .num_kv_heads = num_kv_heads,
               .head_dim = head_dim, .page_size = page_size});
  decode.run(q, PagedKVCache::combined(kv_cache), out, {.lse = lse});

  // Ragged prefill with a causal mask: 5 and 3 new tokens over 12 and 3 keys.
  std::vector<std::int32_t> qo_indptr{0, 5, 8}, k_indptr{0, 12, 15};
  Tensor pq = Tensor::zeros({8, num_qo_heads, head_dim}, DType::kBF16);
  Tensor k = Tensor::zeros({15, num_kv_heads, head_dim}, DType::kBF16);
  Tensor v = Tensor::zeros({15, num_kv_heads, head_dim}, DType::kBF16);
  Tensor pout = Tensor::empty({8, num_qo_heads, head_dim}, DType::kBF16);

  BatchPrefillWithRaggedKVCache prefill(Device::cpu());
  prefill.plan({.qo_indptr = TensorView(qo_indptr.data(), DType::kI32, {3}),
                .kv_indptr = TensorView(k_indptr.data(), DType::kI32, {3}),
                .num_qo_heads = num_qo_heads, .num_kv_heads = num_kv_heads, .head_dim_qk = head_dim,
                .options = {.mask_mode = MaskMode::kCausal}});
  prefill.run(pq, k, v, pout);

  // All-zero keys: every visible key has score 0, so LSE = log2(number of keys).
  std::printf("decode lse of request 0: %.4f (log2(40) = 5.3219)\n", lse.data_as<float>()[0]);
  return 0;
}
