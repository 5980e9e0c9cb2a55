// SPDX-License-Identifier: Apache-2.0
// Pairwise-covering case selection: choices (one value index per parameter axis)
// until every pair of values of two axes appears in some choice, each choice
// within a cost budget.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace kvinfer::testing {

struct PairwiseOptions {
  std::uint64_t seed = 1;
  int candidates = 60;        // random candidates per pick; the one covering most new pairs wins
  double max_cost = 1e300;    // candidates costing more are discarded
  bool prefer_cheaper = false;  // on equal coverage, the cheaper candidate wins
};

// Greedy: each candidate starts from an uncovered pair and fills the other axes at
// random. Stops when every pair is covered, or after 200 picks that found nothing
// new within the budget (pairs only over budget stay uncovered).
std::vector<std::vector<int>> pairwise_choices(std::span<const int> axis_sizes, const PairwiseOptions& options,
                                               const std::function<double(std::span<const int>)>& cost);

// The number of values of each axis of a table of axis values.
template <class Axes>
std::vector<int> axis_sizes(const Axes& values_per_axis) {
  std::vector<int> sizes;
  for (const auto& values : values_per_axis) sizes.push_back(int(values.size()));
  return sizes;
}

// A choice of pairwise_choices as a fixed-size array (one value index per axis).
template <std::size_t N>
std::array<int, N> to_choice(std::span<const int> ch) {
  std::array<int, N> c{};
  std::copy(ch.begin(), ch.end(), c.begin());
  return c;
}

}  // namespace kvinfer::testing
