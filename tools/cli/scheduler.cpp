// SPDX-License-Identifier: Apache-2.0
#include "scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "input_error.hpp"

namespace kvinfer::cli {
namespace {

std::int32_t ceil_div(std::int64_t a, std::int64_t b) {
  return std::int32_t((a + b - 1) / b);
}

}  // namespace

std::int64_t StepBatch::prefill_tokens() const {
  std::int64_t n = 0;
  for (const PrefillWork& w : prefill) n += w.qo_len;
  return n;
}

Scheduler::Scheduler(const Trace& trace, const SchedulerOptions& options, PageAllocator& pages)
    : trace_(trace),
      opt_(options),
      pool_(pages),
      seqs_(trace.requests.size()),
      prefixes_(trace.prefix_groups.size()),
      times_(trace.requests.size()) {
  for (std::size_t i = 0; i < trace_.requests.size(); ++i) {
    const TraceRequest& r = trace_.requests[i];
    const std::int32_t need = pages_needed(i);
    if (need > pool_.num_pages()) {
      throw InputError(
          fmt::format("out of pages: request {} ({} prompt + {} generated tokens) needs {} pages of {} "
                      "tokens, the pool has {} "
                      "(raise --num-pages or --kv-memory, or shorten the trace)",
                      i, r.prompt_len, r.gen_len, need, opt_.page_size, pool_.num_pages()));
    }
  }
}

// Only whole pages are shared: a page after the prefix holds one request's tokens.
std::int32_t shared_len(const TraceRequest& r, const SchedulerOptions& o) {
  if (!o.share_prefixes || r.prefix_group < 0) return 0;
  return r.prefix_len / o.page_size * o.page_size;
}

std::int32_t Scheduler::shared_len_of(const TraceRequest& r) const {
  return shared_len(r, opt_);
}

std::int32_t pages_needed(const TraceRequest& r, const SchedulerOptions& o) {
  const std::int32_t shared = shared_len(r, o);
  const std::int64_t own_tokens = std::int64_t(r.prompt_len) + r.gen_len - 1 - shared;
  return shared / o.page_size + ceil_div(own_tokens, o.page_size);
}

std::vector<std::int32_t> Scheduler::pages_of(const Sequence& s) const {
  std::vector<std::int32_t> pages;
  if (s.group >= 0) pages = prefixes_[std::size_t(s.group)]->pages;
  pages.insert(pages.end(), s.own_pages.begin(), s.own_pages.end());
  return pages;
}

std::int64_t Scheduler::outstanding_reservations() const {
  std::int64_t n = 0;
  for (const auto& s : seqs_) {
    if (s) n += s->max_own_pages - std::int64_t(s->own_pages.size());
  }
  return n;
}

StepBatch Scheduler::next_step(double now_s) {
  // Nothing to do until the next arrival: jump there.
  if (running_.empty() && waiting_.empty() && next_arrival_ < trace_.requests.size()) {
    step_ = std::max(step_, trace_.requests[next_arrival_].arrival);
  }
  while (next_arrival_ < trace_.requests.size() && trace_.requests[next_arrival_].arrival <= step_) {
    times_[next_arrival_].arrival_step = step_;
    times_[next_arrival_].arrival_s = now_s;
    waiting_.push_back(std::int32_t(next_arrival_++));
  }

  StepBatch batch;
  batch.step = step_;

  // Decode: one new token per running request, in a fresh page when the last is full.
  for (std::int32_t id : running_) {
    Sequence& s = *seqs_[std::size_t(id)];
    const std::int32_t own_tokens = s.kv_len - s.shared_len;
    if (own_tokens == std::int32_t(s.own_pages.size()) * opt_.page_size)
      s.own_pages.push_back(pool_.allocate());
    ++s.kv_len;
    DecodeWork w;
    w.sequence = id;
    w.group = s.group;
    w.shared_pages = s.shared_len / opt_.page_size;
    w.kv_len = s.kv_len;
    w.pages = pages_of(s);
    batch.decode.push_back(std::move(w));
  }

  // Admission in arrival order while the batch, the prefill budget and the pages
  // allow; a request only starts when every page it will ever need is available, so
  // running requests never stall for pages.
  std::int64_t prefill_tokens = 0;
  std::int64_t free_after = std::int64_t(pool_.free_pages()) - outstanding_reservations();
  while (!waiting_.empty() &&
         std::int64_t(running_.size()) + std::int64_t(batch.prefill.size()) < opt_.max_batch) {
    const std::int32_t id = waiting_.front();
    const TraceRequest& r = trace_.requests[std::size_t(id)];
    const std::int32_t shared = shared_len_of(r);
    const std::int32_t group = shared > 0 ? r.prefix_group : -1;
    const bool new_prefix = group >= 0 && !prefixes_[std::size_t(group)].has_value();
    const std::int32_t prefix_pages = new_prefix ? shared / opt_.page_size : 0;
    const std::int32_t own_max = pages_needed(std::size_t(id)) - shared / opt_.page_size;
    const std::int64_t tokens = (r.prompt_len - shared) + (new_prefix ? shared : 0);
    if (!batch.prefill.empty() && prefill_tokens + tokens > opt_.max_prefill_tokens) break;
    if (free_after < std::int64_t(own_max) + prefix_pages) break;
    waiting_.pop_front();
    prefill_tokens += tokens;
    free_after -= std::int64_t(own_max) + prefix_pages;

    if (new_prefix) {
      Prefix& p = prefixes_[std::size_t(group)].emplace();
      p.len = shared;
      for (std::int32_t i = 0; i < prefix_pages; ++i) p.pages.push_back(pool_.allocate());
      batch.prefill.push_back(PrefillWork{-1, group, shared, shared, p.pages});
    }
    Sequence& s = seqs_[std::size_t(id)].emplace();
    s.group = group;
    s.shared_len = shared;
    s.max_own_pages = own_max;
    if (group >= 0) {
      Prefix& p = *prefixes_[std::size_t(group)];
      ++p.live_members;
      for (std::int32_t page : p.pages) pool_.retain(page);
    }
    for (std::int32_t i = 0; i < ceil_div(r.prompt_len - shared, opt_.page_size); ++i) {
      s.own_pages.push_back(pool_.allocate());
    }
    s.kv_len = r.prompt_len;
    batch.prefill.push_back(PrefillWork{id, group, r.prompt_len - shared, r.prompt_len, pages_of(s)});
  }
  ++step_;
  return batch;
}

void Scheduler::finish(std::int32_t id, double now_s) {
  Sequence& s = *seqs_[std::size_t(id)];
  pool_.release(s.own_pages);
  if (s.group >= 0) {
    auto& prefix = prefixes_[std::size_t(s.group)];
    pool_.release(prefix->pages);  // this member's reference
    if (--prefix->live_members == 0) {
      pool_.release(prefix->pages);  // the prefix's own reference: the pages return to the pool
      prefix.reset();
    }
  }
  seqs_[std::size_t(id)].reset();
  times_[std::size_t(id)].finish_step = step_ - 1;
  times_[std::size_t(id)].finish_s = now_s;
  ++num_finished_;
}

void Scheduler::complete_step(const StepBatch& batch, double now_s) {
  std::vector<std::int32_t> still_running;
  for (const DecodeWork& w : batch.decode) {
    Sequence& s = *seqs_[std::size_t(w.sequence)];
    if (++s.generated == trace_.requests[std::size_t(w.sequence)].gen_len) {
      finish(w.sequence, now_s);
    } else {
      still_running.push_back(w.sequence);
    }
  }
  for (const PrefillWork& w : batch.prefill) {
    if (w.sequence < 0) continue;
    Sequence& s = *seqs_[std::size_t(w.sequence)];
    s.generated = 1;  // prefill's last row yields the first token
    times_[std::size_t(w.sequence)].first_token_step = batch.step;
    times_[std::size_t(w.sequence)].first_token_s = now_s;
    if (trace_.requests[std::size_t(w.sequence)].gen_len == 1) {
      finish(w.sequence, now_s);
    } else {
      still_running.push_back(w.sequence);
    }
  }
  running_ = std::move(still_running);
}

}  // namespace kvinfer::cli
