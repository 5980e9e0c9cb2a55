// SPDX-License-Identifier: Apache-2.0
// One description of a BatchMLAPagedAttention test case: lengths, heads, page size,
// cache form, dtypes, scales, LSE base and split options. The harness builds random
// inputs, runs the public wrapper on a device and compares with the float64 oracle
// under the tolerance model of DESIGN.md (shared with the attention cases).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"
#include "oracle/oracle.hpp"
#include "testing/attention_case.hpp"

namespace kvinfer::testing {

struct MLACase {
  std::string name;
  std::vector<std::int32_t> qo_lens;
  std::vector<std::int32_t> kv_lens;
  std::int64_t num_heads = 16;
  std::int64_t head_dim_kpe = 64;  // 64 or 0; head_dim_ckv is always 512
  std::int64_t page_size = 16;
  bool causal = false;
  bool combined_cache =
      true;                   // one [pages, page_size, 576] tensor viewed as ckv/kpe, else two padded tensors
  bool strided = false;       // q_nope/q_pe as views of one [nnz, H, 576 + pad] tensor, out padded
  bool shared_pages = false;  // requests after the first reuse the first request's pages
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType o_dtype = DType::kBF16;
  bool with_lse = true;
  bool lse_base_e = false;
  float ckv_scale = 1.0f;
  float kpe_scale = 1.0f;
  float sm_scale = 0.0f;  // 0: 1 / sqrt(128 + 64), DeepSeek's scale before absorption
  SplitOptions split;
  std::uint64_t seed = 1;

  std::string describe() const;
  // Multiply-adds of the oracle for this case (CI keeps the fast list cheap).
  double cost() const;
};

// GoogleTest prints a failing parameter with this instead of its bytes.
inline void PrintTo(const MLACase& c, std::ostream* os) {
  *os << c.describe();
}

// The plan arguments of an MLA problem over its CSR arrays (qo_indptr, kv_indptr in
// pages, kv_indices, kv_len in keys): DeepSeek's head dims, bf16, what the tests
// and bench_mla then change.
inline MLAPlanArgs mla_plan_args(TensorView qo_indptr, TensorView kv_indptr, TensorView kv_indices, TensorView kv_len,
                                 std::int64_t num_heads, std::int64_t page_size, std::optional<float> sm_scale,
                                 bool causal = false, SplitOptions split = {}) {
  return {.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .kv_indices = kv_indices, .kv_len = kv_len,
          .num_heads = num_heads, .page_size = page_size, .causal = causal, .sm_scale = sm_scale, .split = split};
}

// Runs `c` through BatchMLAPagedAttention on `device` and compares with the oracle;
// outputs and LSE are poisoned with 0xFF bytes before the run.
CaseReport run_mla_case(const MLACase& c, Device device);
// The raw output (o as float32 [nnz_q, H, 512], lse [nnz_q, H]) for bitwise comparisons.
CaseOutput run_mla_case_raw(const MLACase& c, Device device);

// The fp32 naive MLA of one request on inputs already in their stored precision
// (scales applied), output rounded to o_dtype: the "naive" of the tolerance model.
// Where fp16 and bf16 mix, the products take bf16 (`operands`: every input rounded to it).
oracle::AttentionResult mla_naive_f32(const oracle::MLASpec& spec, std::span<const double> q_nope,
                                      std::span<const double> q_pe, std::span<const double> ckv,
                                      std::span<const double> kpe, DType o_dtype,
                                      std::optional<DType> operands = std::nullopt);

// Adds one request to a report: o [qo, H, D] and lse [qo, H] (empty: not checked) as
// read back from a wrapper, against the oracle and the naive result. lse_factor
// converts the oracle's base-2 LSE to the base asked for (ln 2 for base e).
void compare_request(CaseReport& rep, std::span<const double> o, std::span<const double> lse,
                     const oracle::AttentionResult& ref, const oracle::AttentionResult& naive,
                     double lse_factor);
// Sets the tolerances: 2 x the naive error + atol.
void finish_report(CaseReport& rep, double atol);

// A pairwise-covering grid over the MLA parameters within a CI cost budget, plus
// named edge cases.
std::vector<MLACase> mla_case_list();
// A wider random grid (label `slow`), with larger lengths and head counts.
std::vector<MLACase> wide_mla_case_list(int count, std::uint64_t seed);

}  // namespace kvinfer::testing
