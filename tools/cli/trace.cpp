// SPDX-License-Identifier: Apache-2.0
#include "trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "csv_reader.hpp"
#include "files.hpp"
#include "input_error.hpp"

namespace kvinfer::cli {
namespace {

// Token counts stay far below int32 limits everywhere (positions, page counts).
constexpr std::int64_t kMaxTokens = 1 << 20;
constexpr std::int64_t kMaxArrival = 1'000'000'000;
constexpr std::int64_t kMaxRequests = 1'000'000;
// A trace of a million requests takes ~30 MB as CSV, ~80 MB as JSON; the limit keeps a
// wrong path (a device, a log) from being read into memory whole.
constexpr std::int64_t kMaxTraceBytes = std::int64_t(128) << 20;
// The trace format nests three deep ({"requests": [{...}]}); anything far deeper is
// not a trace, and a bound keeps the parser's memory in check.
constexpr int kMaxJsonDepth = 16;

std::int32_t log_uniform(std::mt19937_64& rng, std::int32_t lo, std::int32_t hi) {
  if (hi <= lo) return lo;
  std::uniform_real_distribution<double> u(std::log(double(lo)), std::log(double(hi) + 1.0));
  return std::clamp(std::int32_t(std::exp(u(rng))), lo, hi);
}

std::int32_t uniform(std::mt19937_64& rng, std::int32_t lo, std::int32_t hi) {
  return std::uniform_int_distribution<std::int32_t>(lo, std::max(lo, hi))(rng);
}

// Group index of `name`, created on first use with this prefix length.
std::int32_t group_of(Trace& t, std::map<std::string, std::int32_t>& by_name, const std::string& name,
                      std::int32_t prefix_len, const std::string& where) {
  auto [it, added] = by_name.emplace(name, std::int32_t(t.prefix_groups.size()));
  if (added) {
    t.prefix_groups.push_back({name, prefix_len, 0});
  } else if (t.prefix_groups[std::size_t(it->second)].prefix_len != prefix_len) {
    throw InputError(
        fmt::format("{}: prefix_len = {}: prefix group \"{}\" was given prefix_len {} before; a group "
                    "shares one prefix",
                    where, prefix_len, name, t.prefix_groups[std::size_t(it->second)].prefix_len));
  }
  ++t.prefix_groups[std::size_t(it->second)].members;
  return it->second;
}

void finish(Trace& t) {
  std::stable_sort(t.requests.begin(), t.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival < b.arrival; });
}

// ------------------------------------------------------------------ JSON
// A request of the trace file: its arrival step and lengths within the limits.
TraceRequest checked_request(const std::string& where, std::int64_t arrival, std::int64_t prompt,
                             std::int64_t gen) {
  if (arrival < 0 || arrival > kMaxArrival) {
    throw InputError(fmt::format("{}: arrival = {}: must be a step in [0, {}]", where, arrival, kMaxArrival));
  }
  if (prompt < 1 || prompt > kMaxTokens) {
    throw InputError(fmt::format("{}: prompt_len = {}: must be in [1, {}]", where, prompt, kMaxTokens));
  }
  if (gen < 1 || gen > kMaxTokens) {
    throw InputError(fmt::format("{}: gen_len = {}: must be in [1, {}]", where, gen, kMaxTokens));
  }
  TraceRequest q;
  q.arrival = arrival;
  q.prompt_len = std::int32_t(prompt);
  q.gen_len = std::int32_t(gen);
  return q;
}

std::int64_t json_int(const nlohmann::json& obj, const char* key, const std::string& where, bool required,
                      std::int64_t fallback) {
  if (!obj.contains(key)) {
    if (required) throw InputError(fmt::format("{}: missing field \"{}\"", where, key));
    return fallback;
  }
  const nlohmann::json& v = obj[key];
  // An integer beyond 64 bits is parsed as a float; either way it is not a valid count.
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX))) {
    throw InputError(fmt::format("{}: {} = {}: must be an integer{}", where, key, v.dump(),
                                 v.is_number() ? " within 64 bits" : ""));
  }
  return v.get<std::int64_t>();
}

// Parses `text` as JSON, refusing what nlohmann's parser would accept silently: a key
// twice in one object (the last would win) and nesting deeper than the trace format.
// Numbers beyond a double's range are nlohmann's own error (out_of_range 406).
nlohmann::json parse_json_strict(const std::string& path, const std::string& text) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::vector<std::string>> keys;  // keys seen in each open object
  const nlohmann::json::parser_callback_t check = [&](int depth, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= kMaxJsonDepth) {
          throw InputError(
              fmt::format("{}: nested deeper than {} levels (not a trace)", path, kMaxJsonDepth));
        }
        if (event == Event::object_start) keys.emplace_back();
        break;
      case Event::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Event::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (std::find(keys.back().begin(), keys.back().end(), k) != keys.back().end()) {
          throw InputError(fmt::format("{}: key \"{}\" appears twice in one object", path, k));
        }
        keys.back().push_back(k);
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    throw InputError(fmt::format("{}: a number out of range: {}", path, e.what()));
  }
}

Trace parse_json(const std::string& path, const std::string& text) {
  const nlohmann::json doc = parse_json_strict(path, text);
  const nlohmann::json* list = &doc;
  if (doc.is_object()) {
    if (!doc.contains("requests"))
      throw InputError(fmt::format("{}: missing field \"requests\" (an array)", path));
    list = &doc.at("requests");
  }
  if (!list->is_array()) throw InputError(fmt::format("{}: \"requests\" must be an array of objects", path));
  if (std::int64_t(list->size()) > kMaxRequests) {
    throw InputError(fmt::format("{}: {} requests: at most {}", path, list->size(), kMaxRequests));
  }
  Trace t;
  t.source = path;
  std::map<std::string, std::int32_t> groups;
  static const char* kKnown[] = {"arrival", "prompt_len", "gen_len", "prefix_group", "prefix_len", "id"};
  for (std::size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& r = (*list)[i];
    const std::string where = fmt::format("{}: requests[{}]", path, i);
    if (!r.is_object()) throw InputError(fmt::format("{}: must be an object, got {}", where, r.dump()));
    for (const auto& [key, _] : r.items()) {
      if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
        throw InputError(
            fmt::format("{}: unknown field \"{}\" (known: arrival, prompt_len, gen_len, prefix_group, "
                        "prefix_len, id)",
                        where, key));
      }
    }
    const std::int64_t arrival = json_int(r, "arrival", where, false, 0);
    const std::int64_t prompt = json_int(r, "prompt_len", where, true, 0);
    const std::int64_t gen = json_int(r, "gen_len", where, true, 0);
    TraceRequest q = checked_request(where, arrival, prompt, gen);
    if (r.contains("prefix_group") && !r["prefix_group"].is_null()) {
      const nlohmann::json& g = r["prefix_group"];
      if (!g.is_string() && !g.is_number_integer()) {
        throw InputError(
            fmt::format("{}: prefix_group = {}: must be a string or an integer", where, g.dump()));
      }
      const std::string name = g.is_string() ? g.get<std::string>() : std::to_string(g.get<std::int64_t>());
      const std::int64_t plen = json_int(r, "prefix_len", where, true, 0);
      if (plen < 1 || plen >= prompt) {
        throw InputError(
            fmt::format("{}: prefix_len = {}: must be in [1, prompt_len) = [1, {})", where, plen, prompt));
      }
      q.prefix_len = std::int32_t(plen);
      q.prefix_group = group_of(t, groups, name, q.prefix_len, where);
    } else if (r.contains("prefix_len") && json_int(r, "prefix_len", where, false, 0) != 0) {
      throw InputError(
          fmt::format("{}: prefix_len without prefix_group: a prefix is shared within a group", where));
    }
    t.requests.push_back(q);
  }
  return t;
}

// ------------------------------------------------------------------ CSV
std::int64_t csv_int(const std::string& cell, const std::string& where, const std::string& column) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size()) {
    throw InputError(fmt::format("{}: {} = \"{}\": must be an integer{}", where, column, cell,
                                 ec == std::errc::result_out_of_range ? " within 64 bits" : ""));
  }
  return v;
}

Trace parse_csv(const std::string& path, const std::string& text) {
  Trace t;
  t.source = path;
  std::map<std::string, std::int32_t> groups;
  std::vector<std::string> header;
  std::map<std::string, std::size_t> col;
  const std::vector<CsvRecord> records = read_csv(text, path);
  if (std::int64_t(records.size()) > kMaxRequests + 1) {
    throw InputError(fmt::format("{}: {} requests: at most {}", path, records.size() - 1, kMaxRequests));
  }
  for (const CsvRecord& record : records) {
    const std::string where = fmt::format("{}:{}", path, record.line);
    const std::vector<std::string>& cells = record.fields;
    if (header.empty()) {
      header = cells;
      for (std::size_t i = 0; i < header.size(); ++i) {
        const std::string& h = header[i];
        if (h != "arrival" && h != "prompt_len" && h != "gen_len" && h != "prefix_group" &&
            h != "prefix_len" && h != "id") {
          throw InputError(
              fmt::format("{}: unknown column \"{}\" in the header (known: arrival, prompt_len, gen_len, "
                          "prefix_group, prefix_len, id)",
                          where, h));
        }
        if (!col.emplace(h, i).second)
          throw InputError(fmt::format("{}: column \"{}\" appears twice", where, h));
      }
      for (const char* req : {"prompt_len", "gen_len"}) {
        if (!col.count(req)) throw InputError(fmt::format("{}: the header has no \"{}\" column", where, req));
      }
      continue;
    }
    if (cells.size() != header.size()) {
      throw InputError(fmt::format("{}: {} fields, the header has {}", where, cells.size(), header.size()));
    }
    auto cell = [&](const char* name) -> const std::string* {
      const auto it = col.find(name);
      return it == col.end() ? nullptr : &cells[it->second];
    };
    const std::int64_t arrival =
        cell("arrival") && !cell("arrival")->empty() ? csv_int(*cell("arrival"), where, "arrival") : 0;
    const std::int64_t prompt = csv_int(*cell("prompt_len"), where, "prompt_len");
    const std::int64_t gen = csv_int(*cell("gen_len"), where, "gen_len");
    TraceRequest q = checked_request(where, arrival, prompt, gen);
    const std::string* group = cell("prefix_group");
    const std::string* plen_cell = cell("prefix_len");
    if (group && !group->empty()) {
      if (!plen_cell || plen_cell->empty()) {
        throw InputError(fmt::format("{}: prefix_group \"{}\" needs a prefix_len", where, *group));
      }
      const std::int64_t plen = csv_int(*plen_cell, where, "prefix_len");
      if (plen < 1 || plen >= prompt) {
        throw InputError(
            fmt::format("{}: prefix_len = {}: must be in [1, prompt_len) = [1, {})", where, plen, prompt));
      }
      q.prefix_len = std::int32_t(plen);
      q.prefix_group = group_of(t, groups, *group, q.prefix_len, where);
    } else if (plen_cell && !plen_cell->empty() && csv_int(*plen_cell, where, "prefix_len") != 0) {
      throw InputError(
          fmt::format("{}: prefix_len without prefix_group: a prefix is shared within a group", where));
    }
    t.requests.push_back(q);
  }
  if (header.empty()) throw InputError(fmt::format("{}: empty CSV (expected a header line)", path));
  return t;
}

}  // namespace

std::vector<TraceInfo> synthetic_traces() {
  return {{"mixed",
           "prompts log-uniform in the prompt range; half the requests open with one of the shared "
           "prefixes (a system prompt) followed by a short question"},
          {"chat", "independent requests, prompts log-uniform in the prompt range"},
          {"shared-prefix",
           "every request opens with one of the shared prefixes, then a short question "
           "(cascade attention's case)"}};
}

Trace make_synthetic_trace(const SyntheticTraceOptions& o) {
  if (o.name != "mixed" && o.name != "chat" && o.name != "shared-prefix") {
    throw InputError(
        fmt::format("--trace = {}: unknown synthetic trace (known: mixed, chat, shared-prefix; or give "
                    "--trace-file PATH)",
                    o.name));
  }
  if (o.num_requests < 1 || o.num_requests > 1'000'000) {
    throw InputError(fmt::format("--requests = {}: must be in [1, 1000000]", o.num_requests));
  }
  if (o.prompt_min < 1 || o.prompt_max < o.prompt_min || o.prompt_max > kMaxTokens) {
    throw InputError(fmt::format("--prompt-len = {}:{}: must be MIN:MAX with 1 <= MIN <= MAX <= {}",
                                 o.prompt_min, o.prompt_max, kMaxTokens));
  }
  if (o.gen_min < 1 || o.gen_max < o.gen_min || o.gen_max > kMaxTokens) {
    throw InputError(fmt::format("--gen-len = {}:{}: must be MIN:MAX with 1 <= MIN <= MAX <= {}", o.gen_min,
                                 o.gen_max, kMaxTokens));
  }
  const bool grouped = o.name != "chat";
  if (grouped && (o.prefix_groups < 1 || o.prefix_len < 1 || o.prefix_len > kMaxTokens)) {
    throw InputError(
        fmt::format("--prefix-groups = {}, --prefix-len = {}: trace {} needs at least one group and a "
                    "prefix of at least one token",
                    o.prefix_groups, o.prefix_len, o.name));
  }
  if (!(o.arrival_rate >= 0.0) || !std::isfinite(o.arrival_rate)) {
    throw InputError(
        fmt::format("--arrival-rate = {}: must be >= 0 requests per step (0: all at once)", o.arrival_rate));
  }
  std::mt19937_64 rng(o.seed);
  Trace t;
  t.source = "synthetic:" + o.name;
  if (grouped) {
    for (int g = 0; g < o.prefix_groups; ++g)
      t.prefix_groups.push_back({fmt::format("system{}", g), o.prefix_len, 0});
  }
  std::exponential_distribution<double> gap(o.arrival_rate > 0 ? o.arrival_rate : 1.0);
  double clock = 0.0;
  for (int i = 0; i < o.num_requests; ++i) {
    TraceRequest q;
    if (o.arrival_rate > 0 && i > 0) clock += gap(rng);
    q.arrival = std::int64_t(clock);
    q.gen_len = uniform(rng, o.gen_min, o.gen_max);
    const bool member = o.name == "shared-prefix" || (o.name == "mixed" && (rng() & 1));
    if (member) {
      // A question after the shared prefix: an eighth of the prompt range.
      q.prefix_group = std::int32_t(rng() % std::uint64_t(o.prefix_groups));
      q.prefix_len = o.prefix_len;
      q.prompt_len =
          o.prefix_len + log_uniform(rng, std::max(1, o.prompt_min / 8), std::max(1, o.prompt_max / 8));
      ++t.prefix_groups[std::size_t(q.prefix_group)].members;
    } else {
      q.prompt_len = log_uniform(rng, o.prompt_min, o.prompt_max);
    }
    t.requests.push_back(q);
  }
  finish(t);
  validate_trace(t);
  return t;
}

Trace load_trace_file(const std::string& path) {
  const std::string flag = "--trace-file";
  // The kind of file and its size are checked before a byte is read (a device such as
  // /dev/zero never ends); the format follows the extension, in any case.
  const RegularFile file = check_regular_file(flag, path, kMaxTraceBytes);
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext != ".json" && ext != ".csv") {
    throw InputError(fmt::format("{} = {}: unknown format (name it .json or .csv, in any case)", flag, path));
  }
  const std::string text = read_regular_file(flag, file);
  Trace t = ext == ".json" ? parse_json(path, text) : parse_csv(path, text);
  finish(t);
  validate_trace(t);
  return t;
}

void validate_trace(const Trace& t) {
  if (t.requests.empty()) throw InputError(fmt::format("{}: the trace has no requests", t.source));
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const TraceRequest& r = t.requests[i];
    const std::string where = fmt::format("{}: request {}", t.source, i);
    if (std::int64_t(r.prompt_len) + r.gen_len > kMaxTokens) {
      throw InputError(fmt::format("{}: prompt_len + gen_len = {}: must be at most {}", where,
                                   std::int64_t(r.prompt_len) + r.gen_len, kMaxTokens));
    }
    if (r.prefix_group >= 0 && (r.prefix_len < 1 || r.prefix_len >= r.prompt_len)) {
      throw InputError(fmt::format("{}: prefix_len = {}: must be in [1, prompt_len) = [1, {})", where,
                                   r.prefix_len, r.prompt_len));
    }
  }
}

}  // namespace kvinfer::cli
