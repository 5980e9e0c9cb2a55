// SPDX-License-Identifier: Apache-2.0
#include "engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <type_traits>

#include "core/span_timer.hpp"
#include "cpu/convert.hpp"
#include "oracle_check.hpp"

namespace kvinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// An int32 array built on the host each step, and where the wrappers read it: the
// host array itself on the CPU, a reused device buffer on a GPU.
class IndexArray {
 public:
  std::vector<std::int32_t> host;

  void clear() { host.clear(); }
  // An indptr: empty but for its leading 0.
  void restart() {
    host.clear();
    host.push_back(0);
  }
  TensorView on_host() {
    if (host.capacity() == 0) host.reserve(16);  // a valid pointer even when empty
    return TensorView(host.data(), DType::kI32, {std::int64_t(host.size())});
  }
  TensorView on(Device device) {
    if (device.is_cpu()) return on_host();
    const auto n = std::int64_t(host.size());
    if (!dev_.defined() || dev_.numel() < std::max<std::int64_t>(n, 1)) {
      dev_ = Tensor::empty({std::max<std::int64_t>(2 * n, 64)}, DType::kI32, device);
    }
    const TensorView d = dev_.view().slice(0, 0, n);
    if (n > 0) copy(d, on_host());
    return d;
  }

 private:
  Tensor dev_;
};

// A CSR page table under construction: pages of each segment and the fill of its last page.
struct TableBuilder {
  IndexArray indptr, indices, last_page_len;
  void clear() {
    indptr.restart();
    indices.clear();
    last_page_len.clear();
  }
  void add(const std::int32_t* pages, std::int32_t num_pages, std::int32_t kv_len, std::int32_t page_size) {
    indices.host.insert(indices.host.end(), pages, pages + num_pages);
    indptr.host.push_back(std::int32_t(indices.host.size()));
    last_page_len.host.push_back(num_pages == 0 ? 0 : kv_len - (num_pages - 1) * page_size);
  }
  std::int64_t size() const { return std::int64_t(last_page_len.host.size()); }
  // indptr and last_page_len on the host (plan reads them there), indices on the device.
  PageTable for_plan(Device device) {
    return {indptr.on_host(), indices.on(device), last_page_len.on_host()};
  }
  PageTable on(Device device) { return {indptr.on(device), indices.on(device), last_page_len.on(device)}; }
};

// Random values on the device, drawn once; each use takes a view at a random offset,
// so that queries and new keys differ from step to step at no cost.
class RandomPool {
 public:
  RandomPool(DType dtype, std::int64_t max_numel, Device device, std::uint64_t seed)
      : dtype_(dtype), rng_(seed) {
    // Slack for the offsets; views start 16-element aligned (GPU kernels load 16 bytes).
    numel_ = max_numel + 65536;
    Tensor host = Tensor::empty({numel_}, dtype);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Drawn in float32 a chunk at a time and stored in `dtype` by the library's own
    // row conversion (round to nearest even).
    constexpr std::int64_t kChunk = 4096;
    float chunk[kChunk];
    auto* dst = static_cast<char*>(host.data());
    for (std::int64_t i = 0; i < numel_; i += kChunk) {
      const std::int64_t n = std::min(kChunk, numel_ - i);
      for (std::int64_t j = 0; j < n; ++j) chunk[j] = nd(rng_);
      cpu::store_row(chunk, dtype, dst + i * std::int64_t(dtype_size(dtype)), n);
    }
    data_ = device.is_cpu() ? std::move(host) : host.to(device);
  }
  TensorView take(std::initializer_list<std::int64_t> shape) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    const std::int64_t offset = std::uniform_int_distribution<std::int64_t>(0, (numel_ - n) / 16)(rng_) * 16;
    auto* p = static_cast<char*>(data_.data()) + offset * std::int64_t(dtype_size(dtype_));
    return TensorView(p, dtype_, shape, data_.device());
  }

 private:
  DType dtype_;
  std::mt19937_64 rng_;
  std::int64_t numel_ = 0;
  Tensor data_;
};

// Causal query-key pairs of a segment of qo_len queries at the end of kv_len keys.
double causal_pairs(double qo, double kv) {
  return qo * (kv - qo) + qo * (qo + 1) / 2;
}

}  // namespace

struct Engine::Impl {
  ModelShape model;
  EngineOptions opt;
  bool mla = false;
  double elem = 2, qelem = 2;  // bytes of a KV and of a q/o element: the steps' byte counts
  Tensor cache;  // GQA: [layers, pages, 2, page_size, Hk, D]; MLA: [layers, pages, page_size, ckv + kpe]
  Tensor out, lse, positions, batch_indices;
  std::unique_ptr<RandomPool> q_pool, kv_pool;
  std::int64_t step_index = 0;

  // Page tables of a step.
  IndexArray prefill_qo_indptr, cascade_qo_indptr[2], append_indptr, append_seq_lens;
  TableBuilder prefill_table, decode_table, cascade_table[2], append_table;
  IndexArray mla_prefill_kv_len, mla_decode_kv_len, mla_decode_qo_indptr;

  BatchPrefillWithPagedKVCache prefill;
  BatchDecodeWithPagedKVCache decode;
  MultiLevelCascadeAttention cascade;
  BatchMLAPagedAttention mla_prefill, mla_decode;

  Impl(const ModelShape& m, const EngineOptions& o)
      : model(m),
        opt(o),
        mla(m.kind == AttentionKind::kMla),
        elem(double(dtype_size(m.kv_dtype))),
        qelem(double(dtype_size(m.q_dtype))),
        prefill(o.device),
        decode(o.device),
        cascade(2, o.device),
        mla_prefill(o.device),
        mla_decode(o.device),
        spans(o.device, kSpanKinds) {}

  // The step's time per kind of work: device time on a GPU (span_timer.hpp), so that
  // the layers' kernels run back to back and no host round trip counts.
  enum SpanKind { kAppendSpan, kPrefillSpan, kDecodeSpan, kSpanKinds };
  detail::SpanTimer spans;
  void collect_spans(StepStats& st) {
    const std::vector<double> s = spans.collect();
    st.append_s = s[kAppendSpan];
    st.prefill_s = s[kPrefillSpan];
    st.decode_s = s[kDecodeSpan];
  }

  void sync() const {
    if (opt.device.is_cpu()) return;
    // A copy into pageable host memory returns when the device is done.
    float x = 0;
    copy(TensorView(&x, DType::kF32, {1}), lse.view().select(0, 0).slice(0, 0, 1));
  }

  // The tables every step builds: prefill's, decode's and the append of the new tokens.
  void start_tables() {
    prefill_qo_indptr.restart();
    prefill_table.clear();
    decode_table.clear();
    append_indptr.restart();
    append_seq_lens.clear();
    append_table.clear();
  }
  // A request's new tokens (the last new_tokens of its kv_len) go into its pages.
  void add_append(const std::vector<std::int32_t>& pages, std::int32_t kv_len, std::int32_t new_tokens) {
    append_table.add(pages.data(), std::int32_t(pages.size()), kv_len, opt.page_size);
    append_indptr.host.push_back(append_indptr.host.back() + new_tokens);
    append_seq_lens.host.push_back(kv_len);
  }
  // A prefill segment of the step's query rows, in the prefill tables and the append.
  void add_prefill(const PrefillWork& w, std::int64_t row, std::vector<CheckSegment>* segments) {
    prefill_qo_indptr.host.push_back(prefill_qo_indptr.host.back() + w.qo_len);
    prefill_table.add(w.pages.data(), std::int32_t(w.pages.size()), w.kv_len, opt.page_size);
    add_append(w.pages, w.kv_len, w.qo_len);
    if (segments) {
      segments->push_back({w.sequence < 0 ? fmt::format("prefill of the shared prefix of group {}", w.group)
                                          : fmt::format("prefill of request {}", w.sequence),
                           row, w.qo_len, w.kv_len, w.pages});
    }
  }

  // The append's table and each new token's (request, position): planned once a step.
  struct AppendPlan {
    PageTable table;
    TensorView batch_indices, positions;
  };
  AppendPlan plan_append(std::int64_t new_tokens) {
    const Device dev = opt.device;
    AppendPlan a{.table = append_table.on(dev),
                 .batch_indices = batch_indices.view().slice(0, 0, new_tokens),
                 .positions = positions.view().slice(0, 0, new_tokens)};
    if (new_tokens > 0) {
      get_batch_indices_positions(append_indptr.on(dev), append_seq_lens.on(dev), a.batch_indices, a.positions);
    }
    return a;
  }

  // `args` (a step's tables) with what every plan of a step shares: the model's heads,
  // head dims and dtypes (out in q's), the engine's page size; MLA's causal and scale.
  template <class Args>
  Args with_model(Args args) const {
    if constexpr (std::is_same_v<Args, MLAPlanArgs>) {
      args.num_heads = model.num_qo_heads;
      args.head_dim_ckv = model.head_dim_ckv;
      args.head_dim_kpe = model.head_dim_kpe;
      args.causal = true;
      args.sm_scale = model.sm_scale();
    } else {
      args.num_qo_heads = model.num_qo_heads;
      args.num_kv_heads = model.num_kv_heads;
      args.head_dim = model.head_dim;
      args.o_dtype = model.q_dtype;
    }
    args.page_size = opt.page_size;
    args.q_dtype = model.q_dtype;
    args.kv_dtype = model.kv_dtype;
    return args;
  }

  // The step's times, and its per-layer work summed over the layers.
  StepStats finish(StepStats st) {
    collect_spans(st);
    const double layers = model.num_layers;
    st.prefill_flops *= layers;
    st.prefill_bytes *= layers;
    st.decode_flops *= layers;
    st.decode_bytes *= layers;
    return st;
  }

  StepStats run_gqa(const StepBatch& batch, OracleCheck* check);
  StepStats run_mla(const StepBatch& batch, OracleCheck* check);
};

Engine::Engine(const ModelShape& model, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(model, options)) {
  Impl& m = *impl_;
  const Device dev = options.device;
  const std::int64_t L = model.num_layers, P = options.num_pages, ps = options.page_size;
  const std::int64_t rows = std::max<std::int64_t>(options.max_step_rows, 1);
  const std::int64_t hq = model.num_qo_heads;
  if (m.mla) {
    const std::int64_t width = model.head_dim_ckv + model.head_dim_kpe;
    m.cache = Tensor::empty({L, P, ps, width}, model.kv_dtype, dev);
    m.out = Tensor::empty({rows, hq, model.head_dim_ckv}, model.q_dtype, dev);
    m.q_pool = std::make_unique<RandomPool>(model.q_dtype, rows * hq * width, dev, options.seed * 3 + 1);
    m.kv_pool = std::make_unique<RandomPool>(model.kv_dtype, rows * width, dev, options.seed * 3 + 2);
  } else {
    const std::int64_t hk = model.num_kv_heads, d = model.head_dim;
    m.cache = Tensor::empty({L, P, 2, ps, hk, d}, model.kv_dtype, dev);
    m.out = Tensor::empty({rows, hq, d}, model.q_dtype, dev);
    m.q_pool = std::make_unique<RandomPool>(model.q_dtype, rows * hq * d, dev, options.seed * 3 + 1);
    m.kv_pool = std::make_unique<RandomPool>(model.kv_dtype, rows * hk * d, dev, options.seed * 3 + 2);
  }
  m.lse = Tensor::empty({rows, hq}, DType::kF32, dev);
  m.positions = Tensor::empty({rows}, DType::kI32, dev);
  m.batch_indices = Tensor::empty({rows}, DType::kI32, dev);
}

Engine::~Engine() = default;

std::int64_t Engine::kv_cache_bytes() const {
  return std::int64_t(impl_->cache.nbytes());
}

void Engine::set_on_layer(std::function<void(int layer)> on_layer) {
  impl_->opt.on_layer = std::move(on_layer);
}

StepStats Engine::run_step(const StepBatch& batch, OracleCheck* check) {
  ++impl_->step_index;
  return impl_->mla ? impl_->run_mla(batch, check) : impl_->run_gqa(batch, check);
}

StepStats Engine::Impl::run_gqa(const StepBatch& batch, OracleCheck* check) {
  StepStats st;
  const Device dev = opt.device;
  const std::int32_t ps = opt.page_size;
  const std::int64_t hq = model.num_qo_heads, hk = model.num_kv_heads, d = model.head_dim;

  // Decode rows of requests whose group has two or more members decoding go through
  // the cascade (the prefix read once per group); the others through plain decode.
  std::vector<const DecodeWork*> plain, grouped;
  std::vector<std::int32_t> group_sizes;
  {
    std::map<std::int32_t, std::vector<const DecodeWork*>> by_group;
    for (const DecodeWork& w : batch.decode) {
      if (opt.cascade && w.group >= 0 && w.shared_pages > 0) {
        by_group[w.group].push_back(&w);
      } else {
        plain.push_back(&w);
      }
    }
    for (auto& [g, members] : by_group) {
      if (members.size() < 2) {
        plain.push_back(members[0]);
        continue;
      }
      group_sizes.push_back(std::int32_t(members.size()));
      grouped.insert(grouped.end(), members.begin(), members.end());
    }
  }

  // Page tables. Rows of q/out: prefill segments, then plain decode, then cascade rows.
  start_tables();
  std::vector<CheckSegment> segments;
  std::int64_t row = 0;
  for (const PrefillWork& w : batch.prefill) {
    add_prefill(w, row, check ? &segments : nullptr);
    st.prefill_flops += causal_pairs(w.qo_len, w.kv_len) * double(hq) * 4.0 * double(d);
    st.prefill_bytes +=
        double(w.kv_len) * double(hk * d) * 2 * elem + double(w.qo_len) * double(hq * d) * 2 * qelem;
    row += w.qo_len;
  }
  const std::int64_t prefill_rows = row;
  for (const DecodeWork* w : plain) {
    decode_table.add(w->pages.data(), std::int32_t(w->pages.size()), w->kv_len, ps);
    st.decode_bytes += double(w->kv_len) * double(hk * d) * 2 * elem;
    if (check)
      segments.push_back({fmt::format("decode of request {}", w->sequence), row, 1, w->kv_len, w->pages});
    ++row;
  }
  for (std::size_t i = 0; i < 2; ++i) {
    cascade_qo_indptr[i].restart();
    cascade_table[i].clear();
  }
  {
    std::size_t k = 0;
    for (std::int32_t size : group_sizes) {
      const DecodeWork* first = grouped[k];
      cascade_qo_indptr[0].host.push_back(cascade_qo_indptr[0].host.back() + size);
      cascade_table[0].add(first->pages.data(), first->shared_pages, first->shared_pages * ps, ps);
      st.decode_bytes += double(first->shared_pages) * ps * double(hk * d) * 2 * elem;
      for (std::int32_t j = 0; j < size; ++j, ++k) {
        const DecodeWork* w = grouped[k];
        const std::int32_t own_pages = std::int32_t(w->pages.size()) - w->shared_pages;
        const std::int32_t own_len = w->kv_len - w->shared_pages * ps;
        cascade_qo_indptr[1].host.push_back(cascade_qo_indptr[1].host.back() + 1);
        cascade_table[1].add(w->pages.data() + w->shared_pages, own_pages, own_len, ps);
        st.decode_bytes += double(own_len) * double(hk * d) * 2 * elem;
        if (check) {
          segments.push_back({fmt::format("decode of request {} (cascade over the prefix of group {})",
                                          w->sequence, w->group),
                              row, 1, w->kv_len, w->pages});
        }
        ++row;
      }
    }
  }
  const std::int64_t decode_rows = std::int64_t(plain.size()), cascade_rows = std::int64_t(grouped.size());
  for (const auto* rows_of : {&plain, &grouped}) {
    for (const DecodeWork* w : *rows_of) add_append(w->pages, w->kv_len, 1);
  }
  for (const DecodeWork& w : batch.decode) st.decode_flops += double(w.kv_len) * double(hq) * 4.0 * double(d);
  st.decode_bytes += double(decode_rows + cascade_rows) * double(hq * d) * 2 * qelem;
  const std::int64_t rows = row, new_tokens = append_indptr.host.back();
  st.prefill_rows = prefill_rows;
  st.decode_rows = decode_rows + cascade_rows;
  st.cascade_rows = cascade_rows;
  st.cascade_groups = std::int64_t(group_sizes.size());

  // Plans: once per step, shared by every layer (the page tables are the same).
  auto t0 = Clock::now();
  const AppendPlan append = plan_append(new_tokens);
  const AttentionOptions causal{.mask_mode = MaskMode::kCausal};
  if (prefill_rows > 0) {
    prefill.plan(with_model(PagedPrefillPlanArgs{.qo_indptr = prefill_qo_indptr.on_host(),
                                                 .page_table = prefill_table.for_plan(dev),
                                                 .options = causal}));
  }
  if (decode_rows > 0) decode.plan(with_model(DecodePlanArgs{.page_table = decode_table.for_plan(dev)}));
  if (cascade_rows > 0) {
    cascade.plan(with_model(CascadePlanArgs{.levels = {{.qo_indptr = cascade_qo_indptr[0].on_host(),
                                                        .page_table = cascade_table[0].for_plan(dev)},
                                                       {.qo_indptr = cascade_qo_indptr[1].on_host(),
                                                        .page_table = cascade_table[1].for_plan(dev)}}}));
  }
  sync();
  st.plan_s = seconds_since(t0);

  const TensorView out_rows = out.view().slice(0, 0, rows), lse_rows = lse.view().slice(0, 0, rows);
  const std::int64_t r1 = prefill_rows, r2 = prefill_rows + decode_rows;
  for (int layer = 0; layer < model.num_layers; ++layer) {
    const PagedKVCache kv = PagedKVCache::combined(cache.view().select(0, layer), KVLayout::kNHD);
    if (new_tokens > 0) {
      const TensorView k_new = kv_pool->take({new_tokens, hk, d}), v_new = kv_pool->take({new_tokens, hk, d});
      spans.begin(kAppendSpan);
      append_paged_kv_cache(k_new, v_new, append.batch_indices, append.positions, kv, append.table);
      spans.end();
    }
    const TensorView q = q_pool->take({rows, hq, d});
    if (prefill_rows > 0) {
      spans.begin(kPrefillSpan);
      prefill.run(q.slice(0, 0, r1), kv, out_rows.slice(0, 0, r1), {.lse = lse_rows.slice(0, 0, r1)});
      spans.end();
    }
    if (decode_rows + cascade_rows > 0) {
      spans.begin(kDecodeSpan);
      if (decode_rows > 0)
        decode.run(q.slice(0, r1, r2), kv, out_rows.slice(0, r1, r2), {.lse = lse_rows.slice(0, r1, r2)});
      if (cascade_rows > 0) {
        cascade.run(q.slice(0, r2, rows), kv, out_rows.slice(0, r2, rows),
                    {.lse = lse_rows.slice(0, r2, rows)});
      }
      spans.end();
    }
    if (check && check->wants(step_index, layer))
      check->check_gqa(batch.step, layer, q, out_rows, lse_rows, kv, segments);
    if (opt.on_layer) opt.on_layer(layer);
  }
  return finish(st);
}

StepStats Engine::Impl::run_mla(const StepBatch& batch, OracleCheck* check) {
  StepStats st;
  const Device dev = opt.device;
  const std::int32_t ps = opt.page_size;
  const std::int64_t h = model.num_qo_heads, dc = model.head_dim_ckv, dp = model.head_dim_kpe;
  const double flops_per_pair = double(h) * 2.0 * double(2 * dc + dp);

  // MLA has no cascade wrapper: requests of a prefix group still share the prefix's
  // pages, each reading them through its own page table.
  start_tables();
  mla_decode_qo_indptr.restart();
  mla_prefill_kv_len.clear();
  mla_decode_kv_len.clear();
  std::vector<CheckSegment> segments;
  std::int64_t row = 0;
  for (const PrefillWork& w : batch.prefill) {
    add_prefill(w, row, check ? &segments : nullptr);
    mla_prefill_kv_len.host.push_back(w.kv_len);
    st.prefill_flops += causal_pairs(w.qo_len, w.kv_len) * flops_per_pair;
    st.prefill_bytes +=
        double(w.kv_len) * double(dc + dp) * elem + double(w.qo_len) * double(h * (2 * dc + dp)) * qelem;
    row += w.qo_len;
  }
  const std::int64_t prefill_rows = row;
  for (const DecodeWork& w : batch.decode) {
    mla_decode_qo_indptr.host.push_back(mla_decode_qo_indptr.host.back() + 1);
    decode_table.add(w.pages.data(), std::int32_t(w.pages.size()), w.kv_len, ps);
    mla_decode_kv_len.host.push_back(w.kv_len);
    add_append(w.pages, w.kv_len, 1);
    st.decode_flops += double(w.kv_len) * flops_per_pair;
    st.decode_bytes += double(w.kv_len) * double(dc + dp) * elem + double(h * (2 * dc + dp)) * qelem;
    if (check)
      segments.push_back({fmt::format("decode of request {}", w.sequence), row, 1, w.kv_len, w.pages});
    ++row;
  }
  const std::int64_t rows = row, decode_rows = rows - prefill_rows, new_tokens = append_indptr.host.back();
  st.prefill_rows = prefill_rows;
  st.decode_rows = decode_rows;

  auto t0 = Clock::now();
  const AppendPlan append = plan_append(new_tokens);
  // Prefill and decode share the model's MLA shape; only their tables differ.
  const auto plan_mla = [&](BatchMLAPagedAttention& w, const TensorView& qo_indptr, const PageTable& table,
                            const TensorView& kv_len) {
    w.plan(with_model(MLAPlanArgs{
        .qo_indptr = qo_indptr, .kv_indptr = table.indptr, .kv_indices = table.indices, .kv_len = kv_len}));
  };
  if (prefill_rows > 0) {
    plan_mla(mla_prefill, prefill_qo_indptr.on_host(),
             {prefill_table.indptr.on_host(), prefill_table.indices.on(dev), {}},
             mla_prefill_kv_len.on_host());
  }
  if (decode_rows > 0) {
    plan_mla(mla_decode, mla_decode_qo_indptr.on_host(),
             {decode_table.indptr.on_host(), decode_table.indices.on(dev), {}}, mla_decode_kv_len.on_host());
  }
  sync();
  st.plan_s = seconds_since(t0);

  const TensorView out_rows = out.view().slice(0, 0, rows), lse_rows = lse.view().slice(0, 0, rows);
  const std::int64_t r1 = prefill_rows;
  for (int layer = 0; layer < model.num_layers; ++layer) {
    const MLACache kv = MLACache::combined(cache.view().select(0, layer), dc);
    if (new_tokens > 0) {
      const TensorView ckv_new = kv_pool->take({new_tokens, dc}), kpe_new = kv_pool->take({new_tokens, dp});
      spans.begin(kAppendSpan);
      append_paged_mla_kv_cache(ckv_new, kpe_new, append.batch_indices, append.positions, kv, append.table);
      spans.end();
    }
    const TensorView q_nope = q_pool->take({rows, h, dc}), q_pe = q_pool->take({rows, h, dp});
    if (prefill_rows > 0) {
      spans.begin(kPrefillSpan);
      mla_prefill.run(q_nope.slice(0, 0, r1), q_pe.slice(0, 0, r1), kv, out_rows.slice(0, 0, r1),
                      {.lse = lse_rows.slice(0, 0, r1)});
      spans.end();
    }
    if (decode_rows > 0) {
      spans.begin(kDecodeSpan);
      mla_decode.run(q_nope.slice(0, r1, rows), q_pe.slice(0, r1, rows), kv, out_rows.slice(0, r1, rows),
                     {.lse = lse_rows.slice(0, r1, rows)});
      spans.end();
    }
    if (check && check->wants(step_index, layer)) {
      check->check_mla(batch.step, layer, q_nope, q_pe, out_rows, lse_rows, kv, segments);
    }
    if (opt.on_layer) opt.on_layer(layer);
  }
  return finish(st);
}

}  // namespace kvinfer::cli
