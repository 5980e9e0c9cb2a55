// SPDX-License-Identifier: Apache-2.0
// The non-attention operations of the CPU backend. Arguments are validated by the
// public entry points in src/core before they reach here.
#pragma once

#include "core/op_params.hpp"

namespace kvinfer::cpu {

void append_paged_kv_cache(const detail::AppendPagedKVParams& p);
void append_paged_mla_kv_cache(const detail::AppendPagedMLAParams& p);
void get_batch_indices_positions(const detail::BatchIndicesPositionsParams& p);
void get_seq_lens(const detail::SeqLensParams& p);
void packbits(const detail::PackBitsParams& p);
void segment_packbits(const detail::SegmentPackBitsParams& p);
void merge_state(const detail::MergeStateParams& p);
void merge_states(const detail::MergeStatesParams& p);

}  // namespace kvinfer::cpu
