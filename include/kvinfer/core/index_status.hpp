// SPDX-License-Identifier: Apache-2.0
// What a GPU kernel found wrong in an index array that lives in device memory: a page
// id of kv_indices outside the cache. The MLA kernel checks every page id, and so do
// the other attention kernels in a build with device index checks (the CMake option
// KVINFER_DEVICE_INDEX_CHECKS, off by default: docs/semantics.md says what it costs).
// A checked kernel never uses a bad id: a work item that meets one writes its rows as
// zeros with LSE -inf (a split request's merge zeroes the whole row). The first bad
// value is recorded on the device, where reading it would synchronise; the host reads
// it when it chooses (docs/semantics.md, "Bad indices on the GPU"):
//   - RunOptions::check_indices / MLARunOptions::check_indices (default: the
//     environment's KVINFER_CHECK_INDICES=1) makes run() wait for its kernels and
//     throw kvinfer::Error naming the array, the element and the value;
//   - a wrapper's status() returns it at the caller's own synchronisation points, and
//     clears it.
// The CPU backend throws at the call instead: its status is always ok(). The page
// operations (append) check on the host in the checked mode.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvinfer {

struct IndexStatus {
  std::string array;         // "kv_indices"; empty: none
  std::int64_t index = 0;    // the element of the array
  std::int64_t value = 0;    // what it held
  std::int64_t limit = 0;    // the bound of the rule
  std::int64_t request = -1; // the batch entry it belongs to, where known
  std::string rule;          // the rule it broke

  bool ok() const { return array.empty(); }
  // "<array>[<index>] = <value>: <rule>", or "ok".
  std::string message() const;
  // Throws the kvinfer::Error of this status for operation `op` (unless ok()).
  void throw_if_bad(std::string_view op) const;
};

}  // namespace kvinfer
