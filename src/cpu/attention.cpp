// SPDX-License-Identifier: Apache-2.0
// CPU execution of a planned attention call. Each work item attends a tile of
// packed query rows (tokens x heads of one KV-head group) to a chunk of keys with
// an online base-2 softmax in float32, one block of keys at a time through the
// vectorised loops of cpu/kernels.hpp; split requests are merged afterwards in the
// order of their chunks, so results do not depend on the thread count. Working
// buffers come from the thread's Scratch, sized when the plan was made
// (attention_scratch_bytes), and key positions are int64, so that a request of up to
// INT32_MAX keys never overflows a loop. Non-finite values follow the rule of
// kvinfer/attention/options.hpp.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "cpu/backend.hpp"
#include "core/mask_policy.hpp"
#include "cpu/convert.hpp"
#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer::cpu {
namespace {

using detail::AttentionParams;
using detail::RequestInfo;
using detail::TileClass;
using detail::WorkItem;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::int32_t kKeyBlock = 32;   // keys attended per online-softmax step
constexpr std::int32_t kDirectRows = 8;  // up to this many query rows read K/V rows in place
constexpr std::int32_t kMaxGroup = 16;   // work items run together (KV heads of one request)

// Where key j of a request's KV head lives. Reads kv_indices only for the pages of
// the keys asked for, never past the request's last page.
class KeyAddress {
 public:
  KeyAddress(const AttentionParams& p, const TensorView& kv, const RequestInfo& r, std::int32_t kv_head)
      : base_(static_cast<const char*>(kv.data())),
        elem_(std::int64_t(kv.element_size())),
        paged_(p.problem.storage == detail::KVStorage::kPaged),
        page_size_(p.problem.page_size) {
    if (paged_) {
      const PageStrides s = page_strides(kv, p.problem.layout);
      page_stride_ = s.page;
      token_stride_ = s.token;
      base_ += kv_head * s.head * elem_;
      pages_ = p.kv_indices.data_as<const std::int32_t>() + r.kv_begin;
    } else {
      const bool nhd = p.problem.layout == KVLayout::kNHD;
      token_stride_ = kv.stride(nhd ? 0 : 1);
      base_ += (kv_head * kv.stride(nhd ? 1 : 0) + std::int64_t(r.kv_begin) * token_stride_) * elem_;
    }
  }
  // Rows of keys [j0, j0 + n) into out[0, n): one division per call instead of one
  // per key (a division costs more than attending a key's share of a cache line).
  void rows(std::int64_t j0, std::int64_t n, const void** out) const {
    if (n <= 0) return;
    const std::int64_t token_bytes = token_stride_ * elem_;
    if (!paged_) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = base_ + (j0 + i) * token_bytes;
      return;
    }
    std::int64_t page = j0 / page_size_, slot = j0 % page_size_;
    const char* row = base_ + (pages_[page] * page_stride_ + slot * token_stride_) * elem_;
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = row;
      row += token_bytes;
      if (++slot == page_size_ && i + 1 < n) {
        slot = 0;
        row = base_ + pages_[++page] * page_stride_ * elem_;
      }
    }
  }

 private:
  const char* base_;
  std::int64_t elem_;
  bool paged_;
  std::int64_t page_size_;
  std::int64_t page_stride_ = 0, token_stride_ = 0;
  const std::int32_t* pages_ = nullptr;
};

// Rotate-half RoPE of one row at position `pos`, in place.
void apply_rope(float* x, std::int64_t dim, std::int64_t pos, float rcp_scale, float rcp_theta) {
  const std::int64_t half = dim / 2;
  for (std::int64_t d = 0; d < half; ++d) {
    const float freq = rcp_scale * std::pow(rcp_theta, float(2 * d) / float(dim));
    const float angle = float(pos) * freq;
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = x[d], b = x[d + half];
    x[d] = a * c - b * s;
    x[d + half] = b * c + a * s;
  }
}

// Score rows are padded to whole vectors; the padding stays -inf.
constexpr std::int64_t kLds = keys_padded(kKeyBlock);

// The buffers of one work item in flight, taken from the thread's Scratch.
struct ItemBuffers {
  float *q, *acc, *s, *m, *d, *rescale, *slope, *out_row;
  float *kb = nullptr, *vb = nullptr;  // converted key/value blocks (not in the direct mode)
  std::int32_t *token, *head;
  const void** k_rows;
  const void** v_rows;

  // Bytes of one item of `rows` packed rows.
  static std::size_t bytes(std::int64_t rows, std::int64_t dqk, std::int64_t dvo, bool direct) {
    const auto r = std::size_t(rows), kb = std::size_t(kKeyBlock);
    std::size_t n = Scratch::bytes_for<float>(r * std::size_t(dqk)) + Scratch::bytes_for<float>(r * std::size_t(dvo)) +
                    Scratch::bytes_for<float>(r * std::size_t(kLds)) + 4 * Scratch::bytes_for<float>(r) +
                    Scratch::bytes_for<float>(std::size_t(dvo)) + 2 * Scratch::bytes_for<std::int32_t>(r) +
                    2 * Scratch::bytes_for<const void*>(kb);
    if (!direct) n += Scratch::bytes_for<float>(kb * std::size_t(dqk)) + Scratch::bytes_for<float>(kb * std::size_t(dvo));
    return n;
  }
  ItemBuffers(Scratch& sc, std::int64_t rows, std::int64_t dqk, std::int64_t dvo, bool direct) {
    const auto r = std::size_t(rows), kb_rows = std::size_t(kKeyBlock);
    q = sc.take<float>(r * std::size_t(dqk));
    acc = sc.take<float>(r * std::size_t(dvo));
    s = sc.take<float>(r * std::size_t(kLds));
    m = sc.take<float>(r);
    d = sc.take<float>(r);
    rescale = sc.take<float>(r);
    slope = sc.take<float>(r);
    out_row = sc.take<float>(std::size_t(dvo));
    token = sc.take<std::int32_t>(r);
    head = sc.take<std::int32_t>(r);
    k_rows = sc.take<const void*>(kb_rows);
    v_rows = sc.take<const void*>(kb_rows);
    if (!direct) {
      kb = sc.take<float>(kb_rows * std::size_t(dqk));
      vb = sc.take<float>(kb_rows * std::size_t(dvo));
    }
  }
};

// Key-major row lists of a group's next block (K then V of every item per key).
std::size_t group_rows_bytes(std::int64_t count) {
  return 2 * Scratch::bytes_for<const void*>(std::size_t(count) * 2 * kKeyBlock);
}

// One work item: its query rows are loaded at construction, attend_block() attends
// the next block of keys with one online-softmax step, finish() writes the output or
// the chunk's partial state.
class ItemRun {
 public:
  // Whether an item of `rows` packed rows reads K/V rows in place (see direct_).
  static bool direct(const detail::AttentionProblem& pr, std::int64_t rows) {
    return rows <= kDirectRows && pr.pos_encoding != PosEncoding::kRopeLlama;
  }

  ItemRun(const AttentionParams& p, const WorkItem& item, Scratch& sc)
      : p_(p),
        pr_(p.problem),
        item_(item),
        r_(p.schedule.requests[item.request]),
        kern_(kernels()),
        dqk_(pr_.head_dim_qk),
        dvo_(pr_.head_dim_vo),
        nrows_(item.row_end - item.row_begin),
        rope_(pr_.pos_encoding == PosEncoding::kRopeLlama),
        alibi_(pr_.pos_encoding == PosEncoding::kAlibi),
        soft_cap_(pr_.logits_soft_cap > 0.0f),
        fold_scale_(!alibi_ && !soft_cap_),
        direct_(direct(pr_, nrows_)),
        block_dtype_(direct_ ? pr_.kv_dtype : DType::kF32),
        k_addr_(p, p.k, r_, item.kv_head),
        v_addr_(p, p.v, r_, item.kv_head),
        k_row_bytes_(dqk_ * std::int64_t(p.k.element_size())),
        v_row_bytes_(dvo_ * std::int64_t(p.v.element_size())),
        b_(sc, nrows_, dqk_, dvo_, direct_),
        j0_(item.kv_begin) {
    mask_.causal = pr_.mask_mode == MaskMode::kCausal;
    mask_.window_left = pr_.window_left;
    mask_.custom = (pr_.mask_mode == MaskMode::kCustom) ? p.custom_mask + r_.mask_offset : nullptr;
    // A position offset d moves the rows' diagonal to row + kv_len - qo_len + d: the
    // mask's qo_len is the one that places them there (RequestMask::diagonal; the
    // plan keeps qo_len - d within int32).
    mask_.qo_len = p.position_offsets ? r_.qo_len - p.position_offsets[item.request] : r_.qo_len;
    mask_.kv_len = r_.kv_len;

    const std::size_t rows = std::size_t(nrows_);
    std::fill(b_.acc, b_.acc + rows * dvo_, 0.0f);
    std::fill(b_.m, b_.m + rows, kNegInf);
    std::fill(b_.d, b_.d + rows, 0.0f);

    // Query rows of the tile: token t = row / group, qo head = kv_head * group + row % group.
    const std::int64_t group = pr_.group_size();
    for (std::int32_t i = 0; i < nrows_; ++i) {
      const std::int32_t row = item.row_begin + i;
      b_.token[i] = std::int32_t(row / group);
      b_.head[i] = std::int32_t(item.kv_head * group + row % group);
      const auto* src = static_cast<const char*>(p.q.data()) +
                        ((r_.qo_begin + b_.token[i]) * p.q.stride(0) + b_.head[i] * p.q.stride(1)) *
                            std::int64_t(p.q.element_size());
      float* qi = b_.q + std::size_t(i) * dqk_;
      kern_.load_row(src, pr_.q_dtype, qi, dqk_);
      if (rope_) apply_rope(qi, dqk_, mask_.diagonal(b_.token[i]), pr_.rope_rcp_scale, pr_.rope_rcp_theta);
      if (fold_scale_) {
        for (std::int64_t d = 0; d < dqk_; ++d) qi[d] *= p.sm_scale * kLog2e;
      }
      b_.slope[i] = alibi_ ? p.alibi_slopes[b_.head[i]] : 0.0f;
    }
    tok_first_ = b_.token[0];
    tok_last_ = b_.token[nrows_ - 1] + 1;
  }

  // The first key of the next block, and the end of the item's keys.
  std::int64_t next_key() const { return j0_; }
  std::int64_t kv_end() const { return item_.kv_end; }

  // Where the K and V rows of keys [j0, j0 + n) are, and their sizes.
  void rows(std::int64_t j0, std::int64_t n, const void** k, const void** v) const {
    k_addr_.rows(j0, n, k);
    v_addr_.rows(j0, n, v);
  }
  std::int64_t row_bytes() const { return std::max(k_row_bytes_, v_row_bytes_); }

  // `prefetch`: rows of a later block to load while this one is attended.
  bool attend_block(const PrefetchRows& prefetch) {
    if (j0_ >= item_.kv_end) return false;
    const std::int64_t j0 = j0_;
    const std::int64_t nk = std::min<std::int64_t>(kKeyBlock, item_.kv_end - j0);
    j0_ += nk;  // <= kv_end: never past INT32_MAX
    const TileClass tile =
        mask_.classify(tok_first_, tok_last_, std::int32_t(j0), std::int32_t(j0 + nk));
    if (tile == TileClass::kEmpty) return true;
    k_addr_.rows(j0, nk, b_.k_rows);
    v_addr_.rows(j0, nk, b_.v_rows);
    if (!direct_) {
      // Keys and values converted once per block and shared by every row of the tile.
      for (std::int64_t j = 0; j < nk; ++j) {
        float* kj = b_.kb + std::size_t(j) * dqk_;
        float* vj = b_.vb + std::size_t(j) * dvo_;
        kern_.load_row(b_.k_rows[j], pr_.kv_dtype, kj, dqk_);
        if (rope_) apply_rope(kj, dqk_, j0 + j, pr_.rope_rcp_scale, pr_.rope_rcp_theta);
        kern_.load_row(b_.v_rows[j], pr_.kv_dtype, vj, dvo_);
        b_.k_rows[j] = kj;
        b_.v_rows[j] = vj;
      }
    }
    // Half the prefetches go with the scores, half with the values.
    const std::int64_t half = prefetch.count / 2;
    kern_.block_scores(b_.q, dqk_, nrows_, b_.k_rows, block_dtype_, nk, dqk_, b_.s, kLds,
                       {prefetch.rows, half, prefetch.row_bytes});
    for (std::int32_t i = 0; i < nrows_; ++i) {
      float* si = b_.s + std::size_t(i) * kLds;
      if (!fold_scale_ || tile == TileClass::kPartial) {
        const std::int64_t i_pos = mask_.diagonal(b_.token[i]);
        for (std::int64_t j = 0; j < nk; ++j) {
          float score = si[j];
          if (!fold_scale_) {
            score *= p_.sm_scale;
            if (alibi_) score += b_.slope[i] * float(j0 + j - i_pos);
            if (soft_cap_) score = pr_.logits_soft_cap * std::tanh(score / pr_.logits_soft_cap);
            score *= kLog2e;
          }
          if (tile == TileClass::kPartial && !mask_.visible(b_.token[i], std::int32_t(j0 + j))) score = kNegInf;
          si[j] = score;
        }
      }
      for (std::int64_t j = nk; j < keys_padded(nk); ++j) si[j] = kNegInf;
    }
    kern_.block_softmax(b_.s, kLds, nrows_, nk, b_.m, b_.d, b_.rescale);
    kern_.block_accumulate(b_.s, kLds, nrows_, b_.v_rows, block_dtype_, nk, dvo_, b_.acc, dvo_, b_.rescale,
                           {prefetch.rows + half, prefetch.count - half, prefetch.row_bytes});
    return true;
  }

  // The final output, or a partial state of this chunk. A row poisoned by a
  // non-finite logit has d = NaN: its o and LSE come out NaN.
  void finish() {
    const bool split = r_.num_chunks > 1;
    for (std::int32_t i = 0; i < nrows_; ++i) {
      const float* ai = b_.acc + std::size_t(i) * dvo_;
      const bool empty = b_.d[i] == 0.0f;
      const float norm = empty ? 0.0f : p_.v_scale / b_.d[i];
      const float lse = empty ? kNegInf : b_.m[i] + std::log2(b_.d[i]);
      if (split) {
        const std::int64_t prow = r_.partial_begin + std::int64_t(item_.chunk) * r_.qo_len + b_.token[i];
        float* po = p_.schedule.partial_o + (prow * pr_.num_qo_heads + b_.head[i]) * dvo_;
        for (std::int64_t d = 0; d < dvo_; ++d) po[d] = ai[d] * norm;
        p_.schedule.partial_lse[prow * pr_.num_qo_heads + b_.head[i]] = lse;
        continue;
      }
      for (std::int64_t d = 0; d < dvo_; ++d) b_.out_row[d] = ai[d] * norm;
      const std::int64_t orow = r_.qo_begin + b_.token[i];
      auto* dst = static_cast<char*>(p_.o.data()) +
                  (orow * p_.o.stride(0) + b_.head[i] * p_.o.stride(1)) * std::int64_t(p_.o.element_size());
      kern_.store_row(b_.out_row, pr_.o_dtype, dst, dvo_);
      if (p_.lse.defined())
        p_.lse.data_as<float>()[orow * p_.lse.stride(0) + b_.head[i] * p_.lse.stride(1)] = lse;
    }
  }

 private:
  const AttentionParams& p_;
  const detail::AttentionProblem& pr_;
  const WorkItem& item_;
  const RequestInfo& r_;
  const CpuKernels& kern_;
  const std::int64_t dqk_, dvo_;
  const std::int32_t nrows_;
  const bool rope_, alibi_, soft_cap_;
  const bool fold_scale_;  // without ALiBi or a soft cap, sm_scale * log2(e) is folded into q once
  // Few query rows (decode, small GQA groups) read keys and values straight from the
  // cache, widening them in registers; many rows (prefill) share a float32 copy of the
  // block instead of widening each key once per row tile. RoPE rotates keys in that copy.
  const bool direct_;
  const DType block_dtype_;
  const KeyAddress k_addr_, v_addr_;
  const std::int64_t k_row_bytes_, v_row_bytes_;
  ItemBuffers b_;
  detail::RequestMask mask_;
  std::int64_t j0_;
  std::int32_t tok_first_ = 0, tok_last_ = 0;
};

// Work items of one request that differ only in their KV head, run together block
// by block: with NHD pages the heads of a token are adjacent, so the group reads
// each page's rows as one contiguous stretch instead of 256-byte pieces far apart
// (memory-bound decode gains from the locality). Each item's arithmetic is unchanged.
//
// The schedule lays a request's items out KV head by KV head (make_items), so the
// items of one cell (row tile, chunk) are `stride` apart. Heads are cut into `parts`
// even runs; the first item of a run leads it. Which items form a group is decided
// by comparing the leader with each member, so that leader and member agree, and an
// item that matches no leader runs alone: nothing needs an index array.
class Grouping {
 public:
  Grouping(const AttentionParams& p, std::int64_t num_items)
      : p_(p),
        num_items_(num_items),
        heads_(p.problem.num_kv_heads),
        group_(p.problem.group_size()),
        rope_(p.problem.pos_encoding == PosEncoding::kRopeLlama) {
    // Groups as large as the heads allow (locality), but at least one per thread.
    const std::int64_t max_group =
        std::clamp<std::int64_t>(num_items / std::int64_t(num_threads()), 1, std::min<std::int64_t>(heads_, kMaxGroup));
    parts_ = (heads_ + max_group - 1) / max_group;
    enabled_ = max_group > 1;
  }

  // The items of the group item i leads, into `out` (the leader first); 0 when
  // another item leads it.
  std::int32_t members(std::int64_t i, std::int32_t* out) const {
    const WorkItem& it = p_.schedule.items[i];
    out[0] = std::int32_t(i);
    if (!groupable(it)) return 1;
    const std::int64_t h = it.kv_head;
    // The run of heads [start(part), start(part + 1)) holding h: start(part) is the
    // first start >= h.
    const std::int64_t part = (h * parts_ + heads_ - 1) / heads_;
    const std::int64_t stride = cell_stride(it);
    if (start(part) != h) {
      const std::int64_t k = h - start(part - 1);  // h is the k-th head of the run before
      const std::int64_t leader = i - k * stride;
      return leader >= 0 && same_cell(p_.schedule.items[leader], it, k) ? 0 : 1;
    }
    std::int32_t n = 1;
    for (std::int64_t k = 1; k < start(part + 1) - h; ++k) {
      const std::int64_t j = i + k * stride;
      if (j < num_items_ && same_cell(it, p_.schedule.items[j], k)) out[n++] = std::int32_t(j);
    }
    return n;
  }

 private:
  bool groupable(const WorkItem& it) const {
    return enabled_ && !rope_ && it.row_end - it.row_begin <= kDirectRows;
  }
  std::int64_t start(std::int64_t part) const { return heads_ * part / parts_; }
  // Items between one KV head's item of a cell and the next head's: the request's
  // row tiles times its chunks.
  std::int64_t cell_stride(const WorkItem& it) const {
    const RequestInfo& r = p_.schedule.requests[it.request];
    const std::int64_t rows = std::int64_t(r.qo_len) * group_;
    return std::max<std::int64_t>(1, (rows + p_.q_tile_rows - 1) / p_.q_tile_rows) * r.num_chunks;
  }
  // `m` is the item of head leader.kv_head + k of the leader's cell.
  bool same_cell(const WorkItem& leader, const WorkItem& m, std::int64_t k) const {
    return groupable(leader) && groupable(m) && m.request == leader.request &&
           m.kv_head == leader.kv_head + k && m.row_begin == leader.row_begin && m.row_end == leader.row_end &&
           m.kv_begin == leader.kv_begin && m.kv_end == leader.kv_end;
  }

  const AttentionParams& p_;
  std::int64_t num_items_, heads_, group_;
  bool rope_;
  std::int64_t parts_ = 1;
  bool enabled_ = false;
};

// Runs the items of a group block by block. While item i attends its block, the
// i-th slice of the next block's rows is prefetched for every item of the group,
// key-major: with NHD pages that walks each page front to back, which the memory
// system serves at streaming speed, where each item alone would read 256-byte
// pieces 2 KB apart (half the bandwidth, measured). The kernels spread the
// prefetches over their loops, so the loads overlap the arithmetic.
void run_group(const AttentionParams& p, const std::int32_t* items, std::int32_t count, Scratch& scratch) {
  const WorkItem& first_item = p.schedule.items[items[0]];
  const std::int64_t rows = first_item.row_end - first_item.row_begin;
  scratch.begin(std::size_t(count) *
                    ItemBuffers::bytes(rows, p.problem.head_dim_qk, p.problem.head_dim_vo,
                                       ItemRun::direct(p.problem, rows)) +
                group_rows_bytes(count));
  std::optional<ItemRun> runs[kMaxGroup];
  for (std::int32_t i = 0; i < count; ++i) runs[i].emplace(p, p.schedule.items[items[i]], scratch);
  const std::int64_t kv_end = runs[0]->kv_end();
  // Row lists: per item (K then V, kKeyBlock each), and all items' rows key-major.
  const void** per_item = scratch.take<const void*>(std::size_t(count) * 2 * kKeyBlock);
  const void** rows_list = scratch.take<const void*>(std::size_t(count) * 2 * kKeyBlock);
  const auto list_rows = [&](std::int64_t first) {
    const std::int64_t n = std::max<std::int64_t>(0, std::min<std::int64_t>(kKeyBlock, kv_end - first));
    for (std::int32_t h = 0; h < count; ++h) {
      const void** k = per_item + std::size_t(h) * 2 * kKeyBlock;
      runs[h]->rows(first, n, k, k + kKeyBlock);
    }
    std::int64_t o = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int32_t h = 0; h < count; ++h) rows_list[o++] = per_item[std::size_t(h) * 2 * kKeyBlock + j];
      for (std::int32_t h = 0; h < count; ++h)
        rows_list[o++] = per_item[std::size_t(h) * 2 * kKeyBlock + kKeyBlock + j];
    }
    return PrefetchRows{rows_list, o, runs[0]->row_bytes()};
  };
  {
    // The first block has nothing to hide behind.
    const PrefetchRows first = list_rows(runs[0]->next_key());
    for (std::int64_t i = 0; i < first.count; ++i) {
      for (std::int64_t b = 0; b < first.row_bytes; b += 64)
        __builtin_prefetch(static_cast<const char*>(first.rows[i]) + b);
    }
  }
  while (runs[0]->next_key() < kv_end) {
    // The block after the next one; none past the item's last key (and so past the
    // request's last page).
    const PrefetchRows next = list_rows(runs[0]->next_key() + kKeyBlock);
    for (std::int32_t i = 0; i < count; ++i) {
      const std::int64_t lo = next.count * i / count, hi = next.count * (i + 1) / count;
      runs[i]->attend_block({next.rows + lo, hi - lo, next.row_bytes});
    }
  }
  for (std::int32_t i = 0; i < count; ++i) runs[i]->finish();
}

// Merges the chunks of one split query row, in chunk order, for every head. A
// chunk whose LSE is NaN (a row poisoned by a non-finite logit) makes the row NaN.
void merge_token(const AttentionParams& p, const detail::MergeToken& mt, Scratch& scratch) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.schedule.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const std::int64_t dvo = pr.head_dim_vo;
  scratch.begin(Scratch::bytes_for<float>(std::size_t(dvo)));
  float* out = scratch.take<float>(std::size_t(dvo));
  for (std::int64_t h = 0; h < pr.num_qo_heads; ++h) {
    float m = kNegInf;
    bool nan = false;
    for (std::int32_t c = 0; c < r.num_chunks; ++c) {
      const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
      const float lse = p.schedule.partial_lse[prow * pr.num_qo_heads + h];
      nan |= std::isnan(lse);
      m = std::max(m, lse);
    }
    std::fill(out, out + dvo, nan ? kNaN : 0.0f);
    float d = nan ? kNaN : 0.0f;
    if (!nan && m != kNegInf) {
      for (std::int32_t c = 0; c < r.num_chunks; ++c) {
        const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
        const float w = std::exp2(p.schedule.partial_lse[prow * pr.num_qo_heads + h] - m);
        if (w == 0.0f) continue;
        const float* po = p.schedule.partial_o + (prow * pr.num_qo_heads + h) * dvo;
        for (std::int64_t k = 0; k < dvo; ++k) out[k] += w * po[k];
        d += w;
      }
      for (std::int64_t k = 0; k < dvo; ++k) out[k] /= d;
    }
    auto* dst = static_cast<char*>(p.o.data()) +
                (mt.row * p.o.stride(0) + h * p.o.stride(1)) * std::int64_t(p.o.element_size());
    store_row(out, pr.o_dtype, dst, dvo);
    if (p.lse.defined()) {
      p.lse.data_as<float>()[mt.row * p.lse.stride(0) + h * p.lse.stride(1)] =
          nan ? kNaN : (m == kNegInf ? kNegInf : m + std::log2(d));
    }
  }
}

}  // namespace

std::size_t attention_scratch_bytes(const detail::AttentionProblem& pr, std::int64_t q_tile_rows) {
  const std::int64_t dqk = pr.head_dim_qk, dvo = pr.head_dim_vo;
  // One item of a full tile alone, or a group of direct items of up to kDirectRows.
  const std::int64_t group = std::min<std::int64_t>(pr.num_kv_heads, kMaxGroup);
  const std::int64_t direct_rows = std::min<std::int64_t>(q_tile_rows, kDirectRows);
  const std::size_t alone = ItemBuffers::bytes(q_tile_rows, dqk, dvo, ItemRun::direct(pr, q_tile_rows)) +
                            group_rows_bytes(1);
  const std::size_t grouped =
      std::size_t(group) * ItemBuffers::bytes(direct_rows, dqk, dvo, ItemRun::direct(pr, direct_rows)) +
      group_rows_bytes(group);
  const std::size_t merge = Scratch::bytes_for<float>(std::size_t(dvo));
  // merge_state_in_place of a cascade's levels: two rows.
  return std::max({alone, grouped, merge, 2 * merge});
}

void CpuBackend::run_attention(const AttentionParams& p) const {
  const std::int64_t num_items = p.schedule.counts[0], num_merge = p.schedule.counts[1];
  const Grouping grouping(p, num_items);
  parallel_for(num_items, [&](std::int64_t i, Scratch& scratch) {
    std::int32_t members[kMaxGroup];
    const std::int32_t count = grouping.members(i, members);
    if (count > 0) run_group(p, members, count, scratch);
  });
  parallel_for(num_merge, [&](std::int64_t i, Scratch& scratch) {
    merge_token(p, p.schedule.merge_tokens[i], scratch);
  });
}

}  // namespace kvinfer::cpu
