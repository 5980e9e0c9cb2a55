// SPDX-License-Identifier: Apache-2.0
#include "csv_reader.hpp"

#include <fmt/format.h>

#include "input_error.hpp"

namespace kvinfer::cli {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// A printable form of one byte for messages.
std::string shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02X}", u);
}

class Reader {
 public:
  Reader(std::string_view text, const std::string& source) : s_(text), source_(source) {
    if (s_.starts_with(kUtf8Bom)) pos_ = kUtf8Bom.size();
  }

  std::vector<CsvRecord> records() {
    std::vector<CsvRecord> out;
    while (skip_blank_and_comment_lines()) out.push_back(record());
    return out;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  [[noreturn]] void fail(std::int64_t line, const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", source_, line, what));
  }

  // At a line ending (LF or CRLF): consumes it and counts the line. A CR that no LF
  // follows is an error: it is neither RFC 4180's line break nor field content.
  bool take_line_end() {
    if (at_end()) return false;
    if (peek() == '\n') {
      ++pos_;
      ++line_;
      return true;
    }
    if (peek() == '\r') {
      if (pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') {
        pos_ += 2;
        ++line_;
        return true;
      }
      fail(line_, "a carriage return without a line feed (lines end with LF or CRLF)");
    }
    return false;
  }

  void skip_blanks() {
    while (!at_end() && is_blank(peek())) ++pos_;
  }

  // Skips lines holding only blanks or a '#' comment; false at the end of the input.
  bool skip_blank_and_comment_lines() {
    for (;;) {
      const std::size_t start = pos_;
      skip_blanks();
      if (at_end()) return false;
      if (peek() == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
        take_line_end();
        continue;
      }
      if (take_line_end()) continue;
      pos_ = start;
      return true;
    }
  }

  CsvRecord record() {
    CsvRecord r;
    r.line = line_;
    for (;;) {
      r.fields.push_back(field());
      if (at_end() || take_line_end()) return r;
      // field() stops only at a comma, a line ending or the end.
      ++pos_;
    }
  }

  std::string field() {
    skip_blanks();
    std::string out;
    if (!at_end() && peek() == '"') {
      const std::int64_t opened = line_;
      ++pos_;
      for (;;) {
        if (at_end()) fail(opened, "a quoted field is not closed (a quote inside a field is written \"\")");
        const char c = peek();
        if (c == '\0') fail(line_, "a NUL byte (not a text file)");
        if (c == '"') {
          if (pos_ + 1 < s_.size() && s_[pos_ + 1] == '"') {
            out += '"';
            pos_ += 2;
            continue;
          }
          ++pos_;
          break;
        }
        if (c == '\n') ++line_;
        out += c;
        ++pos_;
      }
      skip_blanks();
      if (!at_end() && peek() != ',' && peek() != '\n' && peek() != '\r') {
        fail(line_, fmt::format("{} after the closing quote of a field (expected a comma or the line's end)",
                                shown(peek())));
      }
      return out;
    }
    while (!at_end() && peek() != ',' && peek() != '\n' && peek() != '\r') {
      const char c = peek();
      if (c == '"') {
        fail(line_, "a quote inside an unquoted field (quote the whole field and write the quote as \"\")");
      }
      if (c == '\0') fail(line_, "a NUL byte (not a text file)");
      out += c;
      ++pos_;
    }
    while (!out.empty() && is_blank(out.back())) out.pop_back();
    return out;
  }

  std::string_view s_;
  const std::string& source_;
  std::size_t pos_ = 0;
  std::int64_t line_ = 1;
};

}  // namespace

std::vector<CsvRecord> read_csv(std::string_view text, const std::string& source) {
  return Reader(text, source).records();
}

}  // namespace kvinfer::cli
