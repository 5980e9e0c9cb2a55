// SPDX-License-Identifier: Apache-2.0
// Continuous batching for `kvinfer serve`: each step admits waiting requests
// (within the batch, prefill-token and page budgets) for prefill, and decodes one
// token of every running request; it allocates the pages the step's new tokens
// land in and frees the pages of finished requests. Requests of a prefix group
// share the prefix's pages (reference counted), filled once by the first member.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "page_allocator.hpp"
#include "trace.hpp"

namespace kvinfer::cli {

struct SchedulerOptions {
  std::int32_t page_size = 16;
  std::int32_t max_batch = 32;             // requests running at once
  std::int32_t max_prefill_tokens = 2048;  // query rows of prefill per step (one request may exceed it alone)
  bool share_prefixes = true;              // false: every request stores its own copy of its prefix
};

// One query segment of a step's prefill batch.
struct PrefillWork {
  std::int32_t sequence = -1;  // index into the trace, or -1: the shared prefix of `group`, filled once
  std::int32_t group = -1;     // the prefix group whose pages lead `pages`, or -1
  std::int32_t qo_len = 0;     // new tokens (queries), the tail of the kv_len keys
  std::int32_t kv_len = 0;
  std::vector<std::int32_t> pages;  // ceil(kv_len / page_size) pages in order
};

// One request's decode row.
struct DecodeWork {
  std::int32_t sequence = -1;
  std::int32_t group = -1;        // the shared prefix group, or -1
  std::int32_t shared_pages = 0;  // leading entries of `pages` that belong to the group's prefix
  std::int32_t kv_len = 0;        // keys including the token appended this step
  std::vector<std::int32_t> pages;
};

struct StepBatch {
  std::int64_t step = 0;
  std::vector<PrefillWork> prefill;
  std::vector<DecodeWork> decode;
  std::int64_t prefill_tokens() const;
  std::int64_t new_tokens() const { return prefill_tokens() + std::int64_t(decode.size()); }
};

// Largest number of pages one request needs over its life, its prefix's pages
// included (the cache peaks at prompt + gen - 1 tokens: the last token is never fed back).
std::int32_t pages_needed(const TraceRequest& request, const SchedulerOptions& options);

// Per-request timeline, in steps and in seconds since the run started.
struct RequestTimes {
  std::int64_t arrival_step = -1, first_token_step = -1, finish_step = -1;
  double arrival_s = 0, first_token_s = 0, finish_s = 0;
};

class Scheduler {
 public:
  // Throws InputError when some request can never fit in the page pool.
  Scheduler(const Trace& trace, const SchedulerOptions& options, PageAllocator& pages);

  bool finished() const { return num_finished_ == std::int64_t(trace_.requests.size()); }
  // The next step's batch (empty steps, when nothing is running and the next
  // request has not arrived, are skipped). `now_s` stamps arrivals.
  StepBatch next_step(double now_s);
  // After the engine ran `batch`: one generated token per prefill request and per
  // decode row; finished requests release their pages.
  void complete_step(const StepBatch& batch, double now_s);

  std::int64_t num_waiting() const { return std::int64_t(waiting_.size()); }
  std::int64_t num_running() const { return std::int64_t(running_.size()); }
  std::int64_t num_finished() const { return num_finished_; }
  std::int64_t num_requests() const { return std::int64_t(trace_.requests.size()); }
  const std::vector<RequestTimes>& times() const { return times_; }

 private:
  struct Sequence {
    std::int32_t group = -1;      // shared prefix group, -1: none
    std::int32_t shared_len = 0;  // tokens in the group's pages (whole pages)
    std::vector<std::int32_t> own_pages;
    std::int32_t max_own_pages = 0;
    std::int32_t kv_len = 0;
    std::int32_t generated = 0;
  };
  struct Prefix {
    std::vector<std::int32_t> pages;
    std::int32_t len = 0;
    std::int32_t live_members = 0;
  };

  std::int32_t shared_len_of(const TraceRequest& r) const;
  std::int32_t pages_needed(std::size_t request) const {
    return cli::pages_needed(trace_.requests[request], opt_);
  }
  std::vector<std::int32_t> pages_of(const Sequence& s) const;
  std::int64_t outstanding_reservations() const;
  void finish(std::int32_t request, double now_s);

  const Trace& trace_;
  SchedulerOptions opt_;
  PageAllocator& pool_;
  std::int64_t step_ = 0;
  std::size_t next_arrival_ = 0;
  std::deque<std::int32_t> waiting_;
  std::vector<std::int32_t> running_;  // decoding requests, in admission order
  std::vector<std::optional<Sequence>> seqs_;
  std::vector<std::optional<Prefix>> prefixes_;  // per group: the live prefix
  std::vector<RequestTimes> times_;
  std::int64_t num_finished_ = 0;
};

}  // namespace kvinfer::cli
