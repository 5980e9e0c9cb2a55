// SPDX-License-Identifier: Apache-2.0
// Comma-separated values as RFC 4180 defines them: fields separated by commas,
// records by CRLF or LF; a field in double quotes may hold commas, line breaks and
// doubled quotes (""), which stand for one quote. Beyond the RFC, for trace files
// written by hand or by spreadsheets: a UTF-8 byte-order mark at the start is
// skipped; blank lines and lines whose first non-blank character is '#' are skipped
// between records; spaces and tabs around a field (outside its quotes) are dropped.
// Malformed input (a stray quote, an unterminated quoted field, a lone carriage
// return, a NUL byte) throws InputError naming the source and the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvinfer::cli {

struct CsvRecord {
  std::int64_t line = 0;  // 1-based line on which the record starts
  std::vector<std::string> fields;
};

// All records of `text` (the header, if any, is the first); `source` names the
// input in messages ("trace.csv" gives "trace.csv:7: ...").
std::vector<CsvRecord> read_csv(std::string_view text, const std::string& source);

}  // namespace kvinfer::cli
