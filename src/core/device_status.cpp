// SPDX-License-Identifier: Apache-2.0
// The device status on the host: reading and clearing it, and what it says as an
// IndexStatus or a kvinfer::Error.
#include "core/device_status_host.hpp"

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "kvinfer/core/error.hpp"

namespace kvinfer {

std::string IndexStatus::message() const {
  if (ok()) return "ok";
  return fmt::format("{}[{}] = {}: {}", array, index, value, rule);
}

void IndexStatus::throw_if_bad(std::string_view op) const {
  if (ok()) return;
  throw Error(op, fmt::format("{}[{}]", array, index), std::to_string(value), rule);
}

namespace detail {

IndexStatus describe(const DeviceStatus& s) {
  IndexStatus out;
  out.index = s.index;
  out.value = s.value;
  out.limit = s.limit;
  out.request = s.request;
  const std::string of_request = s.request >= 0 ? fmt::format(" (request {})", s.request) : std::string();
  switch (IndexArray(s.array)) {
    case IndexArray::kNone:
      return {};
    case IndexArray::kKvIndices:
      out.array = "kv_indices";
      out.rule = fmt::format("page ids must be in [0, {}), the pages of the cache{}; the kernel used a page of "
                             "the cache in its place and wrote the rows that read it as zeros with LSE -inf",
                             s.limit, of_request);
      break;
    default:
      out.array = "(unknown index array)";
      out.rule = fmt::format("status code {} from a kernel of another build", s.array);
  }
  return out;
}

IndexStatus take_status(Device device, DeviceStatus* status, Stream stream) {
  if (device.is_cpu() || status == nullptr) return {};
  const Backend& backend = backend_for(device);
  DeviceStatus host;
  backend.copy_async(&host, status, sizeof(host), stream);
  backend.synchronize(stream);
  if (host.array == 0) return {};
  // Cleared only when set: a status read that finds nothing writes nothing.
  backend.fill_async(status, 0, sizeof(DeviceStatus), stream);
  return describe(host);
}

bool checked_run(const std::optional<bool>& check_indices) {
  return check_indices.value_or(check_indices_enabled());
}

}  // namespace detail
}  // namespace kvinfer
