#include "bench/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "kernels/registry.hpp"

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

std::vector<OptionValue> requested_values(const Options& o, const OptionDecl& decl) {
  std::vector<OptionValue> wanted;
  if (decl.name == kOptionBlockOrder) {
    if (o.fa2_order != "heads") wanted.emplace_back(std::string("blocks"));
    if (o.fa2_order != "blocks") wanted.emplace_back(std::string("heads"));
  } else if (decl.name == kOptionPrequantized) {
    wanted.emplace_back(o.fp8_prequantized);
  } else if (decl.name == kOptionStats) {
    if (o.cudnn_stats != "off") wanted.emplace_back(true);
    if (o.cudnn_stats != "on") wanted.emplace_back(false);
  } else {
    wanted.push_back(decl.accepted.front());
  }
  std::erase_if(wanted, [&](const OptionValue& v) {
    return std::find(decl.accepted.begin(), decl.accepted.end(), v) == decl.accepted.end();
  });
  return wanted;
}

namespace {

// The kernel configurations of `info` at head dim d that the run asks for: the default, or those
// --block-q / --block-kv list; none for a variant that is not tiled (or not at this d).
std::string configs_for(const Options& o, const VariantInfo& info, int d,
                        std::vector<std::optional<KernelConfig>>* out) {
  const auto configs = info.kernel_configs(d);
  if (configs.empty()) {
    out->push_back(std::nullopt);
    return "";
  }
  if (o.block_q.empty() && o.block_kv.empty()) {
    out->push_back(configs.front());
    return "";
  }
  auto listed = [](const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  for (const KernelConfig& c : configs) {
    if (listed(o.block_q, c.block_q) && listed(o.block_kv, c.block_kv)) out->push_back(c);
  }
  if (!out->empty()) return "";
  std::string valid;
  for (const KernelConfig& c : configs)
    valid += fmt::format("{}{}x{}", valid.empty() ? "" : ", ", c.block_q, c.block_kv);
  return fmt::format(
      "--block-q/--block-kv: no compiled {} tiles match at d={} (valid Br x Bc: {}; --variants "
      "picks which variants run)",
      info.name, d, valid);
}

// Every combination of the requested values of the options `info` declares, in declaration order.
std::vector<OptionValues> option_combinations(const Options& o, const VariantInfo& info) {
  std::vector<OptionValues> combos{OptionValues{}};
  for (const OptionDecl& decl : info.options) {
    std::vector<OptionValues> next;
    for (const OptionValues& partial : combos) {
      for (const OptionValue& v : requested_values(o, decl)) {
        OptionValues with = partial;
        with[decl.name] = v;
        next.push_back(std::move(with));
      }
    }
    combos = std::move(next);
  }
  return combos;
}

}  // namespace

std::string plan_rows(const Options& o, int d, std::vector<PlannedRow>* out) {
  std::set<RowSpec> planned;
  for (const auto& name : o.variants) {
    const VariantInfo* info = find_variant(name);
    std::vector<std::optional<KernelConfig>> configs;
    if (std::string e = configs_for(o, *info, d, &configs); !e.empty()) return e;
    const auto compiled = info->kernel_configs(d);
    for (const auto& config : configs) {
      const bool is_default = !config || compiled.empty() || *config == compiled.front();
      for (const OptionValues& values : option_combinations(o, *info)) {
        RowSpec spec{info->name, Direction::forward, config, values};
        if (planned.insert(spec).second) out->push_back({std::move(spec), info, is_default});
      }
    }
  }
  return "";
}

}  // namespace fa::bench
