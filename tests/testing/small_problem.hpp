// SPDX-License-Identifier: Apache-2.0
// The plan arguments of a small attention problem (Hq 4, Hk 2, head_dim 64, pages of
// 16) over a test's own length arrays: the error and input-bound tests start from
// these valid arguments and break one field at a time.
#pragma once

#include "kvinfer/kvinfer.hpp"

namespace kvinfer::testing {

struct SmallProblem {
  Tensor qo_indptr, kv_indptr;                  // ragged: query and key rows of each request
  Tensor page_indptr, page_indices, last_page;  // paged: the page table

  PageTable table() const { return {page_indptr, page_indices, last_page}; }
  RaggedPrefillPlanArgs ragged() const {
    return {.qo_indptr = qo_indptr, .kv_indptr = kv_indptr, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim_qk = 64};
  }
  PagedPrefillPlanArgs paged() const {
    return {.qo_indptr = qo_indptr, .page_table = table(), .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 64,
            .page_size = 16};
  }
  DecodePlanArgs decode() const {
    return {.page_table = table(), .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 64, .page_size = 16};
  }
};

}  // namespace kvinfer::testing
