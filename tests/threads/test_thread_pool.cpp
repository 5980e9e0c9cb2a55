// SPDX-License-Identifier: Apache-2.0
// The CPU backend's thread pool: one per process, made before any run(), bounded,
// shared by every wrapper; a failure to start threads is a kvinfer::Error; jobs from
// several threads at once, exceptions, nesting and thread-count changes. These are
// the tests ThreadSanitizer runs (label `threads`, CMake preset `tsan`).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/thread_pool.hpp"
#include "kvinfer/kvinfer.hpp"
#include "testing/expect_error.hpp"
#include "testing/random.hpp"
#include "testing/sanitized.hpp"

namespace kvinfer::testing {
namespace {

// A small decode problem: a model's layer in miniature.
struct Layer {
  Rng rng;
  std::vector<std::int32_t> kv_lens{70, 5, 300};
  HostPageTable table;
  Tensor cache, q;
  explicit Layer(std::uint64_t seed)
      : rng(seed),
        table(random_page_table(kv_lens, 16, 2, rng)),
        cache(random_bf16({table.num_pages, 2, 16, 2, 64}, rng)),
        q(random_bf16({3, 8, 64}, rng)) {}
  DecodePlanArgs args(SplitOptions split = {}) const {
    return {.page_table = table.view(), .num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 64, .page_size = 16,
            .split = split};
  }
  std::vector<std::uint16_t> run(BatchDecodeWithPagedKVCache& w) const {
    Tensor out = Tensor::empty({3, 8, 64}, DType::kBF16);
    w.run(q, PagedKVCache::combined(cache), out);
    const auto* p = out.data_as<const std::uint16_t>();
    return {p, p + out.numel()};
  }
};

class ThreadPool : public ::testing::Test {
 protected:
  void TearDown() override {
    cpu::testing::limit_thread_starts(-1);
    cpu::set_num_threads(0);
  }
};

TEST_F(ThreadPool, OnePoolForEveryWrapperAndNoThreadStartsInARun) {
  cpu::set_num_threads(3);
  const int started = cpu::testing::threads_started();
  // A 61-layer model: 61 decode wrappers, planned and run in turn.
  Layer layer(1);
  std::vector<BatchDecodeWithPagedKVCache> layers(61);
  for (auto& w : layers) w.plan(layer.args({.fixed_split_size = 32}));
  const std::vector<std::uint16_t> first = layer.run(layers[0]);
  for (auto& w : layers) EXPECT_EQ(layer.run(w), first);
  EXPECT_EQ(cpu::testing::threads_started(), started) << "wrappers or runs started threads of their own";
  EXPECT_EQ(cpu::num_threads(), 3);
}

TEST_F(ThreadPool, ThreadCountChangesKeepThePoolAndTheResults) {
  Layer layer(2);
  BatchDecodeWithPagedKVCache w;
  w.plan(layer.args({.fixed_split_size = 16}));
  cpu::set_num_threads(1);
  const std::vector<std::uint16_t> one = layer.run(w);
  cpu::set_num_threads(4);
  const int started = cpu::testing::threads_started();
  EXPECT_EQ(layer.run(w), one);
  cpu::set_num_threads(2);  // shrinking keeps the workers (idle)
  EXPECT_EQ(layer.run(w), one);
  cpu::set_num_threads(4);  // and growing back starts none
  EXPECT_EQ(layer.run(w), one);
  EXPECT_EQ(cpu::testing::threads_started(), started);
}

TEST_F(ThreadPool, BoundedAndChecked) {
  expect_error([] { cpu::set_num_threads(cpu::kMaxThreads + 1); }, "n");
  expect_error([] { cpu::set_num_threads(-1); }, "n");
  // $KVINFER_NUM_THREADS is read for the default and checked.
  const char* old = std::getenv("KVINFER_NUM_THREADS");
  const std::string saved = old ? old : "";
  for (const char* bad : {"abc", "0", "-3", "100000", "4x"}) {
    ::setenv("KVINFER_NUM_THREADS", bad, 1);
    expect_error([] { cpu::set_num_threads(0); }, "KVINFER_NUM_THREADS");
  }
  ::setenv("KVINFER_NUM_THREADS", "2", 1);
  cpu::set_num_threads(0);
  EXPECT_EQ(cpu::num_threads(), 2);
  if (old) {
    ::setenv("KVINFER_NUM_THREADS", saved.c_str(), 1);
  } else {
    ::unsetenv("KVINFER_NUM_THREADS");
  }
}

TEST_F(ThreadPool, FailureToStartThreadsIsAnError) {
  cpu::set_num_threads(2);
  cpu::testing::limit_thread_starts(1);  // the system refuses the second new thread
  try {
    cpu::set_num_threads(8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "threads");
    EXPECT_NE(std::string(e.what()).find("could not start worker thread"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cpu::num_threads(), 2);  // the pool keeps its thread count, and works
  cpu::testing::limit_thread_starts(-1);
  std::vector<int> hit(1000, 0);
  cpu::parallel_for(1000, [&](std::int64_t i) { hit[std::size_t(i)] += 1; });
  for (int h : hit) EXPECT_EQ(h, 1);
}

// With the system's own limit: a process whose address space cannot hold more thread
// stacks. Run in a child (a death test) so that the limit stays there.
TEST_F(ThreadPool, SystemThreadLimitIsAnError) {
#ifdef KVINFER_TEST_SANITIZED
  GTEST_SKIP() << "sanitizers reserve address space that an RLIMIT_AS would break";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cpu::num_threads();  // the pool as it is
        rlimit r{};
        FILE* f = std::fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (f == nullptr || std::fscanf(f, "%lu", &pages) != 1) std::_Exit(3);
        std::fclose(f);
        r.rlim_cur = r.rlim_max = rlim_t(pages) * 4096 + (rlim_t(64) << 20);  // room for a few 8 MiB stacks
        if (::setrlimit(RLIMIT_AS, &r) != 0) std::_Exit(4);
        try {
          cpu::set_num_threads(cpu::kMaxThreads);
        } catch (const Error& e) {
          std::_Exit(e.argument() == "threads" ? 0 : 5);
        } catch (...) {
          std::_Exit(6);
        }
        std::_Exit(7);
      },
      ::testing::ExitedWithCode(0), "");
#endif
}

TEST_F(ThreadPool, ConcurrentCallersShareThePool) {
  cpu::set_num_threads(3);
  Layer a(3), b(4);
  BatchDecodeWithPagedKVCache wa, wb;
  wa.plan(a.args({.fixed_split_size = 16}));
  wb.plan(b.args());
  const std::vector<std::uint16_t> ra = a.run(wa), rb = b.run(wb);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if ((t % 2 == 0 ? a.run(wa) : b.run(wb)) != (t % 2 == 0 ? ra : rb)) mismatches.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(ThreadPool, ExceptionsReachTheCallerAndThePoolGoesOn) {
  cpu::set_num_threads(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(cpu::parallel_for(200,
                                 [&](std::int64_t i) {
                                   ran.fetch_add(1);
                                   if (i == 17) throw std::runtime_error("index 17");
                                 }),
               std::runtime_error);
  EXPECT_LE(ran.load(), 200);
  std::atomic<std::int64_t> sum{0};
  cpu::parallel_for(100, [&](std::int64_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 4950);
}

TEST_F(ThreadPool, NestedCallsRunInTheCallingThread) {
  cpu::set_num_threads(3);
  std::vector<std::atomic<int>> hits(64);
  cpu::parallel_for(8, [&](std::int64_t i) {
    cpu::parallel_for(8, [&](std::int64_t j) { hits[std::size_t(i * 8 + j)].fetch_add(1); });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST_F(ThreadPool, ScratchIsPerThreadAndReservedAhead) {
  cpu::set_num_threads(4);
  cpu::reserve_scratch(1 << 16);
  std::atomic<int> bad{0};
  cpu::parallel_for(400, [&](std::int64_t i, cpu::Scratch& s) {
    if (s.capacity() < (1u << 16)) bad.fetch_add(1);
    s.begin(cpu::Scratch::bytes_for<std::int64_t>(1024));
    std::int64_t* p = s.take<std::int64_t>(1024);
    for (int k = 0; k < 1024; ++k) p[k] = i;
    for (int k = 0; k < 1024; ++k) {
      if (p[k] != i) bad.fetch_add(1);  // another thread wrote into this thread's arena
    }
  });
  EXPECT_EQ(bad.load(), 0);
  // Taking beyond what begin() sized is a bug of the caller, not memory corruption.
  EXPECT_THROW(cpu::parallel_for(1,
                                 [](std::int64_t, cpu::Scratch& s) {
                                   s.begin(64);
                                   s.take<float>(17);
                                 }),
               std::logic_error);
}

}  // namespace
}  // namespace kvinfer::testing
