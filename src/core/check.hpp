// SPDX-License-Identifier: Apache-2.0
// Argument checks shared by every validator. Each throws kvinfer::Error naming
// the operation, the argument, the offending value and the rule.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "kvinfer/core/error.hpp"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer::detail {

[[noreturn]] inline void fail(std::string_view op, std::string_view arg, std::string_view value,
                              std::string_view rule) {
  throw Error(op, arg, value, rule);
}

// A message formatted only if a check fails: the checks of run() pass without
// allocating (run() allocates nothing), where fmt::format(...) as an argument would
// format it every time. later(...) takes fmt::format's arguments; they must outlive
// the check (temporaries of the calling expression do).
template <class... Args>
class Later {
 public:
  Later(fmt::format_string<Args...> format, const Args&... args) : format_(format), args_(args...) {}
  std::string str() const {
    return std::apply([this](const Args&... a) { return fmt::vformat(format_, fmt::make_format_args(a...)); },
                      args_);
  }

 private:
  fmt::string_view format_;  // checked against Args at compile time by the constructor
  std::tuple<const Args&...> args_;
};
template <class... Args>
Later<Args...> later(fmt::format_string<std::type_identity_t<Args>...> format, const Args&... args) {
  return Later<Args...>(format, args...);
}

inline std::string_view text(std::string_view s) { return s; }
template <class... Args>
std::string text(const Later<Args...>& s) {
  return s.str();
}

// `rule` is a string or a later(...).
template <class Rule = std::string_view>
inline void require(bool ok, std::string_view op, std::string_view arg, std::string_view value,
                    const Rule& rule) {
  if (!ok) fail(op, arg, value, text(rule));
}

// Lazily formatted variant for the hot paths of validation loops.
template <class Value, class Rule = std::string_view>
inline void require_v(bool ok, std::string_view op, std::string_view arg, const Value& value,
                      const Rule& rule) {
  if (!ok) fail(op, arg, fmt::format("{}", value), text(rule));
}

// A tensor is given, and its memory is usable: a view with elements has a non-null
// data pointer aligned to its element size and, when its extent is known (an owning
// Tensor's view, or one made with its size in bytes), addresses only bytes inside it.
// Every check of a tensor argument below starts here.
void check_defined(std::string_view op, std::string_view arg, const TensorView& t);
void check_dtype(std::string_view op, std::string_view arg, const TensorView& t, DType want);
void check_rank(std::string_view op, std::string_view arg, const TensorView& t, int rank);
void check_device(std::string_view op, std::string_view arg, const TensorView& t, Device want);
void check_last_dim_contiguous(std::string_view op, std::string_view arg, const TensorView& t);
void check_size(std::string_view op, std::string_view arg, const TensorView& t, int dim,
                std::int64_t want, std::string_view why);
template <class... Args>
void check_size(std::string_view op, std::string_view arg, const TensorView& t, int dim, std::int64_t want,
                const Later<Args...>& why) {
  if (t.size(dim) != want) check_size(op, arg, t, dim, want, std::string_view(why.str()));
}

// An index array (indptr, indices, last_page_len, positions): int32, rank 1,
// contiguous. `length` < 0 skips the length check.
void check_index_array(std::string_view op, std::string_view arg, const TensorView& t,
                       std::int64_t length = -1);

// Host contents of an indptr: length n+1, starts at 0, non-decreasing.
void check_indptr_contents(std::string_view op, std::string_view arg, const std::int32_t* indptr,
                           std::int64_t length);

// A tensor on a GPU in a build without the CUDA backend cannot be worked on:
// throws naming `arg` (whose device is `device`).
void check_backend_built(std::string_view op, std::string_view arg, Device device);

// Whether device-resident index arrays are checked for contents (page ids,
// positions) at the cost of a copy to the host: KVINFER_CHECK_INDICES=1.
bool check_indices_enabled();

}  // namespace kvinfer::detail
