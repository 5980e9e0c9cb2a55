// SPDX-License-Identifier: Apache-2.0
#include "cpu/thread_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "kvinfer/core/error.hpp"

namespace kvinfer::cpu {
namespace {

constexpr std::string_view kOp = "CPU thread pool";

std::atomic<int> g_start_limit{-1};
std::atomic<int> g_started{0};

// $KVINFER_NUM_THREADS, checked, or the hardware's thread count.
int default_threads() {
  const char* env = std::getenv("KVINFER_NUM_THREADS");
  if (env != nullptr && *env != '\0') {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(env, &end, 10);
    if (errno != 0 || end == env || *end != '\0' || n < 1 || n > kMaxThreads) {
      throw Error(kOp, "KVINFER_NUM_THREADS", env,
                  fmt::format("must be an integer in [1, {}] (unset: one thread per hardware thread)", kMaxThreads));
    }
    return int(n);
  }
  return int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, kMaxThreads));
}

// The thread that runs a job's indices, when it does: a call from inside a job runs
// in place instead of waiting for the job it is part of.
thread_local bool t_in_job = false;

// Workers wait for a job (the generation number changes), pull indices from a shared
// counter, and the caller takes part too, so one thread means no worker at all.
// Workers are only ever added: a pool is made once per process.
class Pool {
 public:
  explicit Pool(int threads) {
    // Reserved so that starting a worker can fail only in starting its thread.
    workers_.reserve(kMaxThreads);
    slots_.reserve(kMaxThreads);
    slots_.push_back(std::make_unique<Scratch>());
    try {
      add_workers(threads);
    } catch (...) {
      shut_down();
      throw;
    }
    participants_.store(threads);
  }
  ~Pool() { shut_down(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int size() const { return participants_.load(); }

  void set_size(int threads) {
    std::lock_guard job(job_mu_);
    add_workers(threads);  // throws, leaving the thread count as it was
    participants_.store(threads);
  }

  void reserve(std::size_t bytes) {
    std::lock_guard job(job_mu_);
    reserved_ = std::max(reserved_, bytes);
    for (auto& s : slots_) s->reserve(reserved_);
  }

  void run(std::int64_t n, FunctionRef<void(std::int64_t, Scratch&)> fn) {
    if (t_in_job) {
      thread_local Scratch nested;
      for (std::int64_t i = 0; i < n; ++i) fn(i, nested);
      return;
    }
    std::lock_guard job(job_mu_);  // one job at a time; its holder owns slot 0
    const auto helpers = int(std::min<std::int64_t>(participants_.load() - 1, n - 1));
    if (helpers <= 0) {
      struct InJob {
        InJob() { t_in_job = true; }
        ~InJob() { t_in_job = false; }
      } in_job;
      for (std::int64_t i = 0; i < n; ++i) fn(i, *slots_[0]);
      return;
    }
    {
      std::lock_guard lock(mu_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      helpers_ = helpers;
      active_ = helpers;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain(*slots_[0]);
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return active_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Starts workers until there are `threads` - 1 (the caller is the first thread).
  void add_workers(int threads) {
    std::uint64_t generation;
    {
      std::lock_guard lock(mu_);
      generation = generation_;
    }
    while (int(workers_.size()) + 1 < threads) {
      const int slot = int(slots_.size());
      auto scratch = std::make_unique<Scratch>();
      scratch->reserve(reserved_);
      try {
        int left = g_start_limit.load();
        while (left > 0 && !g_start_limit.compare_exchange_weak(left, left - 1)) {
        }
        if (left == 0) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
        workers_.emplace_back([this, slot, s = scratch.get(), generation] { work(slot, *s, generation); });
      } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc for the thread's state
        throw Error(kOp, "threads", std::to_string(threads),
                    fmt::format("could not start worker thread {} ({}); the system limits the threads of a "
                                "process (ulimit -u), or set KVINFER_NUM_THREADS lower",
                                slot, e.what()));
      }
      slots_.push_back(std::move(scratch));
      g_started.fetch_add(1);
    }
  }

  void shut_down() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void drain(Scratch& scratch) {
    t_in_job = true;
    for (std::int64_t i; (i = next_.fetch_add(1)) < n_;) {
      try {
        (*fn_)(i, scratch);
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(n_);
      }
    }
    t_in_job = false;
  }

  void work(int slot, Scratch& scratch, std::uint64_t seen) {
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        if (slot > helpers_) continue;  // a job too small to need this worker
      }
      drain(scratch);
      {
        std::lock_guard lock(mu_);
        if (--active_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<Scratch>> slots_;  // [0]: the caller's; [i]: worker i's
  std::size_t reserved_ = 0;
  std::atomic<int> participants_{1};
  std::mutex job_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  // The job, guarded by mu_ (n_ and fn_ are read by the workers after they see the
  // generation change, under mu_).
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  const FunctionRef<void(std::int64_t, Scratch&)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  int helpers_ = 0, active_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::exception_ptr error_;
};

Pool& pool() {
  // Made on first use, once; a failure to make it is thrown and retried by the next call.
  static Pool instance(default_threads());
  return instance;
}

}  // namespace

void Scratch::Free::operator()(std::byte* p) const {
  ::operator delete(p, std::align_val_t(kAlign));
}

void Scratch::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  try {
    data_.reset(static_cast<std::byte*>(::operator new(bytes, std::align_val_t(kAlign))));
  } catch (const std::bad_alloc&) {
    capacity_ = 0;
    throw Error(kOp, "scratch", fmt::format("{} bytes", bytes), "out of memory for a thread's working buffers");
  }
  capacity_ = bytes;
}

void Scratch::begin(std::size_t bytes) {
  reserve(bytes);
  used_ = 0;
  limit_ = bytes;
}

void* Scratch::take_bytes(std::size_t bytes) {
  // The callers size begin() from the same bytes_for() sums: overrunning it is a bug.
  if (used_ + bytes > limit_) throw std::logic_error("kvinfer: CPU scratch taken beyond what begin() sized");
  void* p = data_.get() + used_;
  used_ += bytes;
  return p;
}

int num_threads() {
  return pool().size();
}

void set_num_threads(int n) {
  if (n < 0 || n > kMaxThreads) {
    throw Error("set_num_threads", "n", std::to_string(n),
                fmt::format("must be in [0, {}] (0: the default)", kMaxThreads));
  }
  pool().set_size(n == 0 ? default_threads() : n);
}

void reserve_scratch(std::size_t bytes) {
  pool().reserve(bytes);
}

void parallel_for(std::int64_t n, FunctionRef<void(std::int64_t, Scratch&)> fn) {
  if (n <= 0) return;
  pool().run(n, fn);
}

namespace testing {
void limit_thread_starts(int n) {
  g_start_limit.store(n < 0 ? -1 : n);
}
int threads_started() {
  return g_started.load();
}
}  // namespace testing

}  // namespace kvinfer::cpu
