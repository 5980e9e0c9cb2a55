// SPDX-License-Identifier: Apache-2.0
// Case selection over a table of parameter axes: pairwise-covering choices (one
// value index per axis) until every pair of values of two axes appears in some
// choice, each choice within a cost budget; and random choices for the wide grids.
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

// Random cases of a table of axis values (the wide grids) appended to `cases` until
// there are `count`: make(choice, seed) of a random choice (one value index per
// axis) and a seed from rng, kept when its cost(case) is at most max_cost.
template <std::size_t N, class Case, class Rng, class Make, class Cost>
void add_random_cases(std::vector<Case>& cases, int count, const std::array<std::vector<int>, N>& values_per_axis,
                      Rng& rng, Make&& make, Cost&& cost, double max_cost) {
  while (int(cases.size()) < count) {
    std::array<int, N> ch{};
    for (std::size_t a = 0; a < N; ++a) ch[a] = int(rng() % values_per_axis[a].size());
    Case c = make(ch, rng());
    if (cost(c) <= max_cost) cases.push_back(std::move(c));
  }
}

// The pairwise-covering cases of a table of axis values: make(choice, seed) for each
// choice of pairwise_choices, with seeds first_seed, first_seed + 1, ...; a
// candidate costs cost(make(choice, 0)).
template <std::size_t N, class Make, class Cost>
auto pairwise_cases(const std::array<std::vector<int>, N>& values_per_axis, const PairwiseOptions& options,
                    std::uint64_t first_seed, Make&& make, Cost&& cost) {
  std::vector<decltype(make(std::array<int, N>{}, std::uint64_t(0)))> cases;
  const auto choice_cost = [&](std::span<const int> ch) { return cost(make(to_choice<N>(ch), 0)); };
  for (const std::vector<int>& ch : pairwise_choices(axis_sizes(values_per_axis), options, choice_cost)) {
    cases.push_back(make(to_choice<N>(ch), first_seed + cases.size()));
  }
  return cases;
}

}  // namespace kvinfer::testing
