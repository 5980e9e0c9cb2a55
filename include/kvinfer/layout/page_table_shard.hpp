// SPDX-License-Identifier: Apache-2.0
// Context parallelism's split of a paged KV cache: one rank's shard of a page table,
// along the sequence, for attention over each shard and a merge of the ranks' states.
//
//   PageTableShard mine = shard_page_table(table, 16, rank, world, ShardPolicy::kStriped);
//   decode.plan({.page_table = mine.table(), ...});
//   decode.run(q, cache, out_r, {.lse = lse_r});   // then merge_states over the ranks
//
// Attention over the shards with LSE, merged by merge_states, equals attention over
// the whole table wherever no key's position matters: no window, RoPE or ALiBi (a
// shard's keys count their positions from 0), and decode or non-causal prefill. The
// positions that causal masks, RoPE and ALiBi need across shards are not in the API yet.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvinfer/layout/paged_kv_cache.hpp"

namespace kvinfer {

// Which of a request's pages a rank holds: kContiguous, pages [n r / R, n (r + 1) / R)
// of a request of n pages (ring attention's blocks); kStriped, pages j with
// j % R == r (load-balanced as striped attention is, for causal work).
enum class ShardPolicy { kContiguous, kStriped };

// A rank's page table: host int32 arrays in the layout of PageTable.
struct PageTableShard {
  std::vector<std::int32_t> indptr;         // [batch_size + 1]
  std::vector<std::int32_t> indices;        // the rank's page ids, request by request, in order
  std::vector<std::int32_t> last_page_len;  // the request's own where the rank holds its last
                                            // page, page_size otherwise, 0 for no page

  PageTable table() const;                     // views of the vectors
  std::vector<std::int32_t> kv_lens(std::int64_t page_size) const;
};

// Rank `rank` of `world`'s shard of table_host (indptr, indices and last_page_len on
// the host, checked as kv_lens_from_page_table does). A request the rank holds no page
// of is empty in its shard. Throws kvinfer::Error naming the argument: world < 1,
// rank outside [0, world), page_size < 1, a malformed table.
PageTableShard shard_page_table(const PageTable& table_host, std::int64_t page_size, int rank, int world,
                                ShardPolicy policy);

}  // namespace kvinfer
