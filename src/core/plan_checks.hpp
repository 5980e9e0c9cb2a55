// SPDX-License-Identifier: Apache-2.0
// Checks every plan/run wrapper shares: the device it is bound to, its capacity,
// host length arrays, scalar options, and the page ids run() reads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvinfer/attention/options.hpp"
#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/layout/kv_layout.hpp"

namespace kvinfer::detail {

// A wrapper bound to a GPU needs the CUDA backend and that GPU.
void check_wrapper_device(std::string_view op, Device device);

// Head counts a plan accepts: far beyond any model's, small enough that no product
// of heads, rows and dims overflows.
inline constexpr std::int64_t kMaxHeads = std::int64_t(1) << 16;

// Every field of a fixed capacity is in [0, 2^31 - 1] (the range of the int32
// index arrays it bounds).
void check_capacity(std::string_view op, const Capacity& capacity);

// The enumerations of AttentionOptions (mask_mode, pos_encoding, backend) and a KV
// layout hold one of their values: an enum cast from an integer may not.
void check_options_enums(std::string_view op, const AttentionOptions& options);
void check_kv_layout(std::string_view op, std::string_view arg, KVLayout layout);

// x is finite and > 0 (positive) or >= 0.
void check_finite(std::string_view op, std::string_view arg, float x, bool positive, std::string_view rule);

// A host int32 indptr of batch_size + 1 entries (batch_size < 0: any) -> the
// per-request lengths, after checking dtype, rank, device and contents.
std::vector<std::int32_t> host_lengths(std::string_view op, std::string_view name, const TensorView& indptr,
                                       std::int64_t batch_size);

// An int32 index array that plan() reads on the host (SPEC §5).
void check_host_index_array(std::string_view op, std::string_view name, const TensorView& t,
                            std::int64_t length);

// Page ids kv_indices[0, nnz) in [0, num_pages). On the CPU always; on a GPU only when
// `on_device` (the checked mode, RunOptions::check_indices), since reading them
// synchronises (SPEC §5). `pages_of` names what num_pages counts, for the message.
void check_page_ids(std::string_view op, const TensorView& kv_indices, std::int64_t nnz,
                    std::int64_t num_pages, std::string_view pages_of, bool on_device);

}  // namespace kvinfer::detail
