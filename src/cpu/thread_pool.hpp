// SPDX-License-Identifier: Apache-2.0
// The CPU backend's one pool of worker threads per process, shared by every wrapper
// and operation. It is made when the CPU backend is first used (a wrapper's
// constructor, or the first CPU operation), never inside a run(), holds at most
// kMaxThreads threads, and reports a failure to start them as a kvinfer::Error.
// parallel_for hands out indices dynamically; which thread runs an index never
// changes a result, since every index writes its own outputs. Each thread of a job
// has a Scratch arena of its own, made large enough at plan time
// (reserve_scratch), so that a run() takes its working memory without allocating.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace kvinfer::cpu {

inline constexpr int kMaxThreads = 1024;

// Threads a parallel_for uses (the caller's included): set_num_threads(n), else
// $KVINFER_NUM_THREADS, else the hardware's; the first call makes the pool.
int num_threads();
// Uses n threads from now on (0: the default above). Starts the workers that are
// missing here, not in a later call; n in [0, kMaxThreads]. Workers beyond n stay
// idle. Throws kvinfer::Error when threads cannot be started; the pool then keeps
// its previous thread count.
void set_num_threads(int n);

// The working memory of one thread of a job: a bump allocator over an arena that
// reserve_scratch() sizes ahead, so that kernels take buffers without allocating.
class Scratch {
 public:
  static constexpr std::size_t kAlign = 64;
  // Bytes that take<T>(n) consumes.
  template <class T>
  static constexpr std::size_t bytes_for(std::size_t n) {
    return (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
  }

  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // Starts a new set of buffers of `bytes` in all. The arena grows (allocates) only
  // when it is smaller, which a plan's reserve_scratch prevents.
  void begin(std::size_t bytes);
  // n elements of T, 64-byte aligned, uninitialised; within begin()'s bytes.
  template <class T>
  T* take(std::size_t n) {
    static_assert(std::is_trivially_destructible_v<T>);
    return static_cast<T*>(take_bytes(bytes_for<T>(n)));
  }
  std::size_t capacity() const { return capacity_; }
  // Grows the arena to at least `bytes` (outside any job).
  void reserve(std::size_t bytes);

 private:
  void* take_bytes(std::size_t bytes);

  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t capacity_ = 0, used_ = 0, limit_ = 0;
};

// Makes every thread's Scratch at least `bytes` large (and that of threads started
// later). Called when a plan is made; waits for a running job to finish.
void reserve_scratch(std::size_t bytes);

// A non-owning reference to a callable: unlike std::function it never allocates.
template <class Sig>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
    requires(!std::same_as<std::remove_cvref_t<F>, FunctionRef> && std::invocable<F&, Args...>)
  FunctionRef(F&& f)  // NOLINT: implicit, as a lambda is passed where a FunctionRef is taken
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

// Calls fn(i, scratch) for i in [0, n), spread over the pool; returns when all are
// done. `scratch` is the running thread's arena. One job runs at a time (callers on
// other threads wait); a call from inside a job runs its indices in the calling
// thread. An exception thrown by fn is rethrown here (the other indices are skipped).
// Allocates nothing.
void parallel_for(std::int64_t n, FunctionRef<void(std::int64_t, Scratch&)> fn);

// The same for fn(i).
template <class F>
  requires(std::invocable<F&, std::int64_t> && !std::invocable<F&, std::int64_t, Scratch&>)
void parallel_for(std::int64_t n, F&& fn) {
  parallel_for(n, [&fn](std::int64_t i, Scratch&) { fn(i); });
}

namespace testing {
// At most `n` more worker threads may start (n < 0: no limit): the next start beyond
// it fails as std::thread does when the system refuses a thread, so that tests reach
// the pool's failure path on any machine.
void limit_thread_starts(int n);
// Workers started since the process began (a pool is made once and never replaced).
int threads_started();
}  // namespace testing

}  // namespace kvinfer::cpu
