#include "bench/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "kernels/registry.hpp"

namespace fa::bench {

// Each sequence's K/V length for a cache of N_kv (--kv-lengths): the list, or B draws from
// [kv_lengths_min, N_kv] seeded by --seed and the cache (so every row of one cache, any d or mask,
// sees the same lengths); empty: N_kv each.
std::vector<std::int64_t> sequence_kv_lengths(const Options& o, std::int64_t B, std::int64_t N_kv) {
  if (!o.kv_lengths_list.empty()) return o.kv_lengths_list;
  if (o.kv_lengths_min <= 0) return {};
  // mt19937_64's stream is fixed by the standard; the mapping to a length is ours (a library's
  // uniform_int_distribution is not), so every build draws the same lengths.
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(N_kv));
  const auto span = static_cast<std::uint64_t>(N_kv - o.kv_lengths_min + 1);
  std::vector<std::int64_t> out(static_cast<std::size_t>(B));
  for (auto& len : out) len = o.kv_lengths_min + static_cast<std::int64_t>(rng() % span);
  return out;
}

std::vector<Shape> make_plan(const Options& o) {
  std::vector<bool> causal;
  if (o.causal != CausalMode::on) causal.push_back(false);
  if (o.causal != CausalMode::off) causal.push_back(true);
  // No --kv-len: each configuration's K/V length is its N (0 in Shape: "as N").
  const std::vector<std::int64_t> kv_lens =
      o.kv_len.empty() ? std::vector<std::int64_t>{0} : o.kv_len;
  std::vector<Shape> plan;
  for (auto N : o.N) {
    for (auto kv : kv_lens) {
      for (auto d : o.d) {
        for (bool c : causal) {
          Shape s;
          s.N = N;
          s.N_kv = kv == N ? 0 : kv;
          s.d = d;
          s.B = !o.kv_lengths_list.empty() ? static_cast<std::int64_t>(o.kv_lengths_list.size())
                                           : o.batch.value_or(default_batch(std::max(N, kv)));
          s.H = o.heads.value_or(default_heads(d));
          s.H_kv = o.heads_kv && *o.heads_kv != s.H ? *o.heads_kv : 0;
          s.causal = c;
          s.dtype = o.dtype;
          s.page_size = o.page_size;
          s.kv_lengths = sequence_kv_lengths(o, s.B, s.kv_len());
          plan.push_back(s);
        }
      }
    }
  }
  return plan;
}

OptionValue option_default(const OptionDecl& decl, const Shape* shape) {
  return decl.shape_default && shape ? decl.shape_default(*shape) : decl.accepted.front();
}

std::string flag_values(const OptionFlag& flag, const std::string& text,
                        std::vector<OptionValue>* out) {
  out->clear();
  if (!flag.every.empty() && text == flag.every) {
    for (const FlagWord& w : flag.words) out->push_back(w.value);
    return "";
  }
  // One word (choice, toggle) or a comma list of them (list: "a," has an empty second word).
  std::vector<std::string> given;
  if (flag.syntax == FlagSyntax::list) {
    for (std::size_t begin = 0;;) {
      const std::size_t end = text.find(',', begin);
      given.push_back(text.substr(begin, end == std::string::npos ? end : end - begin));
      if (end == std::string::npos) break;
      begin = end + 1;
    }
  } else {
    given.push_back(text);
  }
  for (const std::string& g : given) {
    const auto w = std::find_if(flag.words.begin(), flag.words.end(),
                                [&](const FlagWord& fw) { return fw.word == g; });
    if (w == flag.words.end()) {
      std::string accepted;
      for (const FlagWord& fw : flag.words) accepted += (accepted.empty() ? "" : ", ") + fw.word;
      if (!flag.every.empty()) accepted += ", " + flag.every;
      if (flag.syntax == FlagSyntax::list) accepted += ", or a comma list";
      out->clear();
      return fmt::format("--{}: '{}' (accepted: {})", flag.name, g, accepted);
    }
    out->push_back(w->value);
  }
  return "";
}

std::vector<OptionValue> requested_values(const Options& o, const OptionDecl& decl,
                                          const Shape* shape) {
  std::vector<OptionValue> wanted;
  const OptionFlag* flag = option_flag(decl.name);
  const auto given = o.option_text.find(decl.name);
  // Not given (or text the CLI would have refused): the default for this shape.
  if (!flag || given == o.option_text.end() || !flag_values(*flag, given->second, &wanted).empty())
    wanted = {option_default(decl, shape)};
  std::erase_if(wanted, [&](const OptionValue& v) {
    return std::find(decl.accepted.begin(), decl.accepted.end(), v) == decl.accepted.end();
  });
  return wanted;
}

std::vector<KernelConfig> kernel_configs_for(const VariantInfo& info, int d, Direction direction) {
  if (direction == Direction::forward || !info.backward_tile_options) return info.kernel_configs(d);
  std::vector<KernelConfig> out;
  for (const Tiles& t : info.backward_tile_options(d)) out.push_back({t.block_q, t.block_kv});
  return out;
}

namespace {

// The kernel configurations of `info` at head dim d that the run asks for: the default, or those
// --block-q / --block-kv list; none for a variant that is not tiled (or not at this d).
std::string configs_for(const Options& o, const VariantInfo& info, int d, Direction direction,
                        const KernelConfig* default_config,
                        std::vector<std::optional<KernelConfig>>* out) {
  const auto configs = kernel_configs_for(info, d, direction);
  if (configs.empty()) {
    out->push_back(std::nullopt);
    return "";
  }
  if (o.block_q.empty() && o.block_kv.empty()) {
    out->push_back(default_config ? *default_config : configs.front());
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
      "--block-q/--block-kv: no compiled {}{} tiles match at d={} (valid Br x Bc: {}; --variants "
      "picks which variants run)",
      info.name, direction == Direction::backward ? " backward" : "", d, valid);
}

// Every combination of the requested values of the options `info` declares for `direction`'s
// rows, in declaration order.
std::vector<OptionValues> option_combinations(const Options& o, const VariantInfo& info,
                                              Direction direction, const Shape* shape) {
  std::vector<OptionValues> combos{OptionValues{}};
  for (const OptionDecl& decl : info.options) {
    if (!decl.directions.empty() && std::find(decl.directions.begin(), decl.directions.end(),
                                              direction) == decl.directions.end())
      continue;
    std::vector<OptionValues> next;
    for (const OptionValues& partial : combos) {
      for (const OptionValue& v : requested_values(o, decl, shape)) {
        OptionValues with = partial;
        with[decl.name] = v;
        next.push_back(std::move(with));
      }
    }
    combos = std::move(next);
  }
  return combos;
}

// Whether each of `values` is its option's default for `shape` (option_default).
bool are_shape_defaults(const VariantInfo& info, const OptionValues& values, const Shape* shape) {
  return std::all_of(info.options.begin(), info.options.end(), [&](const OptionDecl& decl) {
    const auto it = values.find(decl.name);
    return it == values.end() || it->second == option_default(decl, shape);
  });
}

}  // namespace

std::string plan_rows(const Options& o, int d, std::vector<PlannedRow>* out, const Shape* shape) {
  std::set<RowSpec> planned;
  for (const auto& name : o.variants) {
    const VariantInfo* info = find_variant(name);
    for (const Direction direction : o.directions) {
      const auto compiled = kernel_configs_for(*info, d, direction);
      // The default: the first compiled configuration, or the one the variant picks for this
      // shape (forward rows: VariantInfo::default_tiles(Shape)).
      const KernelConfig* default_config = compiled.empty() ? nullptr : &compiled.front();
      if (shape && direction == Direction::forward) {
        const Tiles t = info->default_tiles(*shape);
        for (const KernelConfig& c : compiled) {
          if (c.tiles() == t) default_config = &c;
        }
      }
      std::vector<std::optional<KernelConfig>> configs;
      if (std::string e = configs_for(o, *info, d, direction, default_config, &configs); !e.empty())
        return e;
      for (const auto& config : configs) {
        const bool is_default = !config || !default_config || *config == *default_config;
        for (const OptionValues& values : option_combinations(o, *info, direction, shape)) {
          const bool options_default = are_shape_defaults(*info, values, shape);
          RowSpec spec{info->name, direction, config, values};
          if (planned.insert(spec).second)
            out->push_back({std::move(spec), info, is_default, options_default});
        }
      }
    }
  }
  return "";
}

std::vector<std::size_t> shard_of(const std::vector<Work>& work, int index, int count) {
  std::vector<std::size_t> order(work.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  std::vector<std::size_t> out;
  const auto n = static_cast<std::size_t>(count);
  for (std::size_t p = 0; p < order.size(); ++p) {
    const std::size_t round = p / n, pos = p % n;
    const std::size_t shard = round % 2 == 0 ? pos : n - 1 - pos;
    if (shard == static_cast<std::size_t>(index)) out.push_back(order[p]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> shard_configs(const Options& o, const std::vector<Shape>& plan, int index,
                                       int count) {
  std::vector<Work> work;
  for (const Shape& s : plan) {
    std::vector<PlannedRow> rows;
    plan_rows(o, static_cast<int>(s.d), &rows);
    Work w = rows.size();
    for (std::int64_t f : {s.B, s.H, s.N, s.kv_len(), s.d}) w *= static_cast<std::uint64_t>(f);
    work.push_back(s.causal ? w : 2 * w);
  }
  return shard_of(work, index, count);
}

std::vector<std::vector<std::size_t>> deal_longest_first(const std::vector<double>& cost,
                                                         int workers) {
  std::vector<std::size_t> order(cost.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(std::max(workers, 1)));
  std::vector<double> load(out.size(), 0.0);
  for (std::size_t i : order) {
    const std::size_t w =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    out[w].push_back(i);
    load[w] += cost[i];
  }
  return out;
}

}  // namespace fa::bench
