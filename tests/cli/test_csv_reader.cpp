// SPDX-License-Identifier: Apache-2.0
// The CLI's RFC 4180 reader on its own: quoting, line endings, the byte-order mark,
// comments, and the line each error names.
#include <gtest/gtest.h>

#include "cli/csv_reader.hpp"
#include "cli/input_error.hpp"

namespace kvinfer::cli {
namespace {

using Fields = std::vector<std::string>;

std::vector<Fields> fields(std::string_view text) {
  std::vector<Fields> out;
  for (const CsvRecord& r : read_csv(text, "t.csv")) out.push_back(r.fields);
  return out;
}

std::string error_of(std::string_view text) {
  try {
    read_csv(text, "t.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CsvReader, PlainRecordsWithLfOrCrlf) {
  EXPECT_EQ(fields("a,b\n1,2\n"), (std::vector<Fields>{{"a", "b"}, {"1", "2"}}));
  EXPECT_EQ(fields("a,b\r\n1,2\r\n"), (std::vector<Fields>{{"a", "b"}, {"1", "2"}}));
  EXPECT_EQ(fields("a,b\n1,2"), (std::vector<Fields>{{"a", "b"}, {"1", "2"}}));  // no final line break
  EXPECT_EQ(fields("a,,c,\n"), (std::vector<Fields>{{"a", "", "c", ""}}));       // empty fields
  EXPECT_TRUE(fields("").empty());
}

TEST(CsvReader, QuotedFieldsHoldCommasQuotesAndLineBreaks) {
  EXPECT_EQ(fields("\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\"\n"),
            (std::vector<Fields>{{"a,b", "say \"hi\"", "two\nlines"}}));
  EXPECT_EQ(fields("\"\",x\n"), (std::vector<Fields>{{"", "x"}}));
  // Blanks around a field are dropped, inside quotes kept.
  EXPECT_EQ(fields("  a ,\t\" b \" ,c\n"), (std::vector<Fields>{{"a", " b ", "c"}}));
}

TEST(CsvReader, BomCommentsAndBlankLines) {
  EXPECT_EQ(fields("\xEF\xBB\xBF\"h\"\n# note, not a record\n\n   \n1\n"),
            (std::vector<Fields>{{"h"}, {"1"}}));
  // A quoted field that starts with '#' is data.
  EXPECT_EQ(fields("\"#1\"\n"), (std::vector<Fields>{{"#1"}}));
}

TEST(CsvReader, RecordsKnowTheirFirstLine) {
  const std::vector<CsvRecord> r = read_csv("h\n# c\n\"a\nb\"\nc\n", "t.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].line, 1);
  EXPECT_EQ(r[1].line, 3);
  EXPECT_EQ(r[2].line, 5);
}

TEST(CsvReader, MalformedInputNamesTheLine) {
  EXPECT_EQ(error_of("a\n\"open\n\n"),
            "t.csv:2: a quoted field is not closed (a quote inside a field is written \"\")");
  EXPECT_EQ(error_of("a\nb\"c\n"),
            "t.csv:2: a quote inside an unquoted field (quote the whole field and write the quote as \"\")");
  EXPECT_EQ(error_of("\"a\"b\n"),
            "t.csv:1: 'b' after the closing quote of a field (expected a comma or the line's end)");
  EXPECT_EQ(error_of("a\rb\n"), "t.csv:1: a carriage return without a line feed (lines end with LF or CRLF)");
  EXPECT_EQ(error_of(std::string_view("a\n\0\n", 4)), "t.csv:2: a NUL byte (not a text file)");
}

}  // namespace
}  // namespace kvinfer::cli
