// SPDX-License-Identifier: Apache-2.0
// Bad page ids in device memory on the GPU, in every family of kernels that reads them
// (kvinfer/core/index_status.hpp): out of the cache, alone and in a split request.
// MLA, and decode and paged prefill in a build with device index checks
// (KVINFER_DEVICE_INDEX_CHECKS): the run leaves the CUDA context usable, writes the
// rows of the request that holds the bad id as zeros with LSE -inf and every other row
// as the good run does (bit for bit), records the id in the status that status()
// returns once, and throws kvinfer::Error naming it in the checked mode. Decode and
// paged prefill without device checks: the checked mode (a copy to the host) throws
// naming it before any kernel.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "testing/case_name.hpp"
#include "testing/random.hpp"

namespace kvinfer::testing {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess)

const Device kGpu = Device::cuda(0);

// Whether decode and prefill check page ids on the device (KVINFER_DEVICE_INDEX_CHECKS);
// MLA always does.
#if defined(KVINFER_DEVICE_INDEX_CHECKS)
constexpr bool kDeviceChecks = true;
#else
constexpr bool kDeviceChecks = false;
#endif


std::vector<float> host_floats(const TensorView& t) {
  const std::vector<std::uint8_t> b = host_bytes(t);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

// Rows [first, last) of out (bytes) and lse (floats) of a run: `row_bytes` per token
// row of out, `heads` LSE values per token row.
struct RunResult {
  std::vector<std::uint8_t> out;
  std::vector<float> lse;
};

// Rows of the bad request are zeros with LSE -inf; every other row is the good run's.
void expect_only_rows_discarded(const RunResult& good, const RunResult& bad, std::int64_t first,
                                std::int64_t last, std::int64_t row_bytes, std::int64_t heads) {
  ASSERT_EQ(good.out.size(), bad.out.size());
  std::int64_t other_diff = 0, nonzero = 0, finite_lse = 0, other_lse_diff = 0;
  for (std::size_t i = 0; i < bad.out.size(); ++i) {
    const std::int64_t row = std::int64_t(i) / row_bytes;
    if (row >= first && row < last) {
      nonzero += bad.out[i] != 0;
    } else {
      other_diff += bad.out[i] != good.out[i];
    }
  }
  for (std::size_t i = 0; i < bad.lse.size(); ++i) {
    const std::int64_t row = std::int64_t(i) / heads;
    if (row >= first && row < last) {
      finite_lse += !(std::isinf(bad.lse[i]) && bad.lse[i] < 0);
    } else {
      other_lse_diff += std::memcmp(&bad.lse[i], &good.lse[i], 4) != 0;
    }
  }
  EXPECT_EQ(nonzero, 0) << "non-zero output bytes in the rows of the request with the bad page id";
  EXPECT_EQ(finite_lse, 0) << "LSE values other than -inf in the rows of that request";
  EXPECT_EQ(other_diff, 0) << "output bytes of other requests that differ from the good run";
  EXPECT_EQ(other_lse_diff, 0) << "LSE values of other requests that differ from the good run";
}

// The status the run left: the bad entry, then nothing (status() clears it).
void expect_status(const std::function<IndexStatus()>& status, std::string_view array, std::int64_t index,
                   std::int64_t value, std::int64_t limit, std::int64_t request) {
  const IndexStatus s = status();
  EXPECT_EQ(s.array, array) << s.message();
  EXPECT_EQ(s.index, index) << s.message();
  EXPECT_EQ(s.value, value) << s.message();
  EXPECT_EQ(s.limit, limit) << s.message();
  EXPECT_EQ(s.request, request) << s.message();
  EXPECT_TRUE(status().ok()) << "status() must clear what it returned";
}

// Runs `run` in the checked mode and expects the kvinfer::Error of the bad entry.
void expect_checked_run_throws(const std::function<void()>& run, std::int64_t index) {
  try {
    run();
    ADD_FAILURE() << "the checked run did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), fmt::format("kv_indices[{}]", index)) << e.what();
  }
}

enum class PagedWrapper { kDecode, kPrefill, kMla };

// What a case varies so that every family of kernels that reads page ids meets a bad
// one (docs/kernels.md, the selector's rules on the H200 with the default preset).
enum class Family {
  kKeyRowTile,      // decode, group 4, 16-bit KV
  kCudaCoreDecode,  // decode, group 1
  kFp8DecodeTile,   // decode, e4m3 KV
  kTensorCoreTile,  // decode of group 16 (the 16-row tile); prefill with backend kPortable
  kGeneralLogits,   // prefill with a soft cap (the tensor-core tile's general logits)
  kWgmmaPrefill,    // paged prefill on sm_90a
  kMla,             // 16 heads: the mma.sync MLA kernel
  kMlaWgmma,        // 128 heads (items of 64 rows): the MLA wgmma kernel on sm_90a
};

struct BadPageCase {
  PagedWrapper wrapper;
  std::int32_t bad;            // the value written into the page table
  int entry_in_request;        // which of request 1's page ids
  std::int64_t fixed_split;    // > 0: chunks of this many keys (request 1 is split)
  Family family = Family::kKeyRowTile;
  std::int64_t page_size = 16;
};

std::string name_of(const BadPageCase& c) {
  static constexpr const char* kFamilies[] = {"keyrow", "cudacore", "fp8tile", "tctile", "general", "wgmma", "mla", "mlawgmma"};
  const char* w = c.wrapper == PagedWrapper::kDecode ? "decode" : c.wrapper == PagedWrapper::kPrefill ? "prefill" : "mla";
  const std::string bad = c.bad < 0 ? fmt::format("minus{}", -std::int64_t(c.bad)) : fmt::format("{}", c.bad);
  return fmt::format("{}_{}_page{}_bad{}_entry{}_{}", w, kFamilies[int(c.family)], c.page_size, bad,
                     c.entry_in_request,
                     c.fixed_split > 0 ? fmt::format("split{}", c.fixed_split) : std::string("nosplit"));
}

// e4m3 bytes of magnitude below 2 (the exponent's top bit clear: never NaN).
Tensor random_e4m3(Shape shape, Rng& rng) {
  Tensor t = random_bytes(shape, DType::kE4M3, rng);
  auto* b = t.data_as<std::uint8_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) b[i] &= 0xBF;
  return t;
}

class CudaBadPageIds : public ::testing::TestWithParam<BadPageCase> {};

TEST_P(CudaBadPageIds, TheRequestsRowsAreZeroAndTheStatusNamesTheEntry) {
  KVINFER_SKIP_WITHOUT_GPU();
  const BadPageCase c = GetParam();
  constexpr std::int64_t kD = 128, kDc = 512, kDp = 64;
  const std::int64_t mla_heads = c.family == Family::kMlaWgmma ? 128 : 16;
  const std::int64_t page = c.page_size;
  const std::int64_t hk = 2, hq = c.family == Family::kCudaCoreDecode   ? 2
                                  : c.family == Family::kTensorCoreTile && c.wrapper == PagedWrapper::kDecode ? 32
                                                                                                        : 8;
  const DType kv_dtype = c.family == Family::kFp8DecodeTile ? DType::kE4M3 : DType::kBF16;
  const bool mla = c.wrapper == PagedWrapper::kMla, decode = c.wrapper != PagedWrapper::kPrefill;
  Rng rng(11);
  const std::vector<std::int32_t> kv_lens{40, 200, 33};
  const std::vector<std::int32_t> qo_lens = decode ? std::vector<std::int32_t>{1, 1, 1} : std::vector<std::int32_t>{5, 70, 9};
  const HostPageTable t = random_page_table(kv_lens, page, 2, rng);
  std::vector<std::int32_t> qo_indptr{0};
  for (std::int32_t n : qo_lens) qo_indptr.push_back(qo_indptr.back() + n);
  const std::int64_t nnz_q = qo_indptr.back();
  const std::int64_t heads = mla ? mla_heads : hq, dv = mla ? kDc : kD;
  const Tensor indices = t.indices.to(kGpu);
  Tensor out = Tensor::empty({nnz_q, heads, dv}, DType::kBF16, kGpu);
  Tensor lse = Tensor::empty({nnz_q, heads}, DType::kF32, kGpu);
  const SplitOptions split = c.fixed_split > 0 ? SplitOptions{.fixed_split_size = c.fixed_split}
                                               : SplitOptions{.disable_split_kv = true};
  AttentionOptions options;
  if (c.family == Family::kGeneralLogits) options.logits_soft_cap = 30.0f;
  if (c.family == Family::kTensorCoreTile && !decode) options.backend = PrefillBackend::kPortable;

  // One planned wrapper; run(check) runs it with the page ids `indices` holds.
  std::function<void(bool)> run;
  std::function<IndexStatus()> status;
  BatchDecodeWithPagedKVCache decode_w(kGpu);
  BatchPrefillWithPagedKVCache prefill_w(kGpu);
  BatchMLAPagedAttention mla_w(kGpu);
  const Tensor q = random_bf16({nnz_q, heads, mla ? kDc : kD}, rng).to(kGpu);
  const Tensor q_pe = random_bf16({nnz_q, heads, kDp}, rng).to(kGpu);
  const Tensor cache = mla                       ? random_bf16({t.num_pages, page, kDc + kDp}, rng).to(kGpu)
                       : kv_dtype == DType::kE4M3 ? random_e4m3({t.num_pages, 2, page, hk, kD}, rng).to(kGpu)
                                                  : random_bf16({t.num_pages, 2, page, hk, kD}, rng).to(kGpu);
  const PageTable table{t.indptr, indices, t.last_page_len};
  if (c.wrapper == PagedWrapper::kDecode) {
    decode_w.plan({.page_table = table, .num_qo_heads = hq, .num_kv_heads = hk, .head_dim = kD,
                   .page_size = page, .options = options, .kv_dtype = kv_dtype, .split = split});
    run = [&](bool check) { decode_w.run(q, PagedKVCache::combined(cache), out, {.lse = lse, .check_indices = check}); };
    status = [&] { return decode_w.status(); };
  } else if (c.wrapper == PagedWrapper::kPrefill) {
    options.mask_mode = MaskMode::kCausal;
    prefill_w.plan({.qo_indptr = int32_tensor(qo_indptr), .page_table = table, .num_qo_heads = hq,
                    .num_kv_heads = hk, .head_dim = kD, .page_size = page, .options = options, .split = split});
    run = [&](bool check) { prefill_w.run(q, PagedKVCache::combined(cache), out, {.lse = lse, .check_indices = check}); };
    status = [&] { return prefill_w.status(); };
  } else {
    mla_w.plan({.qo_indptr = int32_tensor(qo_indptr), .kv_indptr = t.indptr, .kv_indices = indices,
                .kv_len = int32_tensor(kv_lens), .num_heads = mla_heads, .page_size = page, .sm_scale = 0.07f,
                .split = split});
    run = [&](bool check) {
      mla_w.run(q, q_pe, MLACache::combined(cache), out, {.lse = lse, .check_indices = check});
    };
    status = [&] { return mla_w.status(); };
  }
  const auto result = [&] {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return RunResult{host_bytes(out), host_floats(lse)};
  };
  const auto poison_and_run = [&](bool check) {
    fill_bytes(out, kPoison);
    fill_bytes(lse, kPoison);
    run(check);
  };

  poison_and_run(false);
  const RunResult good = result();
  ASSERT_TRUE(status().ok()) << status().message();

  std::vector<std::int32_t> ids = to_vector_i32(t.indices);
  const std::int64_t entry = to_vector_i32(t.indptr)[1] + c.entry_in_request;
  ids[std::size_t(entry)] = c.bad;
  copy(indices, int32_tensor(ids));
  if (!mla && !kDeviceChecks) {  // decode and prefill without device checks: the checked mode reads the ids
    expect_checked_run_throws([&] { poison_and_run(true); }, entry);
    const std::vector<std::uint8_t> untouched = host_bytes(out);
    EXPECT_EQ(std::count(untouched.begin(), untouched.end(), kPoison), std::ptrdiff_t(untouched.size()))
        << "the checked mode threw after a kernel wrote the output";
    EXPECT_TRUE(status().ok()) << "a build without device checks records nothing";
    copy(indices, t.indices);
    poison_and_run(false);
    EXPECT_EQ(result().out, good.out) << "the run after the checked mode's error";
    return;
  }
  ASSERT_NO_THROW(poison_and_run(false));
  const RunResult bad = result();
  expect_only_rows_discarded(good, bad, qo_indptr[1], qo_indptr[2], heads * dv * 2, heads);
  expect_status(status, "kv_indices", entry, c.bad, t.num_pages, 1);

  expect_checked_run_throws([&] { poison_and_run(true); }, entry);
  EXPECT_TRUE(status().ok()) << "the checked run clears the status it throws for";

  // The context is intact: the good table gives the good result again.
  copy(indices, t.indices);
  poison_and_run(false);
  const RunResult again = result();
  EXPECT_EQ(again.out, good.out);
  EXPECT_TRUE(status().ok());
}

constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
using W = PagedWrapper;
using F = Family;
INSTANTIATE_TEST_SUITE_P(
    , CudaBadPageIds,
    ::testing::Values(BadPageCase{W::kDecode, 1000, 5, 0}, BadPageCase{W::kDecode, -1, 0, 0},
                      BadPageCase{W::kDecode, kMin, 12, 0}, BadPageCase{W::kDecode, kMax, 3, 32},
                      BadPageCase{W::kDecode, 1000, 37, 0, F::kKeyRowTile, 1},  // pages that tiles cross
                      BadPageCase{W::kDecode, 1000, 37, 64, F::kKeyRowTile, 1},
                      BadPageCase{W::kDecode, 1000, 5, 0, F::kCudaCoreDecode}, BadPageCase{W::kDecode, -3, 9, 32, F::kCudaCoreDecode},
                      BadPageCase{W::kDecode, 1000, 5, 0, F::kFp8DecodeTile}, BadPageCase{W::kDecode, kMin, 2, 32, F::kFp8DecodeTile},
                      BadPageCase{W::kDecode, 1000, 5, 0, F::kTensorCoreTile}, BadPageCase{W::kDecode, -1, 11, 32, F::kTensorCoreTile},
                      BadPageCase{W::kPrefill, 1000, 0, 0, F::kWgmmaPrefill}, BadPageCase{W::kPrefill, -7, 0, 64, F::kWgmmaPrefill},
                      BadPageCase{W::kPrefill, 1000, 6, 0, F::kWgmmaPrefill, 1},
                      BadPageCase{W::kPrefill, 1000, 3, 0, F::kTensorCoreTile}, BadPageCase{W::kPrefill, kMax, 10, 64, F::kTensorCoreTile},
                      BadPageCase{W::kPrefill, 1000, 4, 0, F::kGeneralLogits}, BadPageCase{W::kPrefill, -2, 1, 64, F::kGeneralLogits},
                      BadPageCase{W::kMla, 1000, 0, 0, F::kMla}, BadPageCase{W::kMla, -1, 4, 32, F::kMla},
                      BadPageCase{W::kMla, 1000, 0, 0, F::kMlaWgmma}, BadPageCase{W::kMla, kMin, 7, 64, F::kMlaWgmma},
                      BadPageCase{W::kMla, 1000, 30, 0, F::kMlaWgmma, 1}),
    [](const ::testing::TestParamInfo<BadPageCase>& info) { return name_of(info.param); });

}  // namespace
}  // namespace kvinfer::testing
