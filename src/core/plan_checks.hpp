// SPDX-License-Identifier: Apache-2.0
// Checks every plan/run wrapper shares: the device it is bound to, its capacity,
// host length arrays, scalar options, and the page ids run() reads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/tensor.hpp"

namespace kvinfer::detail {

// A wrapper bound to a GPU needs the CUDA backend and that GPU.
void check_wrapper_device(std::string_view op, Device device);

// Every field of a fixed capacity is non-negative.
void check_capacity(std::string_view op, const Capacity& capacity);

// x is finite and > 0 (positive) or >= 0.
void check_finite(std::string_view op, std::string_view arg, float x, bool positive, std::string_view rule);

// A host int32 indptr of batch_size + 1 entries (batch_size < 0: any) -> the
// per-request lengths, after checking dtype, rank, device and contents.
std::vector<std::int32_t> host_lengths(std::string_view op, std::string_view name, const TensorView& indptr,
                                       std::int64_t batch_size);

// An int32 index array that plan() reads on the host (SPEC §5).
void check_host_index_array(std::string_view op, std::string_view name, const TensorView& t,
                            std::int64_t length);

// Page ids kv_indices[0, nnz) in [0, num_pages). On the CPU always; on a GPU only in
// checked mode (KVINFER_CHECK_INDICES=1), since reading them synchronises (SPEC §5).
void check_page_ids(std::string_view op, const TensorView& kv_indices, std::int64_t nnz,
                    std::int64_t num_pages);

}  // namespace kvinfer::detail
