// SPDX-License-Identifier: Apache-2.0
// The CUDA MLA kernel selector's rules, run on the CPU with the `default` preset's
// instances as plain values.
#include <gtest/gtest.h>

#include "plan/mla_selector.hpp"
#include "testing/expect_error.hpp"

namespace kvinfer::detail {
namespace {

MlaKernelCaps default_preset() {
  MlaKernelCaps c;
  for (DType q : {DType::kF16, DType::kBF16}) {
    for (DType kv : {q, DType::kE4M3, DType::kE5M2}) c.instances.push_back({q, kv});
  }
  return c;
}

const MlaInstance& caps_instance(const MlaKernelCaps& caps, const KernelKey& k) {
  return caps.instances.at(std::size_t(k.instance));
}

MLAProblem problem(DType q, DType kv) {
  MLAProblem pr;
  pr.q_dtype = pr.o_dtype = q;
  pr.kv_dtype = kv;
  return pr;
}

TEST(MlaSelector, ItemsTakeTheFewestRowBlocksThatHoldTheLongestItem) {
  const MlaKernelCaps caps = default_preset();
  const MLAProblem pr = problem(DType::kBF16, DType::kBF16);
  for (auto [rows, launch_rows] : {std::pair{1, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64}, {64, 64}}) {
    const KernelKey k = select_mla_kernel(pr, rows, caps);
    EXPECT_EQ(k.family, KernelFamily::kMla);
    EXPECT_EQ(k.launch_rows, launch_rows) << rows << " rows";
    ASSERT_GE(k.instance, 0);
    EXPECT_EQ(caps.instances[std::size_t(k.instance)].q, DType::kBF16);
    EXPECT_EQ(caps.instances[std::size_t(k.instance)].kv, DType::kBF16);
  }
}

TEST(MlaSelector, ItemsOf64RowsOf16BitKvTakeWgmmaOnHopper) {
  MlaKernelCaps hopper = default_preset();
  hopper.hopper = true;
  for (DType q : {DType::kF16, DType::kBF16}) {
    for (DType kv : {q, DType::kE4M3, DType::kE5M2}) {
      for (auto [rows, launch_rows] : {std::pair{16, 16}, {32, 32}, {33, 64}, {64, 64}}) {
        const KernelKey k = select_mla_kernel(problem(q, kv), rows, hopper);
        const bool wgmma = launch_rows == 64 && kv == q;
        EXPECT_EQ(k.family, wgmma ? KernelFamily::kMlaWgmma : KernelFamily::kMla) << rows << " rows";
        EXPECT_EQ(k.launch_rows, launch_rows);
        ASSERT_GE(k.instance, 0);
        EXPECT_EQ(caps_instance(hopper, k).q, q);
        EXPECT_EQ(caps_instance(hopper, k).kv, kv);
      }
    }
  }
  // Not where the caps turn it off, nor on another device.
  MlaKernelCaps off = hopper;
  off.wgmma = false;
  EXPECT_EQ(select_mla_kernel(problem(DType::kBF16, DType::kBF16), 64, off).family, KernelFamily::kMla);
  EXPECT_EQ(select_mla_kernel(problem(DType::kBF16, DType::kBF16), 64, default_preset()).family, KernelFamily::kMla);
}

TEST(MlaSelector, TheInstanceMatchesBothDtypes) {
  const MlaKernelCaps caps = default_preset();
  for (const MlaInstance& want : caps.instances) {
    const KernelKey k = select_mla_kernel(problem(want.q, want.kv), 16, caps);
    ASSERT_GE(k.instance, 0);
    EXPECT_EQ(caps.instances[std::size_t(k.instance)].q, want.q);
    EXPECT_EQ(caps.instances[std::size_t(k.instance)].kv, want.kv);
  }
}

TEST(MlaSelector, AnUncompiledConfigurationNamesThePreset) {
  MlaKernelCaps minimal;
  minimal.preset = "minimal";
  minimal.instances.push_back({DType::kBF16, DType::kBF16});
  testing::expect_error([&] { select_mla_kernel(problem(DType::kF16, DType::kF16), 16, minimal); }, "kernel",
                        "'minimal' instance preset");
  testing::expect_error([&] { select_mla_kernel(problem(DType::kBF16, DType::kE4M3), 16, minimal); }, "kernel",
                        "-DKVINFER_INSTANCES=default");
  // The smallest preset that has the dtypes (cmake/KvinferInstances.cmake's lists), or none.
  testing::expect_error([&] { select_mla_kernel(problem(DType::kF16, DType::kBF16), 16, default_preset()); },
                        "kernel", "'default' instance preset; the 'full' preset has one");
  testing::expect_error([&] { select_mla_kernel(problem(DType::kE4M3, DType::kE4M3), 16, minimal); }, "kernel",
                        "in any instance preset (this build: 'minimal')");
}

}  // namespace
}  // namespace kvinfer::detail
