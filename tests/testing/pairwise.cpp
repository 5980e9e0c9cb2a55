// SPDX-License-Identifier: Apache-2.0
#include "testing/pairwise.hpp"

#include <array>
#include <iterator>
#include <random>
#include <set>

namespace kvinfer::testing {

std::vector<std::vector<int>> pairwise_choices(std::span<const int> axis_sizes, const PairwiseOptions& options,
                                               const std::function<double(std::span<const int>)>& cost) {
  const int axes = int(axis_sizes.size());
  std::mt19937_64 rng(options.seed);
  // Uncovered pairs (axis a value i, axis b value j), a < b.
  std::set<std::array<int, 4>> uncovered;
  for (int a = 0; a < axes; ++a)
    for (int b = a + 1; b < axes; ++b)
      for (int i = 0; i < axis_sizes[a]; ++i)
        for (int j = 0; j < axis_sizes[b]; ++j) uncovered.insert({a, i, b, j});
  const auto gain_of = [&](const std::vector<int>& ch) {
    int gain = 0;
    for (int a = 0; a < axes; ++a)
      for (int b = a + 1; b < axes; ++b) gain += int(uncovered.count({a, ch[a], b, ch[b]}));
    return gain;
  };

  std::vector<std::vector<int>> picks;
  int stale = 0;
  while (!uncovered.empty() && stale < 200) {
    std::vector<int> best;
    int best_gain = 0;
    double best_cost = 0;
    for (int t = 0; t < options.candidates; ++t) {
      std::vector<int> ch(static_cast<std::size_t>(axes));
      for (int a = 0; a < axes; ++a) ch[a] = int(rng() % std::uint64_t(axis_sizes[a]));
      auto it = uncovered.begin();
      std::advance(it, rng() % uncovered.size());
      ch[(*it)[0]] = (*it)[1];
      ch[(*it)[2]] = (*it)[3];
      const double c = cost(ch);
      if (c > options.max_cost) continue;
      const int gain = gain_of(ch);
      if (gain > best_gain || (options.prefer_cheaper && gain == best_gain && gain > 0 && c < best_cost)) {
        best = ch;
        best_gain = gain;
        best_cost = c;
      }
    }
    if (best_gain == 0) {
      ++stale;
      continue;
    }
    for (int a = 0; a < axes; ++a)
      for (int b = a + 1; b < axes; ++b) uncovered.erase({a, best[a], b, best[b]});
    picks.push_back(std::move(best));
  }
  return picks;
}

}  // namespace kvinfer::testing
