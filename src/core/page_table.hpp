// SPDX-License-Identifier: Apache-2.0
// Content checks of host page-table arrays shared by the layout validators and
// the page operations (get_seq_lens reads a page table without its indices).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvinfer::detail {

// kv_len per request from host kv_indptr [batch_size + 1] and kv_last_page_len
// [batch_size], after checking the indptr (starts at 0, non-decreasing) and each
// last_page_len: in [1, page_size] for a request with pages, 0 for one without.
std::vector<std::int32_t> kv_lens_from_last_page_len(std::string_view op, const std::int32_t* kv_indptr,
                                                     const std::int32_t* kv_last_page_len,
                                                     std::int64_t batch_size, std::int64_t page_size);

}  // namespace kvinfer::detail
