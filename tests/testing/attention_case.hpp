// SPDX-License-Identifier: Apache-2.0
// One description of an attention test case drives correctness tests on every
// backend (and the benchmarks): shapes, lengths, layout, options, dtypes. The
// harness builds random inputs, runs the public wrapper on a device, and compares
// with the float64 oracle under the tolerance model of DESIGN.md.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

enum class Wrapper { kRaggedPrefill, kPagedPrefill, kDecode };

struct AttentionCase {
  std::string name;
  Wrapper wrapper = Wrapper::kPagedPrefill;
  std::vector<std::int32_t> qo_lens;  // decode: all 1
  std::vector<std::int32_t> kv_lens;
  std::int64_t num_qo_heads = 4;
  std::int64_t num_kv_heads = 4;
  std::int64_t head_dim_qk = 64;
  std::int64_t head_dim_vo = 64;
  std::int64_t page_size = 16;
  KVLayout layout = KVLayout::kNHD;
  bool combined_cache = true;  // 5-D tensor (paged) instead of a K/V pair
  bool strided = false;        // q, k, v, out and the cache as padded (non-contiguous) views
  AttentionOptions options;
  bool packed_mask = false;    // custom mask handed to plan already bit-packed
  DType q_dtype = DType::kF16;
  DType kv_dtype = DType::kF16;
  DType o_dtype = DType::kF16;
  bool with_lse = true;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  float q_std = 1.0f;  // queries drawn from N(0, q_std^2)
  SplitOptions split;
  std::uint64_t seed = 1;

  std::string describe() const;
};

// A case of `wrapper` in bf16 (q, KV and out) with the given heads, head_dim and
// lengths; everything else as AttentionCase has it.
inline AttentionCase bf16_case(std::string name, Wrapper wrapper, std::int64_t num_qo_heads,
                               std::int64_t num_kv_heads, std::int64_t head_dim, std::vector<std::int32_t> qo_lens,
                               std::vector<std::int32_t> kv_lens) {
  AttentionCase c;
  c.name = std::move(name);
  c.wrapper = wrapper;
  c.qo_lens = std::move(qo_lens);
  c.kv_lens = std::move(kv_lens);
  c.num_qo_heads = num_qo_heads;
  c.num_kv_heads = num_kv_heads;
  c.head_dim_qk = c.head_dim_vo = head_dim;
  c.q_dtype = c.kv_dtype = c.o_dtype = DType::kBF16;
  return c;
}

// GoogleTest prints a failing parameter with this instead of its bytes.
inline void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << c.describe();
}

// Outcome of one case: errors of the backend and of the fp32 naive algorithm
// against the oracle, and whether everything was within the tolerance.
struct CaseReport {
  double max_err_o = 0, max_naive_err_o = 0, tol_o = 0;
  double max_err_lse = 0, max_naive_err_lse = 0, tol_lse = 0;
  bool nan_found = false;
  bool inf_lse_mismatch = false;
  bool ok() const {
    return !nan_found && !inf_lse_mismatch && max_err_o <= tol_o && max_err_lse <= tol_lse;
  }
  std::string summary() const;
};

// The other 16-bit float type: an output dtype that differs from the query's
// (FlashInfer's o_data_type), which every backend accepts.
inline DType other_half_dtype(DType t) { return t == DType::kBF16 ? DType::kF16 : DType::kBF16; }

// atol of the tolerance model: the precision of the stored inputs.
double attention_atol(DType q_dtype, DType kv_dtype, DType o_dtype);

// A case's inputs built from its seed (build(c, device, rng)) and its wrapper run on
// them (run(c, device, built)): what a harness's run_*_case functions start with.
template <class Case, class Build, class Run>
auto built_and_run(const Case& c, Device device, Build&& build, Run&& run) {
  std::mt19937_64 rng(c.seed);
  auto b = build(c, device, rng);
  run(c, device, b);
  return b;
}

// Runs `c` through the public API on `device` and compares with the oracle.
CaseReport run_attention_case(const AttentionCase& c, Device device);

// The raw output of one case on `device`, on the host (o as float32 [nnz_q, Hq, Dvo],
// lse [nnz_q, Hq]); used for bitwise comparisons between runs.
struct CaseOutput {
  std::vector<float> o;
  std::vector<float> lse;
};
CaseOutput run_attention_case_raw(const AttentionCase& c, Device device);
// Requests [first, last) of c's batch, run as a batch of their own.
struct RequestRange {
  std::int64_t first, last;
};
// The inputs of c's whole batch built once, then one wrapper per range over the same
// values: each range's output rows as run_attention_case_raw's.
std::vector<CaseOutput> run_attention_case_requests(const AttentionCase& c, Device device,
                                                    std::span<const RequestRange> ranges);
// Reads o [nnz_q, heads, dim] (stored as o_dtype) and, with_lse, lse [nnz_q, heads]
// (float32) from host views, which may be padded.
CaseOutput read_case_output(const TensorView& o, const TensorView& lse, std::int64_t nnz_q, std::int64_t heads,
                            std::int64_t dim, DType o_dtype, bool with_lse);

// The pairwise-covering case list of the CPU attention issue plus named edge cases.
std::vector<AttentionCase> attention_case_list();
// A wider random grid (label `slow`).
std::vector<AttentionCase> wide_attention_case_list(int count, std::uint64_t seed);

}  // namespace kvinfer::testing
