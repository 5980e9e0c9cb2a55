// SPDX-License-Identifier: Apache-2.0
#include "plan/attention_selector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "kvinfer/core/error.hpp"
#include "plan/instance_presets.hpp"

namespace kvinfer::detail {
namespace {

std::string describe(const AttentionProblem& pr) {
  return fmt::format("{} q, {} KV, {} out, head_dim {}{}", dtype_name(pr.q_dtype), dtype_name(pr.kv_dtype),
                     dtype_name(pr.o_dtype), pr.head_dim_qk,
                     pr.head_dim_vo != pr.head_dim_qk ? fmt::format("/{}", pr.head_dim_vo) : std::string());
}

// The index of the family's instance compiled for the problem's dtypes and head dims, or -1.
int find(const AttentionKernelCaps& caps, KernelFamily family, const AttentionProblem& pr) {
  for (std::size_t i = 0; i < caps.instances.size(); ++i) {
    const AttentionInstance& inst = caps.instances[i];
    if (inst.family == family && inst.q == pr.q_dtype && inst.kv == pr.kv_dtype &&
        inst.head_dim_qk == pr.head_dim_qk && inst.head_dim_vo == pr.head_dim_vo)
      return int(i);
  }
  return -1;
}

// The query rows per request the kernel is chosen for: the longest request's, or, for a
// batch-invariant plan (length_free_kernel), as many as make every choice below that
// of long prefill, whatever the batch holds: a request's kernel and tile then never
// depend on the other requests (docs/semantics.md, "Batch invariance").
std::int64_t kernel_qo_len(const AttentionProblem& pr) {
  constexpr std::int64_t kLongQuery = 128;  // 128 packed rows at group 1: a 128-row tile
  return pr.length_free_kernel ? std::max<std::int64_t>(pr.max_qo_len, kLongQuery) : pr.max_qo_len;
}

// The CUDA-core decode kernel runs problems whose requests have one query row each.
bool is_decode_problem(const AttentionProblem& pr) {
  return kernel_qo_len(pr) <= 1 && pr.mask_mode != MaskMode::kCustom && pr.head_dim_qk == pr.head_dim_vo;
}

// The CUDA-core decode kernel's rows per item: a GQA group's rows of one token, up to 8.
int decode_tile_rows(std::int64_t group) {
  int rows = 1;
  while (rows < group && rows < 8) rows *= 2;
  return rows;
}

// Decode on tensor cores: the tile kernel's one-warp tile of 16 packed rows holds a
// GQA group's rows of one token. From 2 rows per KV head on, the CUDA-core kernel is
// bound by issuing its multiply-adds (0.48-0.52 of the read bandwidth at group 4,
// 0.80 at group 1) while this one streams at 0.81-0.95 (docs/kernels.md). 16-bit KV
// of the query's type at head_dim 64 and 256, groups 2-8, no RoPE, takes the key-row
// tile (key_row_tile/): at 256, 128 accumulators per lane leave the one-warp tile
// too few registers (the key-row tile needs 64); at 64, the key-row tile's lighter
// CTAs share an SM in greater numbers. The general logits (ALiBi, soft cap) run only
// on the 64-row tiles, so they stay on the CUDA cores.
constexpr int kDecodeTileRows = 16;
// The widest head the tensor-core tile's warps hold whole; wider ones split O's columns
// over warps and run 64-row prefill tiles (docs/kernels.md, "Tensor-core tile").
constexpr int kMaxSliceFreeHeadDim = 256;
bool tensor_core_decode(const AttentionProblem& pr) {
  const std::int64_t group = pr.group_size();
  // The fp8 tile converts K in registers, where RoPE cannot rotate it.
  const bool fp8_rope = is_fp8(pr.kv_dtype) && pr.pos_encoding == PosEncoding::kRopeLlama;
  // The key-row tile takes decode problems only: a few query tokens per request
  // (speculative verification) stay on this tile. At head_dim 128 this tile plans
  // and the key-row tile runs the plan (key_row_decode).
  // Heads above 256 dims have no CUDA-core or key-row instance (a key row would need
  // more than a warp's lanes in either); the 16-row tile, in column slices, takes
  // their decode at every group up to 16.
  const bool wide = pr.head_dim_vo > kMaxSliceFreeHeadDim;
  const bool key_row_tile = is_decode_problem(pr) && pr.kv_dtype == pr.q_dtype && pr.head_dim_qk != 128 &&
                            group <= 8 && pr.pos_encoding == PosEncoding::kNone && !wide;
  return (group >= 2 || wide) && group <= kDecodeTileRows && (pr.head_dim_vo <= 128 || wide) &&
         pr.pos_encoding != PosEncoding::kAlibi && pr.logits_soft_cap <= 0.0f && !fp8_rope && !key_row_tile;
}

// 128-row tiles halve the K/V traffic per query row; 64 rows waste less on short requests.
int tile_rows(const AttentionProblem& pr) {
  if (general_logits(pr)) return 64;
  if (tensor_core_decode(pr) && kernel_qo_len(pr) * pr.group_size() <= kDecodeTileRows) {
    return kDecodeTileRows;  // a few tokens per request (speculative verification): memory-bound like decode
  }
  const bool wide = pr.head_dim_qk > kMaxSliceFreeHeadDim || pr.head_dim_vo > kMaxSliceFreeHeadDim;
  return wide || kernel_qo_len(pr) * pr.group_size() <= 64 ? 64 : 128;
}

// options.backend = fa3 where the Hopper kernels do not apply.
[[noreturn]] void throw_not_hopper(const AttentionProblem& pr) {
  throw Error("attention", "options.backend", "fa3 (Hopper)",
              "applies only to 16-bit KV of the query's type with equal head dims 64/128/256 and no RoPE, ALiBi, "
              "soft cap or custom mask (" +
                  describe(pr) + ")");
}

// Prefill on 128-row tiles takes the Hopper mainloop where an instance of it is
// compiled, the device is sm_90 and the logits are plain (no RoPE: it rotates tiles in
// shared memory, which only the portable kernel does), unless options.backend asks for
// the portable one; asked for explicitly, it runs 128-row tiles whatever the lengths.
// Of the two Hopper kernels, the warp-specialised one runs where it is compiled, for
// ragged KV (TMA boxes of one head, copied by a producer warp while both consumer
// warpgroups compute) and, where the caps say so (kWsPrefillPaged), for paged KV of
// any page size (its producer warpgroup gathers rows by page id); otherwise paged KV
// gathers rows in the wgmma mainloop's copies (docs/kernels.md, "Warp-specialised
// prefill").
// 16-row tiles with fp8 KV take the fp8 decode tile where one is compiled: it converts
// K and V in registers, where the portable tile stages and converts them in shared
// memory (docs/kernels.md, "fp8 decode tile").
KernelKey tile_choice(int index, const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const int rows = tile_rows(pr);
  const bool general = general_logits(pr);
  const int wgmma =
      !general && pr.pos_encoding == PosEncoding::kNone ? find(caps, KernelFamily::kWgmmaPrefill, pr) : -1;
  const bool supported = wgmma >= 0;
  const bool hopper = caps.hopper;
  const bool ws_kv = pr.storage == KVStorage::kRagged || caps.ws_prefill_paged;
  const int ws = supported && ws_kv ? find(caps, KernelFamily::kWsPrefill, pr) : -1;
  const KernelKey hopper_key = ws >= 0 ? KernelKey{KernelFamily::kWsPrefill, ws, 128}
                                       : KernelKey{KernelFamily::kWgmmaPrefill, wgmma, 128};
  if (pr.backend == PrefillBackend::kHopper) {
    if (!supported) throw_not_hopper(pr);
    if (!hopper) {
      throw Error("attention", "options.backend", "fa3 (Hopper)",
                  "needs an sm_90 device and a build with sm_90a code (KVINFER_CUDA_ARCHS)");
    }
    return hopper_key;
  }
  if (general) return {KernelFamily::kTensorCoreTile, index, rows, KernelVariant::kGeneralLogits};
  if (supported && rows == 128 && pr.backend == PrefillBackend::kAuto && hopper) return hopper_key;
  if (rows == kDecodeTileRows && is_fp8(pr.kv_dtype)) {
    if (const int i = find(caps, KernelFamily::kFp8DecodeTile, pr); i >= 0) return {KernelFamily::kFp8DecodeTile, i, rows};
  }
  return {KernelFamily::kTensorCoreTile, index, rows};
}

// At head_dim 128 the 16-row tile plans 16-bit decode of groups 2-8 and the key-row
// tile runs the plan: both hold 8 warps per multiprocessor (the
// 16-row tile's one-warp CTAs; the key-row tile's CTAs of item warps, and its one-warp
// CTAs padded to 8), so one plan suits both. On the H200 the key-row tile is 1-3%
// faster with item warps (1 x 32k 41.0 -> 39.8 us, 16 x 8k 127.3 -> 125.9, 64 x 4k
// 248.9 -> 247.0) and as fast or faster with one warp per item (256 x 1k 0.992, 16 x
// 8k unsplit 0.886, skewed lengths 0.999-1.003).
bool key_row_decode(const AttentionProblem& pr) {
  const std::int64_t group = pr.group_size();
  return is_decode_problem(pr) && pr.backend != PrefillBackend::kHopper && pr.head_dim_qk == 128 &&
         pr.kv_dtype == pr.q_dtype && group >= 2 && group <= 8 && pr.pos_encoding == PosEncoding::kNone &&
         !general_logits(pr);
}

// The CUDA cores' decode, or the key-row tile where it runs the same items: rows of 2
// or more (a head group), plain logits (it has no RoPE, ALiBi or soft cap).
KernelKey decode_choice(int index, const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const int rows = decode_tile_rows(pr.group_size());
  if (rows >= 2 && pr.pos_encoding == PosEncoding::kNone && !general_logits(pr)) {
    if (const int i = find(caps, KernelFamily::kKeyRowTile, pr); i >= 0) return {KernelFamily::kKeyRowTile, i, rows};
  }
  return {KernelFamily::kCudaCoreDecode, index, rows};
}

// Head dims that no exact instance has (multiples of 16 up to 512, or unequal ones
// other than 192/128): the padded tile of the smallest head dim that holds both,
// whose tiles are chosen as the tensor-core tile's would be at that head dim.
std::optional<KernelKey> padded_choice(const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const std::int64_t need = std::max(pr.head_dim_qk, pr.head_dim_vo);
  int best = -1;
  for (std::size_t i = 0; i < caps.instances.size(); ++i) {
    const AttentionInstance& inst = caps.instances[i];
    if (inst.family == KernelFamily::kPaddedTile && inst.q == pr.q_dtype && inst.kv == pr.kv_dtype &&
        inst.head_dim_qk == inst.head_dim_vo && inst.head_dim_qk >= need &&
        (best < 0 || inst.head_dim_qk < caps.instances[std::size_t(best)].head_dim_qk))
      best = int(i);
  }
  if (best < 0) return std::nullopt;
  if (pr.backend == PrefillBackend::kHopper) throw_not_hopper(pr);
  AttentionProblem padded = pr;
  padded.head_dim_qk = padded.head_dim_vo = caps.instances[std::size_t(best)].head_dim_qk;
  return KernelKey{KernelFamily::kPaddedTile, best, tile_rows(padded),
                   general_logits(pr) ? KernelVariant::kGeneralLogits : KernelVariant::kPlain};
}

// The kernel that plans the problem, or none where no compiled instance runs it.
std::optional<KernelKey> plan_kernel(const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const int tile = find(caps, KernelFamily::kTensorCoreTile, pr);
  if (is_decode_problem(pr) && pr.backend != PrefillBackend::kHopper) {
    if (tensor_core_decode(pr) && tile >= 0) return tile_choice(tile, pr, caps);
    if (const int i = find(caps, KernelFamily::kCudaCoreDecode, pr); i >= 0) return decode_choice(i, pr, caps);
  }
  if (tile >= 0) return tile_choice(tile, pr, caps);
  return padded_choice(pr, caps);
}

// The smallest instance preset other than this build's whose kernels run the
// problem, or none.
std::optional<std::string_view> preset_with(const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  for (const InstancePreset& preset : instance_presets()) {
    if (preset.name == caps.preset) continue;
    AttentionKernelCaps other = caps;
    other.instances = preset.instances;
    if (plan_kernel(pr, other)) return preset.name;
  }
  return std::nullopt;
}

[[noreturn]] void throw_no_instance(const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const std::optional<std::string_view> other = preset_with(pr, caps);
  throw Error("attention", "kernel", describe(pr),
              other ? fmt::format("no CUDA kernel for this configuration is compiled in the '{}' instance "
                                  "preset; the '{}' preset has one (configure with -DKVINFER_INSTANCES={})",
                                  caps.preset, *other, *other)
                    : fmt::format("no CUDA kernel for this configuration in any instance preset (this build: "
                                  "'{}'); the CPU backend runs it",
                                  caps.preset));
}

}  // namespace

bool general_logits(const AttentionProblem& pr) {
  return pr.mask_mode == MaskMode::kCustom || pr.pos_encoding == PosEncoding::kAlibi ||
         pr.logits_soft_cap > 0.0f;
}

AttentionSelection select_attention_kernel(const AttentionProblem& pr, const AttentionKernelCaps& caps) {
  const std::optional<KernelKey> key = plan_kernel(pr, caps);
  if (!key) throw_no_instance(pr, caps);
  AttentionSelection s;
  s.plan = s.run = *key;
  if (key_row_decode(pr)) {
    if (const int i = find(caps, KernelFamily::kKeyRowTile, pr); i >= 0) {
      s.run = {KernelFamily::kKeyRowTile, i, decode_tile_rows(pr.group_size())};
    }
  }
  return s;
}

}  // namespace kvinfer::detail
