// SPDX-License-Identifier: Apache-2.0
// Numeric flags of the `kvinfer` commands. Each value is read as text and converted
// here rather than by CLI11, so that every malformed or out-of-range value (`1e20`
// for an integer, `-1` for an unsigned seed, `inf`) gets one message form: the
// flag, the value and the range, e.g. "--seed = -1: must be an integer in [0, 2^64-1]".
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "input_error.hpp"

namespace kvinfer::cli {

// The closed range [lo, hi], or (lo, hi] with lo_open; `note` follows the range in
// messages and help ("0: all cores").
template <class T>
struct Bounds {
  T lo, hi;
  bool lo_open = false;
  std::string note;
};

template <class T>
std::string describe_bounds(const Bounds<T>& b) {
  const char* what = std::is_integral_v<T> ? "an integer" : "a number";
  return fmt::format("{} in {}{}, {}]{}", what, b.lo_open ? "(" : "[", b.lo, b.hi,
                     b.note.empty() ? "" : " (" + b.note + ")");
}

// Converts `text` (surrounding spaces allowed, nothing else) to T within `b`; throws
// InputError naming `flag` otherwise.
template <class T>
T parse_number(const std::string& flag, std::string_view text, const Bounds<T>& b) {
  std::string_view s = text;
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  const auto fail = [&] {
    return InputError(fmt::format("{} = {}: must be {}", flag, text, describe_bounds(b)));
  };
  T v{};
  // from_chars takes no leading '+', and for an unsigned type no '-': "-1" does not wrap.
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) throw fail();
  if constexpr (std::floating_point<T>) {
    if (!std::isfinite(v)) throw fail();
  }
  if (v < b.lo || (b.lo_open && v == b.lo) || v > b.hi) throw fail();
  return v;
}

// Adds `name` to `cmd`, its value converted into `target` (a T or an optional<T>) by
// parse_number; the help text gains the range.
template <class T, class Target>
CLI::Option* add_number_option(CLI::App* cmd, const std::string& name, Target& target, Bounds<T> bounds,
                               const std::string& help) {
  const std::string flag = name.substr(0, name.find(','));
  CLI::Option* o = cmd->add_option_function<std::string>(
      name, [&target, flag, bounds](const std::string& text) { target = parse_number(flag, text, bounds); },
      fmt::format("{}; {}", help, describe_bounds(bounds)));
  o->type_name(std::is_integral_v<T> ? "INT" : "NUMBER");
  return o;
}

// The same with the default (`target`'s value) in the help text.
template <class T>
CLI::Option* add_number(CLI::App* cmd, const std::string& name, T& target, Bounds<T> bounds,
                        const std::string& help) {
  CLI::Option* o = add_number_option(cmd, name, target, bounds, help);
  o->default_str(fmt::format("{}", target));
  return o;
}

// An optional<T>: no default shown.
template <class T>
CLI::Option* add_number(CLI::App* cmd, const std::string& name, std::optional<T>& target, Bounds<T> bounds,
                        const std::string& help) {
  return add_number_option<T>(cmd, name, target, bounds, help);
}

// "N" or "MIN:MAX", each an integer within `b`, MIN <= MAX.
std::pair<std::int32_t, std::int32_t> parse_int_range(const std::string& flag, const std::string& text,
                                                      const Bounds<std::int32_t>& b);

}  // namespace kvinfer::cli
