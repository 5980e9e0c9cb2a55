// SPDX-License-Identifier: Apache-2.0
// The benchmarks' shapes as the tests' case descriptions (tests/testing): paged
// decode, prefill and MLA decode in the benchmarks' dtypes (bf16), and --check, which
// runs a case through the test harness against the float64 oracle before it is
// timed (where the harness is built: KVINFER_BENCH_HAVE_CHECK).
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/args.hpp"
#include "testing/attention_case.hpp"
#include "testing/mla_case.hpp"

namespace kvinfer::bench {

#ifdef KVINFER_BENCH_HAVE_CHECK
inline constexpr bool kHaveCheck = true;
#else
inline constexpr bool kHaveCheck = false;
#endif

// Paged decode of one query row per request over kv_lens (NHD, combined cache).
inline testing::AttentionCase decode_case(std::string name, std::vector<std::int32_t> kv_lens,
                                          std::int64_t num_qo_heads, std::int64_t num_kv_heads,
                                          std::int64_t head_dim, std::int64_t page_size) {
  const std::vector<std::int32_t> qo_lens(kv_lens.size(), 1);
  testing::AttentionCase c = testing::bf16_case(std::move(name), testing::Wrapper::kDecode, num_qo_heads,
                                                num_kv_heads, head_dim, qo_lens, std::move(kv_lens));
  c.page_size = page_size;
  c.with_lse = false;
  return c;
}

// Prefill of `batch` requests of `len` new tokens over `len` keys each (self-attention
// of a prompt), ragged or paged.
inline testing::AttentionCase prefill_case(std::string name, testing::Wrapper wrapper, std::int64_t batch,
                                           std::int32_t len, std::int64_t num_qo_heads,
                                           std::int64_t num_kv_heads, std::int64_t head_dim, bool causal) {
  const std::vector<std::int32_t> lens(std::size_t(batch), len);
  testing::AttentionCase c =
      testing::bf16_case(std::move(name), wrapper, num_qo_heads, num_kv_heads, head_dim, lens, lens);
  c.options.mask_mode = causal ? MaskMode::kCausal : MaskMode::kNone;
  c.with_lse = false;
  return c;
}

// MLA decode: one query row per request over kv_lens of the latent cache (combined).
inline testing::MLACase mla_decode_case(std::string name, std::vector<std::int32_t> kv_lens,
                                        std::int64_t num_heads, std::int64_t page_size, DType kv_dtype) {
  testing::MLACase c;
  c.name = std::move(name);
  c.qo_lens.assign(kv_lens.size(), 1);
  c.kv_lens = std::move(kv_lens);
  c.num_heads = num_heads;
  c.page_size = page_size;
  c.kv_dtype = kv_dtype;
  c.with_lse = false;
  return c;
}

struct CheckResult {
  bool ok = false;
  std::string summary;
};

// The case on `device` against the float64 oracle, through the test harness
// (call only where kHaveCheck).
CheckResult check_case(const testing::AttentionCase& c, Device device);
CheckResult check_case(const testing::MLACase& c, Device device);

#ifdef KVINFER_BENCH_HAVE_CHECK
inline CheckResult check_case(const testing::AttentionCase& c, Device device) {
  const testing::CaseReport r = testing::run_attention_case(c, device);
  return {r.ok(), r.summary()};
}
inline CheckResult check_case(const testing::MLACase& c, Device device) {
  const testing::CaseReport r = testing::run_mla_case(c, device);
  return {r.ok(), r.summary()};
}
#endif

// --check of one case before it is timed (where the harness is built): prints "check
// <label> ok|FAILED <summary>" (label left-aligned in `width` columns; the case's name
// when empty), clears all_ok on a failure, and returns the row's "check" field
// ({ok, summary}); null without --check.
template <class Case>
nlohmann::json check_field(const Args& args, const Case& c, Device device, bool& all_ok, int width,
                           const std::string& label = "") {
  nlohmann::json check;
  if constexpr (kHaveCheck) {
    if (args.check) {
      const CheckResult r = check_case(c, device);
      std::printf("check %-*s %s %s\n", width, (label.empty() ? c.name : label).c_str(), r.ok ? "ok" : "FAILED",
                  r.summary.c_str());
      all_ok = all_ok && r.ok;
      check = {{"ok", r.ok}, {"summary", r.summary}};
    }
  }
  return check;
}

}  // namespace kvinfer::bench
