// SPDX-License-Identifier: Apache-2.0
#include "testing/batch_invariance.hpp"

#include <fmt/format.h>

#include <cstring>

namespace kvinfer::testing {

std::vector<AttentionCase> invariance_case_list() {
  std::vector<AttentionCase> cases;
  int n = 0;
  for (AttentionCase c : attention_case_list()) {
    if (c.qo_lens.size() < 2) continue;  // a batch of one is its own only batch
    // A fixed split of 48 keys (rounded up to whole pages when paged), or none.
    c.split = n++ % 2 ? SplitOptions{.fixed_split_size = 48} : SplitOptions{.disable_split_kv = true};
    cases.push_back(c);
  }
  // A request of one query row beside prefills: alone it once took the decode kernel,
  // in the batch the prefill tile (f16 q, e4m3 KV, head_dim 64, GQA 2, causal, ALiBi).
  AttentionCase mixed{.name = "one_row_beside_prefills_alibi_e4m3",
                      .wrapper = Wrapper::kRaggedPrefill,
                      .qo_lens = {10, 123, 1, 177, 7},
                      .kv_lens = {2, 1848, 3, 196, 159},
                      .num_qo_heads = 4,
                      .num_kv_heads = 2,
                      .options = {.mask_mode = MaskMode::kCausal, .pos_encoding = PosEncoding::kAlibi},
                      .q_dtype = DType::kF16,
                      .kv_dtype = DType::kE4M3,
                      .o_dtype = DType::kF16,
                      .split = {.disable_split_kv = true}};
  cases.push_back(mixed);
  // The same without ALiBi (the decode tiles and the 16-row tile against the 128-row
  // tile), and bf16 KV at head_dim 128 (the wgmma prefill on Hopper).
  mixed.name = "one_row_beside_prefills_e4m3";
  mixed.options.pos_encoding = PosEncoding::kNone;
  cases.push_back(mixed);
  mixed.name = "one_row_beside_prefills_bf16_hd128_split";
  mixed.q_dtype = mixed.kv_dtype = mixed.o_dtype = DType::kBF16;
  mixed.head_dim_qk = mixed.head_dim_vo = 128;
  mixed.split = {.fixed_split_size = 256};
  cases.push_back(mixed);
  return cases;
}

namespace {

// Bitwise comparison of rows [row0, row0 + part rows) of `whole` with `part`.
std::string compare(const CaseOutput& whole, const CaseOutput& part, std::size_t o_offset, std::size_t lse_offset,
                    std::string_view what) {
  std::size_t o_diff = 0, lse_diff = 0;
  for (std::size_t i = 0; i < part.o.size(); ++i) o_diff += std::memcmp(&part.o[i], &whole.o[o_offset + i], 4) != 0;
  for (std::size_t i = 0; i < part.lse.size(); ++i)
    lse_diff += std::memcmp(&part.lse[i], &whole.lse[lse_offset + i], 4) != 0;
  if (o_diff == 0 && lse_diff == 0) return {};
  return fmt::format("{}: {} of {} output and {} of {} LSE values differ from the whole batch's; ", what, o_diff,
                     part.o.size(), lse_diff, part.lse.size());
}

}  // namespace

std::string batch_invariance_failure(const AttentionCase& c, Device device) {
  const auto batch = std::int64_t(c.qo_lens.size());
  std::vector<RequestRange> ranges{{0, batch}};
  for (std::int64_t r = 0; r < batch; ++r) ranges.push_back({r, r + 1});
  if (batch >= 3) ranges.push_back({0, batch - 1});
  const std::vector<CaseOutput> outs = run_attention_case_requests(c, device, ranges);
  const std::size_t row_o = std::size_t(c.num_qo_heads * c.head_dim_vo), row_lse = std::size_t(c.num_qo_heads);
  std::vector<std::size_t> first_row{0};
  for (std::int32_t n : c.qo_lens) first_row.push_back(first_row.back() + std::size_t(n));
  std::string failures;
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const RequestRange r = ranges[i];
    const std::size_t r0 = first_row[std::size_t(r.first)];
    const std::string what = r.last == r.first + 1 ? fmt::format("request {} alone", r.first)
                                                   : fmt::format("requests {}-{}", r.first, r.last - 1);
    failures += compare(outs[0], outs[i], r0 * row_o, c.with_lse ? r0 * row_lse : 0, what);
  }
  return failures;
}

}  // namespace kvinfer::testing
