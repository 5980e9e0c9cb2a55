// SPDX-License-Identifier: Apache-2.0
// CPU execution of a planned attention call. Each work item attends a tile of
// packed query rows (tokens x heads of one KV-head group) to a chunk of keys with
// an online base-2 softmax in float32, one block of keys at a time through the
// vectorised loops of cpu/kernels.hpp; split requests are merged afterwards in the
// order of their chunks, so results do not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

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
constexpr std::int32_t kKeyBlock = 32;   // keys attended per online-softmax step
constexpr std::int32_t kDirectRows = 8;  // up to this many query rows read K/V rows in place
constexpr std::int32_t kMaxGroup = 16;   // work items run together (KV heads of one request)

// Where key j of a request's KV head lives.
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
  const void* operator()(std::int32_t j) const {
    if (!paged_) return base_ + j * token_stride_ * elem_;
    const std::int64_t page = pages_[j / page_size_];
    return base_ + (page * page_stride_ + (j % page_size_) * token_stride_) * elem_;
  }
  // Rows of keys [j0, j0 + n) into out[0, n): one division per call instead of one
  // per key (a division costs more than attending a key's share of a cache line).
  void rows(std::int32_t j0, std::int32_t n, const void** out) const {
    const std::int64_t token_bytes = token_stride_ * elem_;
    if (!paged_) {
      for (std::int32_t i = 0; i < n; ++i) out[i] = base_ + (j0 + i) * token_bytes;
      return;
    }
    std::int64_t page = j0 / page_size_, slot = j0 % page_size_;
    const char* row = base_ + (pages_[page] * page_stride_ + slot * token_stride_) * elem_;
    for (std::int32_t i = 0; i < n; ++i) {
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

// Buffers of one work item in flight, grown on first use and then reused, so that
// a run allocates nothing once the threads have seen its shapes.
struct ItemScratch {
  std::vector<float> q, acc, kb, vb, s, m, d, rescale, slope, out_row;
  std::vector<std::int32_t> token, head;
  std::vector<const void*> k_rows, v_rows;

  template <class T>
  static T* take(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

// The scratch of the items one thread runs together.
ItemScratch* thread_scratch(std::size_t n) {
  thread_local std::vector<ItemScratch> s;
  if (s.size() < n) s.resize(n);
  return s.data();
}

// One work item: its query rows are loaded at construction, attend_block() attends
// the next block of keys with one online-softmax step, finish() writes the output or
// the chunk's partial state.
class ItemRun {
 public:
  ItemRun(const AttentionParams& p, const WorkItem& item, ItemScratch& sc)
      : p_(p),
        pr_(p.problem),
        item_(item),
        r_(p.requests[item.request]),
        kern_(kernels()),
        dqk_(pr_.head_dim_qk),
        dvo_(pr_.head_dim_vo),
        nrows_(item.row_end - item.row_begin),
        rope_(pr_.pos_encoding == PosEncoding::kRopeLlama),
        alibi_(pr_.pos_encoding == PosEncoding::kAlibi),
        soft_cap_(pr_.logits_soft_cap > 0.0f),
        fold_scale_(!alibi_ && !soft_cap_),
        direct_(nrows_ <= kDirectRows && !rope_),
        block_dtype_(direct_ ? pr_.kv_dtype : DType::kF32),
        k_addr_(p, p.k, r_, item.kv_head),
        v_addr_(p, p.v, r_, item.kv_head),
        k_row_bytes_(dqk_ * std::int64_t(p.k.element_size())),
        v_row_bytes_(dvo_ * std::int64_t(p.v.element_size())),
        j0_(item.kv_begin) {
    mask_.causal = pr_.mask_mode == MaskMode::kCausal;
    mask_.window_left = pr_.window_left;
    mask_.custom = (pr_.mask_mode == MaskMode::kCustom) ? p.custom_mask + r_.mask_offset : nullptr;
    mask_.qo_len = r_.qo_len;
    mask_.kv_len = r_.kv_len;

    const std::size_t rows = std::size_t(nrows_);
    q_ = ItemScratch::take(sc.q, rows * dqk_);
    acc_ = ItemScratch::take(sc.acc, rows * dvo_);
    s_ = ItemScratch::take(sc.s, rows * kLds);
    row_max_ = ItemScratch::take(sc.m, rows);
    row_sum_ = ItemScratch::take(sc.d, rows);
    rescale_ = ItemScratch::take(sc.rescale, rows);
    slope_ = ItemScratch::take(sc.slope, rows);
    token_ = ItemScratch::take(sc.token, rows);
    head_ = ItemScratch::take(sc.head, rows);
    k_rows_ = ItemScratch::take(sc.k_rows, std::size_t(kKeyBlock));
    v_rows_ = ItemScratch::take(sc.v_rows, std::size_t(kKeyBlock));
    out_row_ = ItemScratch::take(sc.out_row, std::size_t(dvo_));
    if (!direct_) {
      kb_ = ItemScratch::take(sc.kb, std::size_t(kKeyBlock) * dqk_);
      vb_ = ItemScratch::take(sc.vb, std::size_t(kKeyBlock) * dvo_);
    }
    std::fill(acc_, acc_ + rows * dvo_, 0.0f);
    std::fill(row_max_, row_max_ + rows, kNegInf);
    std::fill(row_sum_, row_sum_ + rows, 0.0f);

    // Query rows of the tile: token t = row / group, qo head = kv_head * group + row % group.
    const std::int64_t group = pr_.group_size();
    for (std::int32_t i = 0; i < nrows_; ++i) {
      const std::int32_t row = item.row_begin + i;
      token_[i] = std::int32_t(row / group);
      head_[i] = std::int32_t(item.kv_head * group + row % group);
      const auto* src = static_cast<const char*>(p.q.data()) +
                        ((r_.qo_begin + token_[i]) * p.q.stride(0) + head_[i] * p.q.stride(1)) *
                            std::int64_t(p.q.element_size());
      float* qi = q_ + std::size_t(i) * dqk_;
      kern_.load_row(src, pr_.q_dtype, qi, dqk_);
      if (rope_) apply_rope(qi, dqk_, mask_.diagonal(token_[i]), pr_.rope_rcp_scale, pr_.rope_rcp_theta);
      if (fold_scale_) {
        for (std::int64_t d = 0; d < dqk_; ++d) qi[d] *= p.sm_scale * kLog2e;
      }
      slope_[i] = alibi_ ? p.alibi_slopes[head_[i]] : 0.0f;
    }
    tok_first_ = token_[0];
    tok_last_ = token_[nrows_ - 1] + 1;
  }

  // The first key of the next block, and the end of the item's keys.
  std::int32_t next_key() const { return j0_; }
  std::int32_t kv_end() const { return item_.kv_end; }

  // Where the K and V rows of keys [j0, j0 + n) are, and their sizes.
  void rows(std::int32_t j0, std::int32_t n, const void** k, const void** v) const {
    k_addr_.rows(j0, n, k);
    v_addr_.rows(j0, n, v);
  }
  std::int64_t row_bytes() const { return std::max(k_row_bytes_, v_row_bytes_); }

  // `prefetch`: rows of a later block to load while this one is attended.
  bool attend_block(const PrefetchRows& prefetch) {
    if (j0_ >= item_.kv_end) return false;
    const std::int32_t j0 = j0_;
    const std::int32_t nk = std::min(kKeyBlock, item_.kv_end - j0);
    j0_ += kKeyBlock;
    const TileClass tile = mask_.classify(tok_first_, tok_last_, j0, j0 + nk);
    if (tile == TileClass::kEmpty) return true;
    k_addr_.rows(j0, nk, k_rows_);
    v_addr_.rows(j0, nk, v_rows_);
    if (!direct_) {
      // Keys and values converted once per block and shared by every row of the tile.
      for (std::int32_t j = 0; j < nk; ++j) {
        float* kj = kb_ + std::size_t(j) * dqk_;
        float* vj = vb_ + std::size_t(j) * dvo_;
        kern_.load_row(k_rows_[j], pr_.kv_dtype, kj, dqk_);
        if (rope_) apply_rope(kj, dqk_, j0 + j, pr_.rope_rcp_scale, pr_.rope_rcp_theta);
        kern_.load_row(v_rows_[j], pr_.kv_dtype, vj, dvo_);
        k_rows_[j] = kj;
        v_rows_[j] = vj;
      }
    }
    // Half the prefetches go with the scores, half with the values.
    const std::int64_t half = prefetch.count / 2;
    kern_.block_scores(q_, dqk_, nrows_, k_rows_, block_dtype_, nk, dqk_, s_, kLds,
                       {prefetch.rows, half, prefetch.row_bytes});
    for (std::int32_t i = 0; i < nrows_; ++i) {
      float* si = s_ + std::size_t(i) * kLds;
      if (!fold_scale_ || tile == TileClass::kPartial) {
        const std::int32_t i_pos = mask_.diagonal(token_[i]);
        for (std::int32_t j = 0; j < nk; ++j) {
          float score = si[j];
          if (!fold_scale_) {
            score *= p_.sm_scale;
            if (alibi_) score += slope_[i] * float(j0 + j - i_pos);
            if (soft_cap_) score = pr_.logits_soft_cap * std::tanh(score / pr_.logits_soft_cap);
            score *= kLog2e;
          }
          if (tile == TileClass::kPartial && !mask_.visible(token_[i], j0 + j)) score = kNegInf;
          si[j] = score;
        }
      }
      for (std::int64_t j = nk; j < keys_padded(nk); ++j) si[j] = kNegInf;
    }
    kern_.block_softmax(s_, kLds, nrows_, nk, row_max_, row_sum_, rescale_);
    kern_.block_accumulate(s_, kLds, nrows_, v_rows_, block_dtype_, nk, dvo_, acc_, dvo_, rescale_,
                           {prefetch.rows + half, prefetch.count - half, prefetch.row_bytes});
    return true;
  }

  // The final output, or a partial state of this chunk.
  void finish() {
    const bool split = r_.num_chunks > 1;
    for (std::int32_t i = 0; i < nrows_; ++i) {
      const float* ai = acc_ + std::size_t(i) * dvo_;
      const bool empty = row_sum_[i] == 0.0f;
      const float norm = empty ? 0.0f : p_.v_scale / row_sum_[i];
      const float lse = empty ? kNegInf : row_max_[i] + std::log2(row_sum_[i]);
      if (split) {
        const std::int64_t prow = r_.partial_begin + std::int64_t(item_.chunk) * r_.qo_len + token_[i];
        float* po = p_.partial_o + (prow * pr_.num_qo_heads + head_[i]) * dvo_;
        for (std::int64_t d = 0; d < dvo_; ++d) po[d] = ai[d] * norm;
        p_.partial_lse[prow * pr_.num_qo_heads + head_[i]] = lse;
        continue;
      }
      for (std::int64_t d = 0; d < dvo_; ++d) out_row_[d] = ai[d] * norm;
      const std::int64_t orow = r_.qo_begin + token_[i];
      auto* dst = static_cast<char*>(p_.o.data()) +
                  (orow * p_.o.stride(0) + head_[i] * p_.o.stride(1)) * std::int64_t(p_.o.element_size());
      kern_.store_row(out_row_, pr_.o_dtype, dst, dvo_);
      if (p_.lse.defined())
        p_.lse.data_as<float>()[orow * p_.lse.stride(0) + head_[i] * p_.lse.stride(1)] = lse;
    }
  }

 private:
  // Score rows are padded to whole vectors; the padding stays -inf.
  static constexpr std::int64_t kLds = keys_padded(kKeyBlock);

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
  detail::RequestMask mask_;
  std::int32_t j0_;
  std::int32_t tok_first_ = 0, tok_last_ = 0;
  float *q_, *acc_, *s_, *row_max_, *row_sum_, *rescale_, *slope_, *out_row_;
  float *kb_ = nullptr, *vb_ = nullptr;
  std::int32_t *token_, *head_;
  const void** k_rows_;
  const void** v_rows_;
};

// Work items of one request that differ only in their KV head, run together block
// by block: with NHD pages the heads of a token are adjacent, so the group reads
// each page's rows as one contiguous stretch instead of 256-byte pieces far apart
// (memory-bound decode gains from the locality). Each item's arithmetic is unchanged.
struct ItemGroup {
  std::int32_t begin, count;  // range of `order`
};

struct Grouping {
  std::vector<std::int32_t> order;  // item indices, grouped
  std::vector<ItemGroup> groups;
};

const Grouping& group_items(const AttentionParams& p, std::int64_t num_items) {
  thread_local Grouping g;
  g.order.clear();
  g.groups.clear();
  // Groups as large as the heads allow (locality), but at least one per thread.
  const std::int64_t max_group = std::clamp<std::int64_t>(
      num_items / std::int64_t(num_threads()), 1, std::min<std::int64_t>(p.problem.num_kv_heads, kMaxGroup));
  const bool rope = p.problem.pos_encoding == PosEncoding::kRopeLlama;
  auto groupable = [&](const WorkItem& it) {
    return max_group > 1 && !rope && it.row_end - it.row_begin <= kDirectRows;
  };
  for (std::int32_t i = 0; i < std::int32_t(num_items); ++i) g.order.push_back(i);
  const auto key = [&](std::int32_t i) {
    const WorkItem& it = p.items[i];
    // Items that cannot be grouped keep a key of their own (their index).
    return groupable(it) ? std::tuple(it.request, it.row_begin, it.kv_begin, -1, it.kv_head)
                         : std::tuple(it.request, it.row_begin, it.kv_begin, i, 0);
  };
  // std::sort allocates nothing (stable_sort would); the index breaks ties.
  std::sort(g.order.begin(), g.order.end(), [&](std::int32_t a, std::int32_t b) {
    const auto ka = key(a), kb = key(b);
    return ka < kb || (ka == kb && a < b);
  });
  for (std::int32_t k = 0; k < std::int32_t(g.order.size());) {
    // The run of items that may go together, cut into equal parts of at most max_group.
    const WorkItem& first = p.items[g.order[k]];
    std::int32_t n = 1;
    if (groupable(first)) {
      while (k + n < std::int32_t(g.order.size())) {
        const WorkItem& it = p.items[g.order[k + n]];
        if (!groupable(it) || it.request != first.request || it.row_begin != first.row_begin ||
            it.row_end != first.row_end || it.kv_begin != first.kv_begin || it.kv_end != first.kv_end) {
          break;
        }
        ++n;
      }
    }
    const std::int32_t parts = std::int32_t((n + max_group - 1) / max_group);
    for (std::int32_t i = 0; i < parts; ++i) {
      const std::int32_t b = n * i / parts, e = n * (i + 1) / parts;
      g.groups.push_back({k + b, e - b});
    }
    k += n;
  }
  return g;
}

// Runs the items of a group block by block. While item i attends its block, the
// i-th slice of the next block's rows is prefetched for every item of the group,
// key-major: with NHD pages that walks each page front to back, which the memory
// system serves at streaming speed, where each item alone would read 256-byte
// pieces 2 KB apart (half the bandwidth, measured). The kernels spread the
// prefetches over their loops, so the loads overlap the arithmetic.
void run_group(const AttentionParams& p, const std::int32_t* items, std::int32_t count) {
  ItemScratch* scratch = thread_scratch(std::size_t(count));
  std::optional<ItemRun> runs[kMaxGroup];
  for (std::int32_t i = 0; i < count; ++i) runs[i].emplace(p, p.items[items[i]], scratch[i]);
  const std::int32_t kv_end = runs[0]->kv_end();
  // Row lists: per item (K then V, kKeyBlock each), and all items' rows key-major.
  thread_local std::vector<const void*> row_storage;
  row_storage.resize(std::size_t(count) * 4 * kKeyBlock);
  const void** per_item = row_storage.data();
  const void** rows = per_item + std::size_t(count) * 2 * kKeyBlock;
  const auto list_rows = [&](std::int32_t first) {
    const std::int32_t n = std::max(0, std::min(kKeyBlock, kv_end - first));
    for (std::int32_t h = 0; h < count; ++h) {
      const void** k = per_item + std::size_t(h) * 2 * kKeyBlock;
      runs[h]->rows(first, n, k, k + kKeyBlock);
    }
    std::int64_t o = 0;
    for (std::int32_t j = 0; j < n; ++j) {
      for (std::int32_t h = 0; h < count; ++h) rows[o++] = per_item[std::size_t(h) * 2 * kKeyBlock + j];
      for (std::int32_t h = 0; h < count; ++h)
        rows[o++] = per_item[std::size_t(h) * 2 * kKeyBlock + kKeyBlock + j];
    }
    return PrefetchRows{rows, o, runs[0]->row_bytes()};
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
    const PrefetchRows next = list_rows(runs[0]->next_key() + kKeyBlock);
    for (std::int32_t i = 0; i < count; ++i) {
      const std::int64_t lo = next.count * i / count, hi = next.count * (i + 1) / count;
      runs[i]->attend_block({next.rows + lo, hi - lo, next.row_bytes});
    }
  }
  for (std::int32_t i = 0; i < count; ++i) runs[i]->finish();
}

// Merges the chunks of one split query row, in chunk order, for every head.
void merge_token(const AttentionParams& p, const detail::MergeToken& mt) {
  const auto& pr = p.problem;
  const RequestInfo& r = p.requests[mt.request];
  const std::int64_t t = mt.row - r.qo_begin;
  const std::int64_t dvo = pr.head_dim_vo;
  std::span<float> out(ItemScratch::take(thread_scratch(1)[0].out_row, std::size_t(dvo)), std::size_t(dvo));
  for (std::int64_t h = 0; h < pr.num_qo_heads; ++h) {
    float m = kNegInf;
    for (std::int32_t c = 0; c < r.num_chunks; ++c) {
      const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
      m = std::max(m, p.partial_lse[prow * pr.num_qo_heads + h]);
    }
    std::fill(out.begin(), out.end(), 0.0f);
    float d = 0.0f;
    if (m != kNegInf) {
      for (std::int32_t c = 0; c < r.num_chunks; ++c) {
        const std::int64_t prow = r.partial_begin + std::int64_t(c) * r.qo_len + t;
        const float w = std::exp2(p.partial_lse[prow * pr.num_qo_heads + h] - m);
        if (w == 0.0f) continue;
        const float* po = p.partial_o + (prow * pr.num_qo_heads + h) * dvo;
        for (std::int64_t k = 0; k < dvo; ++k) out[k] += w * po[k];
        d += w;
      }
      for (std::int64_t k = 0; k < dvo; ++k) out[k] /= d;
    }
    auto* dst = static_cast<char*>(p.o.data()) +
                (mt.row * p.o.stride(0) + h * p.o.stride(1)) * std::int64_t(p.o.element_size());
    store_row(out.data(), pr.o_dtype, dst, dvo);
    if (p.lse.defined()) {
      p.lse.data_as<float>()[mt.row * p.lse.stride(0) + h * p.lse.stride(1)] =
          m == kNegInf ? kNegInf : m + std::log2(d);
    }
  }
}

}  // namespace

void CpuBackend::run_attention(const AttentionParams& p) const {
  const std::int64_t num_items = p.counts[0], num_merge = p.counts[1];
  const Grouping& g = group_items(p, num_items);
  parallel_for(std::int64_t(g.groups.size()), [&](std::int64_t i) {
    const ItemGroup& grp = g.groups[std::size_t(i)];
    run_group(p, g.order.data() + grp.begin, grp.count);
  });
  parallel_for(num_merge, [&](std::int64_t i) { merge_token(p, p.merge_tokens[i]); });
}

}  // namespace kvinfer::cpu
