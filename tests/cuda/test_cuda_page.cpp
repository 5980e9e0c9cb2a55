// SPDX-License-Identifier: Apache-2.0
// The page operations on the GPU against the CPU backend, byte for byte: appends to
// paged KV and MLA caches (layouts, storage forms, dtypes, page sizes, strides,
// empty appends) and the index helpers.
#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.hpp"
#include "core/op_params.hpp"
#include "cuda/gpu_test_util.hpp"
#include "cuda/page/append.hpp"
#include "kvinfer/ops/page.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

struct AppendCase {
  std::string name;
  std::vector<std::int32_t> prefix_lens;  // tokens already in the cache, per request
  std::vector<std::int32_t> append_lens;  // tokens appended, per request
  std::int64_t page_size = 16;
  std::int64_t heads = 8;
  std::int64_t head_dim = 128;
  DType dtype = DType::kBF16;
  KVLayout layout = KVLayout::kNHD;
  bool combined = true;        // one 5-D tensor, else a K/V pair
  bool strided_src = false;    // append_key/value as padded views
  bool strided_cache = false;  // pair form only: padded page tensors
};

std::string case_name(const ::testing::TestParamInfo<AppendCase>& info) {
  return info.param.name;
}
// Test listings (and ctest names) show the case name, not the parameter's bytes.
void PrintTo(const AppendCase& c, std::ostream* os) {
  *os << c.name;
}

// Host arrays of an append: per-request indptr and the extended sequence lengths.
struct AppendIndices {
  Tensor append_indptr, seq_lens;
  std::int64_t nnz = 0;
};
AppendIndices append_indices(const std::vector<std::int32_t>& prefix,
                             const std::vector<std::int32_t>& append) {
  std::vector<std::int32_t> indptr{0}, seq;
  for (std::size_t b = 0; b < append.size(); ++b) {
    indptr.push_back(indptr.back() + append[b]);
    seq.push_back(prefix[b] + append[b]);
  }
  return {int32_tensor(indptr), int32_tensor(seq), indptr.back()};
}

// Device copies of host index arrays, kept alive for as long as the views are used
// (the GPU reads them after the call that launched it has returned).
struct DevicePageTable {
  Tensor indptr, indices, last_page_len;
  explicit DevicePageTable(const HostPageTable& t)
      : indptr(t.indptr.to(Device::cuda(0))),
        indices(t.indices.to(Device::cuda(0))),
        last_page_len(t.last_page_len.to(Device::cuda(0))) {}
  PageTable view() const { return {indptr, indices, last_page_len}; }
};

// The GPU append: the public entry point (default kernel), or one kernel variant
// through the backend directly.
void gpu_append(const TensorView& key, const TensorView& value, const TensorView& bi, const TensorView& pos,
                const PagedKVCache& cache, const PageTable& table, std::optional<cuda::AppendKernel> kernel) {
  if (kernel) {
    cuda::append_paged_kv_cache_with(detail::AppendPagedKVParams{key, value, bi, pos, cache, table, nullptr},
                                     *kernel);
  } else {
    append_paged_kv_cache(key, value, bi, pos, cache, table);
  }
}

void check_append(const AppendCase& c, std::optional<cuda::AppendKernel> kernel) {
  Rng rng(0xA99E + c.page_size * 131 + c.head_dim);
  std::vector<std::int32_t> kv_lens(c.prefix_lens.size());
  for (std::size_t b = 0; b < kv_lens.size(); ++b) kv_lens[b] = c.prefix_lens[b] + c.append_lens[b];
  const HostPageTable table = random_page_table(kv_lens, c.page_size, /*extra_pages=*/3, rng);
  const AppendIndices ai = append_indices(c.prefix_lens, c.append_lens);
  const std::int64_t nnz = ai.nnz, P = table.num_pages, H = c.heads, D = c.head_dim, S = c.page_size;

  // Token indices, on both devices (the GPU ones from the GPU helper, checked too).
  Tensor bi = Tensor::empty({nnz}, DType::kI32), pos = Tensor::empty({nnz}, DType::kI32);
  get_batch_indices_positions(ai.append_indptr, ai.seq_lens, bi, pos);
  Mirror bi_d(Tensor::empty({nnz}, DType::kI32)), pos_d(Tensor::empty({nnz}, DType::kI32));
  bi_d.poison();
  pos_d.poison();
  const Tensor append_indptr_d = ai.append_indptr.to(Device::cuda(0)),
               seq_lens_d = ai.seq_lens.to(Device::cuda(0));
  get_batch_indices_positions(append_indptr_d, seq_lens_d, bi_d.dev, pos_d.dev);
  ASSERT_EQ(to_vector_i32(bi_d.download()), to_vector_i32(bi));
  ASSERT_EQ(to_vector_i32(pos_d.download()), to_vector_i32(pos));

  // Append data, contiguous or padded (every stride but the last larger).
  auto make_src = [&]() {
    if (c.strided_src) {
      Padded p = padded({nnz, H, D}, c.dtype, {1, 2, 8});
      fill_random_bytes(p.storage, rng);
      return std::pair{Mirror(std::move(p.storage)), p.view};
    }
    Tensor t = random_bytes({nnz, H, D}, c.dtype, rng);
    const TensorView v = t.view();
    return std::pair{Mirror(std::move(t)), v};
  };
  auto [key_m, key_v] = make_src();
  auto [val_m, val_v] = make_src();

  const DevicePageTable table_dev(table);
  const PageTable table_d = table_dev.view();
  const bool nhd = c.layout == KVLayout::kNHD;
  if (c.combined) {
    Mirror cache(nhd ? Tensor::empty({P, 2, S, H, D}, c.dtype) : Tensor::empty({P, 2, H, S, D}, c.dtype));
    cache.poison();
    append_paged_kv_cache(key_v, val_v, bi, pos, PagedKVCache::combined(cache.host, c.layout), table.view());
    gpu_append(key_m.on_dev(key_v), val_m.on_dev(val_v), bi_d.dev, pos_d.dev,
               PagedKVCache::combined(cache.dev, c.layout), table_d, kernel);
    EXPECT_TRUE(cache.same_bytes());
  } else {
    const std::vector<std::int64_t> shape =
        nhd ? std::vector<std::int64_t>{P, S, H, D} : std::vector<std::int64_t>{P, H, S, D};
    auto make_cache = [&]() {
      if (c.strided_cache) {
        Padded p = padded(shape, c.dtype, std::vector<std::int64_t>{1, 1, 1, 16});
        return std::pair{Mirror(std::move(p.storage)), p.view};
      }
      Tensor t = Tensor::empty(shape, c.dtype);
      const TensorView v = t.view();
      return std::pair{Mirror(std::move(t)), v};
    };
    auto [k_m, k_v] = make_cache();
    auto [v_m, v_v] = make_cache();
    k_m.poison();
    v_m.poison();
    append_paged_kv_cache(key_v, val_v, bi, pos, PagedKVCache::pair(k_v, v_v, c.layout), table.view());
    gpu_append(key_m.on_dev(key_v), val_m.on_dev(val_v), bi_d.dev, pos_d.dev,
               PagedKVCache::pair(k_m.on_dev(k_v), v_m.on_dev(v_v), c.layout), table_d, kernel);
    EXPECT_TRUE(k_m.same_bytes());
    EXPECT_TRUE(v_m.same_bytes());
  }
}

std::vector<AppendCase> append_cases() {
  const std::vector<std::int32_t> pre8{0, 3, 16, 17, 31, 5, 0, 40}, app8{1, 20, 7, 0, 33, 16, 64, 2};
  std::vector<AppendCase> cs = {
      {"bf16_nhd_combined_p16", pre8, app8},
      {"bf16_hnd_combined_p16", pre8, app8, 16, 8, 128, DType::kBF16, KVLayout::kHND},
      {"f16_nhd_pair_p5", pre8, app8, 5, 4, 64, DType::kF16, KVLayout::kNHD, false},
      {"f32_hnd_pair_p1", pre8, app8, 1, 2, 128, DType::kF32, KVLayout::kHND, false},
      {"e4m3_nhd_combined_p16_d256", pre8, app8, 16, 2, 256, DType::kE4M3},
      {"e5m2_hnd_pair_p5_strided", pre8, app8, 5, 3, 64, DType::kE5M2, KVLayout::kHND, false, true, true},
      {"bf16_nhd_strided_src", pre8, app8, 16, 8, 128, DType::kBF16, KVLayout::kNHD, true, true},
      {"bf16_nhd_pair_strided_cache_p5", pre8, app8, 5, 8, 128, DType::kBF16, KVLayout::kNHD, false, true,
       true},
      // Odd row sizes narrow the vectors to 2 and 1 bytes.
      {"f16_nhd_d5", pre8, app8, 16, 3, 5, DType::kF16},
      {"e4m3_hnd_d7_p5", pre8, app8, 5, 2, 7, DType::kE4M3, KVLayout::kHND},
      // Decode-like: one token per request, many requests.
      {"bf16_decode_b64", std::vector<std::int32_t>(64, 100), std::vector<std::int32_t>(64, 1)},
      // Nothing to append (nnz 0) and no requests at all (batch 0): the cache is untouched.
      {"nnz0", {3, 0, 17}, {0, 0, 0}},
      {"batch0", {}, {}},
      // A prefill-sized single request.
      {"bf16_single_2000", {0}, {2000}, 16, 8, 128},
  };
  return cs;
}

class CudaAppend : public ::testing::TestWithParam<AppendCase> {};

TEST_P(CudaAppend, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_append(GetParam(), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaAppend, ::testing::ValuesIn(append_cases()), case_name);

// Every kernel variant on the cases that allow 16-byte vectors (the others always
// take the narrow register kernel).
class CudaAppendKernels : public ::testing::TestWithParam<std::tuple<AppendCase, cuda::AppendKernel>> {};

TEST_P(CudaAppendKernels, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  check_append(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

std::vector<AppendCase> vector16_cases() {
  std::vector<AppendCase> out;
  for (const AppendCase& c : append_cases()) {
    if (c.name.find("bf16") == 0 || c.name.find("f32") == 0 || c.name.find("e4m3_nhd") == 0) out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaAppendKernels,
                         ::testing::Combine(::testing::ValuesIn(vector16_cases()),
                                            ::testing::ValuesIn(cuda::kAllAppendKernels)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  std::string(cuda::append_kernel_name(std::get<1>(info.param)));
                         });

// MLA: ckv 512 + kpe 64 in one tensor (strided views), as a pair, and without kpe.
using MlaCase = std::tuple<int, std::int64_t, DType>;  // form, page_size, dtype
class CudaAppendMla : public ::testing::TestWithParam<MlaCase> {};

std::string mla_case_name(const ::testing::TestParamInfo<MlaCase>& info) {
  const auto [form, page_size, dtype] = info.param;
  const char* forms[] = {"combined", "pair", "ckv_only"};
  return std::string(forms[form]) + "_p" + std::to_string(page_size) + "_" + std::string(dtype_name(dtype));
}

TEST_P(CudaAppendMla, MatchesCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  const auto [form, page_size, dtype] = GetParam();  // form: 0 combined, 1 pair, 2 ckv only
  Rng rng(0x3A11 + std::uint64_t(form) * 7 + std::uint64_t(page_size));
  const std::vector<std::int32_t> prefix{5, 0, 64, 1}, append{3, 70, 1, 0};
  std::vector<std::int32_t> kv_lens(prefix.size());
  for (std::size_t b = 0; b < kv_lens.size(); ++b) kv_lens[b] = prefix[b] + append[b];
  const HostPageTable table = random_page_table(kv_lens, page_size, 2, rng);
  const AppendIndices ai = append_indices(prefix, append);
  const std::int64_t nnz = ai.nnz, P = table.num_pages;
  Tensor bi = Tensor::empty({nnz}, DType::kI32), pos = Tensor::empty({nnz}, DType::kI32);
  get_batch_indices_positions(ai.append_indptr, ai.seq_lens, bi, pos);
  const Device gpu = Device::cuda(0);
  const Tensor bi_d = bi.to(gpu), pos_d = pos.to(gpu);
  const DevicePageTable table_dev(table);
  const PageTable table_d = table_dev.view();

  // append_ckv as a padded view, append_kpe contiguous.
  Padded ckv_p = padded({nnz, kMlaHeadDimCkv}, dtype, {0, 8});
  fill_random_bytes(ckv_p.storage, rng);
  Mirror ckv_m(std::move(ckv_p.storage));
  Mirror kpe_m(random_bytes({nnz, kMlaHeadDimKpe}, dtype, rng));
  const TensorView kpe_h = form == 2 ? TensorView() : kpe_m.host.view();
  const TensorView kpe_dv = form == 2 ? TensorView() : kpe_m.dev.view();

  if (form == 0) {
    Mirror cache(Tensor::empty({P, page_size, kMlaHeadDimCkv + kMlaHeadDimKpe}, dtype));
    cache.poison();
    append_paged_mla_kv_cache(ckv_p.view, kpe_h, bi, pos, MLACache::combined(cache.host), table.view());
    append_paged_mla_kv_cache(ckv_m.on_dev(ckv_p.view), kpe_dv, bi_d, pos_d, MLACache::combined(cache.dev),
                              table_d);
    EXPECT_TRUE(cache.same_bytes());
  } else {
    Mirror ckv_c(Tensor::empty({P, page_size, kMlaHeadDimCkv}, dtype));
    Mirror kpe_c(Tensor::empty({P, page_size, kMlaHeadDimKpe}, dtype));
    ckv_c.poison();
    kpe_c.poison();
    const TensorView kpe_ch = form == 2 ? TensorView() : kpe_c.host.view();
    const TensorView kpe_cd = form == 2 ? TensorView() : kpe_c.dev.view();
    append_paged_mla_kv_cache(ckv_p.view, kpe_h, bi, pos, MLACache::pair(ckv_c.host, kpe_ch), table.view());
    append_paged_mla_kv_cache(ckv_m.on_dev(ckv_p.view), kpe_dv, bi_d, pos_d,
                              MLACache::pair(ckv_c.dev, kpe_cd), table_d);
    EXPECT_TRUE(ckv_c.same_bytes());
    EXPECT_TRUE(kpe_c.same_bytes());  // untouched (still poison) when there is no kpe
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, CudaAppendMla,
                         ::testing::Values(std::tuple{0, std::int64_t(64), DType::kBF16},
                                           std::tuple{0, std::int64_t(1), DType::kE4M3},
                                           std::tuple{1, std::int64_t(16), DType::kF16},
                                           std::tuple{1, std::int64_t(5), DType::kBF16},
                                           std::tuple{2, std::int64_t(16), DType::kBF16}),
                         mla_case_name);

TEST(CudaIndices, BatchIndicesPositionsMatchCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(77);
  for (const std::int64_t batch : {0, 1, 7, 300}) {
    std::vector<std::int32_t> prefix(static_cast<std::size_t>(batch)),
        append(static_cast<std::size_t>(batch));
    std::uniform_int_distribution<int> len(0, 300), pre(0, 1000);
    for (std::int64_t b = 0; b < batch; ++b) {
      append[std::size_t(b)] = b % 5 == 0 ? 0 : len(rng);  // some requests append nothing
      prefix[std::size_t(b)] = pre(rng);
    }
    const AppendIndices ai = append_indices(prefix, append);
    Tensor bi = Tensor::empty({ai.nnz}, DType::kI32), pos = Tensor::empty({ai.nnz}, DType::kI32);
    fill_bytes(bi, kPoison);
    fill_bytes(pos, kPoison);
    get_batch_indices_positions(ai.append_indptr, ai.seq_lens, bi, pos);
    Mirror bi_d(Tensor::empty({ai.nnz}, DType::kI32)), pos_d(Tensor::empty({ai.nnz}, DType::kI32));
    bi_d.poison();
    pos_d.poison();
    const Tensor append_indptr_d = ai.append_indptr.to(Device::cuda(0)),
                 seq_lens_d = ai.seq_lens.to(Device::cuda(0));
    get_batch_indices_positions(append_indptr_d, seq_lens_d, bi_d.dev, pos_d.dev);
    EXPECT_EQ(to_vector_i32(bi_d.download()), to_vector_i32(bi)) << "batch " << batch;
    EXPECT_EQ(to_vector_i32(pos_d.download()), to_vector_i32(pos)) << "batch " << batch;
  }
}

TEST(CudaIndices, SeqLensMatchCpu) {
  KVINFER_SKIP_WITHOUT_GPU();
  Rng rng(78);
  for (const std::int64_t page_size : {1, 5, 16}) {
    for (const std::int64_t batch : {0, 1, 9, 1000}) {
      std::vector<std::int32_t> kv_lens(static_cast<std::size_t>(batch));
      std::uniform_int_distribution<int> len(0, 200);
      for (std::int64_t b = 0; b < batch; ++b) kv_lens[std::size_t(b)] = b % 4 == 1 ? 0 : len(rng);
      const HostPageTable table = random_page_table(kv_lens, page_size, 0, rng);
      Tensor lens = Tensor::empty({batch}, DType::kI32);
      fill_bytes(lens, kPoison);
      get_seq_lens(table.indptr, table.last_page_len, page_size, lens);
      EXPECT_EQ(to_vector_i32(lens), kv_lens);
      Mirror lens_d(Tensor::empty({batch}, DType::kI32));
      lens_d.poison();
      const DevicePageTable table_dev(table);
      get_seq_lens(table_dev.indptr, table_dev.last_page_len, page_size, lens_d.dev);
      EXPECT_EQ(to_vector_i32(lens_d.download()), kv_lens)
          << "page_size " << page_size << ", batch " << batch;
    }
  }
}

// On a GPU the index ops read their arrays' contents only in the checked mode (a
// copy to the host and a synchronisation): KVINFER_CHECK_INDICES=1, set by ctest's
// cuda_page_index_ops_checked for this test alone (the mode is read once per process).
// Then a bad content is the CPU's error; the shapes are checked in either mode.
TEST(CudaIndices, CheckedModeRejectsBadContents) {
  KVINFER_SKIP_WITHOUT_GPU();
  if (!detail::check_indices_enabled()) GTEST_SKIP() << "needs KVINFER_CHECK_INDICES=1";
  const Device gpu = Device::cuda(0);
  const auto dev = [&](std::vector<std::int32_t> v) { return int32_tensor(v).to(gpu); };
  const auto empty = [&](std::int64_t n) { return Tensor::empty({n}, DType::kI32, gpu); };
  const Tensor kv_indptr = dev({0, 2, 2}), lens = empty(2);
  EXPECT_NO_THROW(get_seq_lens(kv_indptr, dev({4, 0}), 4, lens));
  expect_error(
      [&] {
        get_seq_lens(kv_indptr, dev({5, 0}), 4, lens);
      },
      "kv_last_page_len[0]", "page_size = 4");
  expect_error([&] { get_seq_lens(kv_indptr, dev({0, 0}), 4, lens); }, "kv_last_page_len[0]");
  expect_error([&] { get_seq_lens(kv_indptr, dev({3, 1}), 4, lens); }, "kv_last_page_len[1]", "no pages");

  const Tensor append_indptr = dev({0, 1, 3}), seq_lens = dev({4, 2}), batch = empty(3), pos = empty(3);
  EXPECT_NO_THROW(get_batch_indices_positions(append_indptr, seq_lens, batch, pos));
  expect_error([&] { get_batch_indices_positions(append_indptr, dev({4, 1}), batch, pos); }, "seq_lens[1]");
  const Tensor batch4 = empty(4), pos4 = empty(4);
  expect_error([&] { get_batch_indices_positions(append_indptr, seq_lens, batch4, pos4); },
               "batch_indices.shape[0]", "append_indptr[batch_size] = 3");
  expect_error([&] { get_batch_indices_positions(append_indptr, seq_lens, batch4, pos); },
               "positions.shape[0]");
}

}  // namespace
}  // namespace kvinfer::testing
