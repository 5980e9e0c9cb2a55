// SPDX-License-Identifier: Apache-2.0
#include "cpu/thread_pool.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvinfer::cpu {
namespace {

int default_threads() {
  if (const char* env = std::getenv("KVINFER_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Workers wait for a job (a generation number changes), pull indices from a shared
// counter, and the caller takes part too, so one thread means no worker at all.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return int(workers_.size()) + 1; }

  void run(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
    std::lock_guard job_lock(job_mu_);  // one job at a time
    {
      std::lock_guard lock(mu_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      active_ = int(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return active_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void drain() {
    for (std::int64_t i; (i = next_.fetch_add(1)) < n_;) {
      try {
        (*fn_)(i);
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(n_);
      }
    }
  }

  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      drain();
      {
        std::lock_guard lock(mu_);
        if (--active_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex job_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<void(std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  std::atomic<std::int64_t> next_{0};
  int active_ = 0;
  std::exception_ptr error_;
};

std::mutex g_pool_mu;
std::unique_ptr<Pool> g_pool;
int g_requested = 0;

Pool& pool() {
  std::lock_guard lock(g_pool_mu);
  const int want = g_requested > 0 ? g_requested : default_threads();
  if (!g_pool || g_pool->size() != want) g_pool = std::make_unique<Pool>(want);
  return *g_pool;
}

}  // namespace

int num_threads() { return pool().size(); }

void set_num_threads(int n) {
  std::lock_guard lock(g_pool_mu);
  g_requested = n;
}

void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1) {
    fn(0);
    return;
  }
  pool().run(n, fn);
}

}  // namespace kvinfer::cpu
