// SPDX-License-Identifier: Apache-2.0
// The page and mask ops from fuzzed arguments: append_paged_kv_cache,
// append_paged_mla_kv_cache, get_batch_indices_positions, get_seq_lens, packbits,
// segment_packbits, merge_state, merge_state_in_place and merge_states. Arrays are
// sized exactly (ASan sees any access outside them); a kvinfer::Error is a rejected
// input.
#include <cstdint>
#include <vector>

#include "fuzz_input.hpp"
#include "kvinfer/kvinfer.hpp"

namespace kvinfer::fuzz {
namespace {

constexpr DType kTypes[] = {DType::kF16, DType::kBF16, DType::kE4M3, DType::kE5M2, DType::kF32,
                            DType::kU8,  DType::kI32,  DType::kI64,  DType::kBool};

DType any_type(Input& in, DType usual) {
  if (in.in<int>(0, 7) != 0) return usual;
  if (in.in<int>(0, 15) == 0) return DType(in.in<int>(0, 255));
  return kTypes[in.in<std::size_t>(0, std::size(kTypes) - 1)];
}

// A size that is mostly `n`, sometimes off by one (a shape the op must reject).
std::int64_t near(Input& in, std::int64_t n) {
  return in.in<int>(0, 7) != 0 ? n : std::max<std::int64_t>(0, n + in.in<int>(-1, 1));
}

// Row counts per request, the page table that holds them and the append positions.
struct Appends {
  std::int64_t page_size = 1, num_pages = 1, nnz = 0;
  Tensor indptr, indices, last, batch_indices, positions;
  PageTable table() const { return {indptr, indices, last}; }
};

Appends appends_of(Input& in) {
  Appends a;
  a.page_size = std::int64_t(1) << in.in<int>(0, 4);
  const int batch = in.in<int>(0, 4);
  std::vector<std::int32_t> seq = in.lengths(batch, 40), indptr{0}, indices, last;
  for (std::int32_t len : seq) {
    const std::int32_t n = std::int32_t((len + a.page_size - 1) / a.page_size);
    indptr.push_back(indptr.back() + n);
    last.push_back(n == 0 ? 0 : std::int32_t(len - (n - 1) * a.page_size));
  }
  a.num_pages = std::max<std::int32_t>(1, indptr.back() + in.in<int>(-1, 1));
  for (std::int32_t i = 0; i < indptr.back(); ++i) indices.push_back(in.in<std::int32_t>(0, std::int32_t(a.num_pages - 1)));
  // Appended rows: a few positions of each request, or arbitrary (batch, position) pairs.
  std::vector<std::int32_t> batch_idx, pos;
  for (int b = 0; b < batch; ++b) {
    const std::int32_t n = in.in<std::int32_t>(0, std::min<std::int32_t>(seq[std::size_t(b)], 6));
    for (std::int32_t t = seq[std::size_t(b)] - n; t < seq[std::size_t(b)]; ++t) {
      batch_idx.push_back(b);
      pos.push_back(t);
    }
  }
  in.maybe_corrupt(indptr);
  in.maybe_corrupt(indices);
  in.maybe_corrupt(last);
  in.maybe_corrupt(batch_idx);
  in.maybe_corrupt(pos);
  a.nnz = std::int64_t(pos.size());
  a.indptr = int32_tensor(indptr);
  a.indices = int32_tensor(indices);
  a.last = int32_tensor(last);
  a.batch_indices = int32_tensor(batch_idx);
  a.positions = int32_tensor(pos);
  return a;
}

void append_kv(Input& in) {
  const Appends a = appends_of(in);
  const std::int64_t heads = in.in<std::int64_t>(1, 3), dim = std::int64_t(4) << in.in<int>(0, 5);
  const KVLayout layout = in.flag() ? KVLayout::kNHD : KVLayout::kHND;
  const bool nhd = layout == KVLayout::kNHD;
  const DType dtype = in.flag() ? DType::kBF16 : any_type(in, DType::kF16);
  const std::int64_t x = nhd ? a.page_size : heads, y = nhd ? heads : a.page_size;
  Tensor kv, k, v;
  PagedKVCache cache;
  if (in.flag()) {
    kv = filled({a.num_pages, 2, x, y, dim}, dtype, in.seed());
    cache = PagedKVCache::combined(kv, layout);
  } else {
    k = filled({a.num_pages, x, y, dim}, dtype, in.seed());
    v = filled({near(in, a.num_pages), x, y, dim}, dtype, in.seed());
    cache = PagedKVCache::pair(k, v, layout);
  }
  Tensor ak = filled({near(in, a.nnz), near(in, heads), near(in, dim)}, any_type(in, dtype), in.seed());
  Tensor av = filled({near(in, a.nnz), heads, dim}, any_type(in, dtype), in.seed());
  append_paged_kv_cache(ak, av, a.batch_indices, a.positions, cache, a.table());
}

void append_mla(Input& in) {
  const Appends a = appends_of(in);
  const std::int64_t dc = std::int64_t(16) << in.in<int>(0, 5), dk = in.flag() ? 64 : (in.flag() ? 0 : 16);
  const DType dtype = in.flag() ? DType::kBF16 : any_type(in, DType::kF16);
  Tensor ckv = filled({a.num_pages, a.page_size, dc}, dtype, in.seed());
  Tensor kpe = filled({near(in, a.num_pages), a.page_size, std::max<std::int64_t>(dk, 1)}, dtype, in.seed());
  const MLACache cache = dk > 0 ? MLACache::pair(ckv, kpe) : MLACache{ckv, {}};
  Tensor ac = filled({near(in, a.nnz), near(in, dc)}, any_type(in, dtype), in.seed());
  Tensor ap = filled({near(in, a.nnz), std::max<std::int64_t>(near(in, dk), 1)}, any_type(in, dtype), in.seed());
  append_paged_mla_kv_cache(ac, dk > 0 || in.flag() ? ap.view() : TensorView(), a.batch_indices, a.positions, cache,
                            a.table());
}

void batch_indices_positions(Input& in) {
  const int batch = in.in<int>(0, 5);
  std::vector<std::int32_t> append = in.lengths(batch, 8), seq;
  for (std::int32_t n : append) seq.push_back(n + in.in<std::int32_t>(0, 20));
  std::vector<std::int32_t> indptr = indptr_of(append);
  in.maybe_corrupt(indptr);
  in.maybe_corrupt(seq);
  const std::int64_t nnz = indptr.empty() ? 0 : std::max<std::int32_t>(0, indptr.back());
  Tensor b = Tensor::empty({near(in, std::min<std::int64_t>(nnz, 256))}, any_type(in, DType::kI32));
  Tensor p = Tensor::empty({near(in, std::min<std::int64_t>(nnz, 256))}, any_type(in, DType::kI32));
  get_batch_indices_positions(int32_tensor(indptr), int32_tensor(seq), b, p);
}

void seq_lens(Input& in) {
  const int batch = in.in<int>(0, 5);
  std::vector<std::int32_t> pages = in.lengths(batch, 6), last;
  const std::int64_t page_size = in.count(1, 16);
  for (std::int32_t n : pages) last.push_back(n == 0 ? 0 : in.in<std::int32_t>(1, 16));
  std::vector<std::int32_t> indptr = indptr_of(pages);
  in.maybe_corrupt(indptr);
  in.maybe_corrupt(last);
  Tensor out = Tensor::empty({near(in, batch)}, any_type(in, DType::kI32));
  get_seq_lens(int32_tensor(indptr), int32_tensor(last), page_size, out);
}

void pack(Input& in) {
  const std::int64_t n = in.in<std::int64_t>(0, 300);
  const DType dtype = any_type(in, in.flag() ? DType::kBool : DType::kU8);
  const BitOrder order = in.enumerator<BitOrder>(2);
  Tensor x = filled({n}, dtype, in.seed());
  if (in.flag()) {
    Tensor out = Tensor::empty({near(in, packed_size(n))}, any_type(in, DType::kU8));
    packbits(x, out, order);
  } else if (in.flag()) {
    (void)packbits(x, order);
  } else {
    std::vector<std::int32_t> seg{0};
    while (seg.back() < n && seg.size() < 10) seg.push_back(std::min<std::int32_t>(std::int32_t(n), seg.back() + in.in<std::int32_t>(0, 60)));
    if (seg.back() != n) seg.push_back(std::int32_t(n));
    in.maybe_corrupt(seg);
    (void)segment_packbits(x, int32_tensor(seg), order);
  }
}

void merge(Input& in) {
  const std::int64_t rows = in.in<std::int64_t>(0, 6), heads = in.in<std::int64_t>(1, 4);
  const std::int64_t dim = std::int64_t(1) << in.in<int>(0, 8);
  const DType dtype = any_type(in, in.flag() ? DType::kF16 : DType::kBF16);
  auto v_of = [&] { return filled({near(in, rows), near(in, heads), near(in, dim)}, any_type(in, dtype), in.seed()); };
  auto s_of = [&] { return filled({near(in, rows), near(in, heads)}, any_type(in, DType::kF32), in.seed()); };
  switch (in.in<int>(0, 2)) {
    case 0: {
      Tensor va = v_of(), sa = s_of(), vb = v_of(), sb = s_of(), vo = v_of(), so = s_of();
      merge_state(va, sa, vb, sb, vo, so);
      break;
    }
    case 1: {
      Tensor v = v_of(), s = s_of(), vo = v_of(), so = s_of(), mask;
      if (in.flag()) {
        mask = filled({near(in, rows)}, any_type(in, DType::kBool), in.seed());
        if (mask.dtype() == DType::kBool) {
          for (std::int64_t i = 0; i < mask.numel(); ++i) mask.data_as<std::uint8_t>()[i] &= 1;
        }
      }
      merge_state_in_place(v, s, vo, so, mask);
      break;
    }
    default: {
      const std::int64_t states = in.in<std::int64_t>(0, 5);
      Tensor v = filled({near(in, rows), near(in, states), heads, near(in, dim)}, any_type(in, dtype), in.seed());
      Tensor s = filled({near(in, rows), near(in, states), heads}, any_type(in, DType::kF32), in.seed());
      Tensor vo = Tensor::empty({near(in, rows), heads, near(in, dim)}, any_type(in, dtype));
      Tensor so = Tensor::empty({near(in, rows), heads}, any_type(in, DType::kF32));
      merge_states(v, s, vo, so);
      break;
    }
  }
}

}  // namespace
}  // namespace kvinfer::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvinfer::fuzz;
  return run_one_of(data, size, {append_kv, append_mla, batch_indices_positions, seq_lens, pack, merge});
}
