// SPDX-License-Identifier: Apache-2.0
// Public entry points of packbits / segment_packbits: validate, size the outputs,
// then run on x's device.
#include "kvinfer/ops/packbits.hpp"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "backend/backend.hpp"
#include "core/check.hpp"
#include "core/copy_to.hpp"
#include "core/op_params.hpp"

namespace kvinfer {
namespace {

void check_bits(std::string_view op, const TensorView& x) {
  detail::check_rank(op, "x", x, 1);
  detail::require(x.dtype() == DType::kBool || x.dtype() == DType::kU8, op, "x.dtype", dtype_name(x.dtype()),
                  "must be bool or uint8 (non-zero is true)");
  detail::check_last_dim_contiguous(op, "x", x);
  detail::check_backend_built(op, "x", x.device());
}

void check_order(std::string_view op, BitOrder order) {
  detail::require_v(order == BitOrder::kBig || order == BitOrder::kLittle, op, "bitorder", int(order),
                    "must be BitOrder::kBig or BitOrder::kLittle");
}

}  // namespace

void packbits(const TensorView& x, const TensorView& out, BitOrder order, Stream stream) {
  constexpr std::string_view op = "packbits";
  check_bits(op, x);
  check_order(op, order);
  detail::check_dtype(op, "out", out, DType::kU8);
  detail::check_rank(op, "out", out, 1);
  detail::check_size(op, "out", out, 0, packed_size(x.size(0)),
                     fmt::format("ceil(n / 8) bytes for n = {} elements of x", x.size(0)));
  detail::check_last_dim_contiguous(op, "out", out);
  detail::check_device(op, "out", out, x.device());
  if (x.size(0) == 0) return;

  const detail::PackBitsParams p{x, out, order, stream};
  detail::backend_for(x.device()).packbits(p);
}

Tensor packbits(const TensorView& x, BitOrder order, Stream stream) {
  check_bits("packbits", x);
  Tensor out = Tensor::empty({packed_size(x.size(0))}, DType::kU8, x.device());
  packbits(x, out, order, stream);
  return out;
}

SegmentPacked segment_packbits(const TensorView& x, const TensorView& indptr, BitOrder order, Stream stream) {
  constexpr std::string_view op = "segment_packbits";
  check_bits(op, x);
  check_order(op, order);
  detail::check_index_array(op, "indptr", indptr);
  detail::require_v(indptr.size(0) >= 1, op, "indptr.shape[0]", indptr.size(0),
                    "an indptr has batch_size + 1 >= 1 entries");
  const Device device = x.device();
  detail::require(indptr.device().is_cpu() || indptr.device() == device, op, "indptr.device",
                  to_string(indptr.device()),
                  fmt::format("must be on the host or on x's device ({})", to_string(device)));
  const std::int64_t batch_size = indptr.size(0) - 1;

  // The output size depends on the contents, so a device indptr comes to the host.
  Tensor indptr_copy;
  TensorView indptr_host = indptr;
  if (!indptr.device().is_cpu()) {
    indptr_copy = detail::copy_to(indptr, Device::cpu());
    indptr_host = indptr_copy.view();
  }
  const auto* in = indptr_host.data_as<const std::int32_t>();
  detail::check_indptr_contents(op, "indptr", in, batch_size + 1);
  detail::require_v(in[batch_size] == x.size(0), op, fmt::format("indptr[{}]", batch_size), in[batch_size],
                    fmt::format("must equal n = {}, the elements of x", x.size(0)));

  Tensor out_indptr_host = Tensor::empty({batch_size + 1}, DType::kI32);
  auto* out_ptr = out_indptr_host.data_as<std::int32_t>();
  std::int64_t bytes = 0;
  out_ptr[0] = 0;
  for (std::int64_t i = 0; i < batch_size; ++i) {
    bytes += packed_size(std::int64_t(in[i + 1]) - in[i]);
    // Padding adds at most one byte per segment; only a huge batch can overflow.
    detail::require_v(bytes <= std::numeric_limits<std::int32_t>::max(), op, "indptr", indptr.describe(),
                      "the packed size must fit in an int32 byte indptr");
    out_ptr[i + 1] = std::int32_t(bytes);
  }

  SegmentPacked result;
  result.data = Tensor::empty({bytes}, DType::kU8, device);
  if (device.is_cpu()) {
    result.indptr = std::move(out_indptr_host);
  } else {
    result.indptr = out_indptr_host.to(device);
  }
  if (bytes == 0) return result;

  // The backend reads the indptr where it runs.
  Tensor indptr_device;
  TensorView indptr_on_device = indptr;
  if (indptr.device() != device) {
    indptr_device = detail::copy_to(indptr, device);
    indptr_on_device = indptr_device.view();
  }
  const detail::SegmentPackBitsParams p{
      x, indptr_on_device, result.indptr, result.data, batch_size, order, stream};
  detail::backend_for(device).segment_packbits(p);
  return result;
}

}  // namespace kvinfer
