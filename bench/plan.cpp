#include "bench/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fa::bench {

std::vector<Shape> make_plan(const Options& o) {
  std::vector<bool> causal;
  if (o.causal != CausalMode::on) causal.push_back(false);
  if (o.causal != CausalMode::off) causal.push_back(true);
  std::vector<Shape> plan;
  for (auto N : o.N) {
    for (auto d : o.d) {
      for (bool c : causal) {
        Shape s;
        s.N = N;
        s.d = d;
        s.B = o.batch.value_or(default_batch(N));
        s.H = o.heads.value_or(default_heads(d));
        s.causal = c;
        s.dtype = o.dtype;
        plan.push_back(s);
      }
    }
  }
  return plan;
}

const VariantInfo* variant_of_row(const std::string& row_name) {
  return find_variant(row_name.substr(0, row_name.find_first_of("@~")));
}

std::string plan_variants(const Options& o, int d, std::vector<PlannedVariant>* out) {
  const bool any_tiles = !o.block_q.empty() || !o.block_kv.empty();
  auto listed = [](const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  for (const auto& name : o.variants) {
    const VariantInfo* info = find_variant(name);
    const auto options = info->tile_options(d);
    if (options.empty()) {  // not tiled, or not supported at this d: one row
      out->push_back({name, info, Tiles{}});
      continue;
    }
    if (!any_tiles) {
      out->push_back({name, info, options.front()});
      continue;
    }
    const std::size_t before = out->size();
    for (const Tiles& t : options) {
      if (listed(o.block_q, t.block_q) && listed(o.block_kv, t.block_kv)) {
        const bool is_default = t == options.front();
        out->push_back({is_default ? name : fmt::format("{}@{}x{}", name, t.block_q, t.block_kv), info, t});
      }
    }
    if (out->size() == before && any_tiles) {
      std::string valid;
      for (const Tiles& t : options) valid += fmt::format("{}{}x{}", valid.empty() ? "" : ", ", t.block_q, t.block_kv);
      return fmt::format("--block-q/--block-kv: no compiled {} tiles match at d={} (valid Br x Bc: {}; --variants picks which variants run)",
                         name, d, valid);
    }
  }
  // fa2's thread-block order: the default rows walk the query blocks of one head together;
  // "heads" rows (name~heads) walk heads first, "both" gives both.
  if (o.fa2_order != "blocks") {
    std::vector<PlannedVariant> with_order;
    for (auto& pv : *out) {
      const bool fa2 = pv.info->algorithm == Algorithm::fa2 && !pv.info->peer;
      if (fa2 && o.fa2_order == "both") with_order.push_back(pv);
      if (fa2) {
        pv.row_name += "~heads";
        pv.heads_interleaved = true;
      }
      with_order.push_back(pv);
    }
    *out = std::move(with_order);
  }
  return "";
}

}  // namespace fa::bench
