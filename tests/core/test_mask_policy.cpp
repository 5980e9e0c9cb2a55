// SPDX-License-Identifier: Apache-2.0
// The mask policy's tile classes against per-element visibility, and the keys every
// row of a tile sees (common_keys) against the classification the kernels replaced
// with it: over causal, windowed and plain masks of many shapes, every rows x keys
// tile the loops of a kernel can meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/mask_policy.hpp"

namespace kvinfer::detail {
namespace {

TEST(MaskPolicy, TileClassesAndCommonKeysMatchVisibility) {
  int checked = 0;
  for (bool causal : {false, true}) {
    for (int window : {-1, 0, 3, 40}) {
      for (auto [qo, kv] : {std::pair{1, 1}, {1, 70}, {5, 5}, {7, 100}, {33, 40}, {64, 64}}) {
        RequestMask m;
        m.causal = causal;
        m.window_left = window;
        m.qo_len = qo;
        m.kv_len = kv;
        for (int r0 = 0; r0 < qo; ++r0) {
          for (int r1 = r0 + 1; r1 <= std::min(qo, r0 + 9); ++r1) {
            std::int32_t first = 0, last = 0;
            m.common_keys(r0, r1, &first, &last);
            for (int k0 = 0; k0 < kv; ++k0) {
              for (int k1 = k0 + 1; k1 <= std::min(kv, k0 + 17); ++k1) {
                bool all = true, any = false;
                for (int r = r0; r < r1; ++r)
                  for (int k = k0; k < k1; ++k) {
                    all = all && m.visible(r, k);
                    any = any || m.visible(r, k);
                  }
                const TileClass c = m.classify(r0, r1, k0, k1);
                // Exact for full and empty; partial is allowed to be conservative only
                // where the tile is neither.
                ASSERT_EQ(c == TileClass::kFull, all) << causal << " " << window << " " << r0 << ".." << r1 << " x "
                                                      << k0 << ".." << k1;
                if (c == TileClass::kEmpty) ASSERT_FALSE(any);
                // The kernels' test: a tile inside [first, last) is full.
                ASSERT_EQ(k0 >= first && k1 <= last, all)
                    << "common_keys [" << first << ", " << last << ") for rows " << r0 << ".." << r1 << ", keys " << k0
                    << ".." << k1;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

}  // namespace
}  // namespace kvinfer::detail
