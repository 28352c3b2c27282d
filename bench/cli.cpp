#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "bench/options.hpp"
#include "bench/plan.hpp"
#include "bench/version.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/option_flags.hpp"
#include "kernels/registry.hpp"

namespace fa::bench {
namespace {

constexpr std::int64_t kAcceptedHeadDims[] = {64, 128, 256};

struct BadInput {
  std::string message;
};

bool parse_int(std::string_view s, std::int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_pow2(std::int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

// "4096", "1024,2048,4096" or a power-of-two range "1024:16384" (also "1024..16384"). Values
// above `max` are refused; repeated values are dropped (first occurrence kept).
std::vector<std::int64_t> parse_sizes(const std::string& flag, const std::string& text,
                                      std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  const std::string accepted = fmt::format(
      "accepted: a positive integer{}, a list like 1024,2048,4096, or a range of powers of two "
      "like 1024:16384",
      max < std::numeric_limits<std::int64_t>::max() ? fmt::format(" up to {}", max) : "");
  std::vector<std::int64_t> out;
  std::string range = text;
  if (auto pos = range.find(".."); pos != std::string::npos) range.replace(pos, 2, ":");
  if (range.find(':') != std::string::npos) {
    auto parts = split(range, ':');
    std::int64_t lo = 0, hi = 0;
    if (parts.size() != 2 || !parse_int(parts[0], &lo) || !parse_int(parts[1], &hi) ||
        !is_pow2(lo) || !is_pow2(hi) || lo > hi) {
      throw BadInput{
          fmt::format("{}: '{}' is not a power-of-two range ({})", flag, text, accepted)};
    }
    if (hi > max) throw BadInput{fmt::format("{}: {} is too large ({})", flag, hi, accepted)};
    // Doubling stops at hi, so it never overflows (hi <= 2^62).
    for (std::int64_t v = lo;; v *= 2) {
      out.push_back(v);
      if (v >= hi) break;
    }
    return out;
  }
  for (const auto& item : split(text, ',')) {
    std::int64_t v = 0;
    if (!parse_int(item, &v) || v <= 0) {
      throw BadInput{fmt::format("{}: '{}' is not a positive integer ({})", flag, item, accepted)};
    }
    if (v > max) throw BadInput{fmt::format("{}: {} is too large ({})", flag, v, accepted)};
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw BadInput{fmt::format("{}: empty value ({})", flag, accepted)};
  return out;
}

std::string list_variants_text() {
  std::string s;
  for (const auto& v : variant_registry()) {
    std::string dims, types, tiles;
    for (int d : v.head_dims) {
      dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      std::string shapes;
      for (const Tiles& t : v.tile_options(d)) {
        shapes += fmt::format("{}Br={} Bc={}", shapes.empty() ? "" : ", ", t.block_q, t.block_kv);
      }
      if (!shapes.empty()) tiles += fmt::format("{}d={}: {}", tiles.empty() ? "" : "; ", d, shapes);
    }
    for (DType t : v.dtypes) types += (types.empty() ? "" : ", ") + std::string(to_string(t));
    s += fmt::format(
        "{}{}\n  algorithm:     {}\n  loop order:    {}\n  tiles:         {}\n  head dims:     {}\n"
        "  dtypes:        {}\n  hardware path: {}\n",
        v.name, std::string(v.peer ? " (peer)" : "") + (v.in_all ? "" : " (run by name only)"),
        v.summary, v.loop_order,
        !tiles.empty() ? tiles
        : v.peer       ? "the library's (not visible)"
                       : "none (library GEMMs)",
        dims, types, v.hardware_path);
    if (v.availability) s += fmt::format("  available:     {}\n", v.availability());
    for (const OptionDecl& decl : v.options) {
      const OptionFlag* flag = option_flag(decl.name);
      s += fmt::format("  option:        {}{}: {}\n", decl.name,
                       flag ? " (--" + flag->name + ")" : "", decl.meaning);
    }
  }
  return s;
}

// Checked product of positive factors; false on 64-bit overflow.
bool checked_product(std::initializer_list<std::int64_t> xs, std::int64_t* out) {
  std::int64_t p = 1;
  for (auto x : xs) {
    if (__builtin_mul_overflow(p, x, &p)) return false;
  }
  *out = p;
  return true;
}

}  // namespace

std::int64_t default_batch(std::int64_t N) {
  return std::max<std::int64_t>(1, 16384 / N);
}
std::int64_t default_heads(std::int64_t d) {
  return std::max<std::int64_t>(1, 2048 / d);
}

namespace {

// The flags' text before it is checked, and what CLI11 cannot hold in Options directly.
struct RawFlags {
  std::string n = "4096", d = "64", causal = "off", dtype = "bf16", variants = "all";
  std::string direction = "fwd";
  std::string block_q, block_kv, metrics, kv_len, kv_lengths;
  std::int64_t page_size = 0;
  std::int64_t batch = 0, heads = 0, heads_kv = 0;
  bool list = false, warm = false, cold = false, no_counters = false, no_kernel_breakdown = false;
  bool no_energy = false;
  std::map<std::string, bool> toggles;  // the option toggles' flags (FlagSyntax::toggle), by option
};

// Everything starting with --benchmark_ belongs to Google Benchmark; the rest is ours.
std::vector<std::string> split_arguments(int argc, const char* const* argv, Options& o) {
  std::vector<std::string> ours;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    o.command_line += (i > 1 ? " " : "") + a;
    if (a.rfind("--benchmark_", 0) == 0) {
      o.benchmark_args.push_back(a);
    } else {
      ours.push_back(a);
    }
  }
  o.command_line = "fa-bench" + (o.command_line.empty() ? "" : " " + o.command_line);
  return ours;
}

// The flags of the options the variants declare, as the registry declares them
// (kernels/option_flags.hpp): each given value goes to Options::option_text under its option's
// name (a toggle's after the parse), checked in resolve_option_flags.
void add_option_flags(CLI::App& app, Options& o, RawFlags& f) {
  for (const OptionFlag& flag : option_flags()) {
    const std::string name = "--" + flag.name;
    if (flag.syntax == FlagSyntax::toggle) {
      app.add_flag(name, f.toggles[flag.option], flag.help);
    } else {
      app.add_option_function<std::string>(
          name, [&o, option = flag.option](const std::string& v) { o.option_text[option] = v; },
          flag.help);
    }
  }
}

void add_problem_flags(CLI::App& app, Options& o, RawFlags& f) {
  app.add_option("--N", f.n,
                 "sequence lengths: any positive integer (4096, 1000), a list (1024,2048), or a "
                 "range of powers of two (1024:16384 = 1024,2048,...,16384)");
  app.add_option("--d", f.d, "head dims: 64, 128, 256 (a list)");
  app.add_option("--batch", f.batch, "batch size (default max(1, 16384/N))");
  app.add_option("--heads", f.heads, "heads (default 2048/d)");
  app.add_option("--heads-kv", f.heads_kv,
                 "K/V heads, a divisor of --heads: grouped-query attention (default: --heads; 1 is "
                 "multi-query)");
  app.add_option("--kv-len", f.kv_len,
                 "K/V lengths, each run against every --N (decode: --N 1 --kv-len 4096:131072); "
                 "causal is aligned bottom-right (default: N)");
  app.add_option("--kv-lengths", f.kv_lengths,
                 "each sequence's own K/V length, up to the cache's --kv-len: uniform:MIN (drawn "
                 "from [MIN, N_kv] by --seed) or a list, one per sequence (the list sets the "
                 "batch); causal aligns to each (default: N_kv each)");
  app.add_option("--page-size", f.page_size,
                 "K/V kept in pages of this many rows (a power of two), scattered through a page "
                 "table, as a serving cache keeps them (default: contiguous)");
  app.add_option("--causal", f.causal, "off | on | both");
  app.add_option("--dtype", f.dtype, "bf16 | fp16");
  app.add_option("--direction", f.direction,
                 "fwd | bwd | both: the forward pass, the backward pass (dQ, dK, dV from dO), or "
                 "both as separate rows (default fwd)");
  app.add_option("--variants", f.variants,
                 "all, or a comma-separated list of names and 'all' (all,cudnn-fp8; see "
                 "--list-variants)");
  app.add_flag("--list-variants", f.list, "describe each variant and exit");
  app.add_option("--block-q", f.block_q,
                 "query rows per block (Br) for fa1/fa2: a list, e.g. 64,128");
  app.add_option("--block-kv", f.block_kv, "key/value rows per block (Bc) for fa1/fa2: a list");
  add_option_flags(app, o, f);
  app.add_option("--seed", o.seed, "seed of the random inputs");
  app.add_option("--inputs", o.inputs,
                 "normal (N(0,1)) | outliers (N(0,1) + N(0,100)*Bernoulli(0.001)) | uniform "
                 "(uniform(-3,3)) | heavy (N(0,1)*exp(N(0,1)))");
}

void add_measurement_flags(CLI::App& app, Options& o, RawFlags& f) {
  app.add_option("--warmup", o.warmup, "untimed launches before timing (default 10)");
  app.add_option("--repetitions", o.repetitions,
                 "timed launches per variant, 1 or more (default: as many as --min-time needs)");
  app.add_option("--min-time", o.min_time_s,
                 "seconds of timed launches per variant, finite and > 0 (default 0.2)");
  app.add_flag("--cold", f.cold, "flush L2 before every timed launch (default)");
  app.add_flag("--warm", f.warm, "do not flush L2 between timed launches");
  app.add_option("--launch", o.launch,
                 "stream | graph: each timed sample enqueues the row's kernels as the launcher "
                 "does (default), or replays them captured once in a CUDA graph (short rows: "
                 "the launch gaps out of the time)");
  app.add_option("--device", o.device, "CUDA device index (default 0)");
  app.add_flag("--model-only", o.model_only, "print the IO model, launch nothing");
  app.add_flag("--no-counters", f.no_counters, "skip hardware-counter collection (CUPTI)");
  app.add_flag("--no-energy", f.no_energy,
               "no energy per launch (NVML's energy counter in a window of launches after the "
               "timing) and no energy model");
  app.add_option("--energy-window", o.energy_window_s,
                 "seconds of launches back to back per row whose energy the counter measures, "
                 "finite, 0.1 to 60 (default 1; docs/energy.md)");
  app.add_flag(
      "--no-kernel-breakdown", f.no_kernel_breakdown,
      "count multi-kernel variants (standard, fp8) as a whole only, not also kernel by kernel");
  app.add_option("--metrics", f.metrics,
                 "more CUPTI metrics to collect, comma-separated, with their rollup (e.g. "
                 "sm__warps_launched.sum)");
  app.add_flag("--stall-reasons", o.stall_reasons,
               "also count the warp stall reasons (cycles stalled per issued instruction, as "
               "Nsight Compute's WarpStateStats); each row prints its largest three");
  app.add_flag("--remeasure", o.remeasure_ceilings,
               "measure the roofline ceilings again (ignore the cache)");
  app.add_flag(
      "--datasheet-roofs", o.datasheet_roofs,
      "use the vendor's roofs, measure nothing (e.g. under a sanitizer, which slows everything)");
  app.add_flag("--require-gpu", o.require_gpu, "exit 3 when no usable GPU is found");
  app.add_option("--model-smem-per-sm", o.model_smem_per_sm,
                 "shared memory per SM (bytes) for the asymptotic model (default: the device's)");
  app.add_flag("--profiler-range", o.profiler_range,
               "for Nsight Compute's range replays (scripts/ncu_compare.py): one untimed "
               "launch, then each row's verification launch alone between cudaProfilerStart and "
               "cudaProfilerStop");
  app.add_flag("--profiler-range-write-back", o.profiler_range_write_back,
               "with --profiler-range: the range ends with an L2 eviction (reads of clean "
               "lines), so the launch's DRAM write-backs fall inside it (its reads are then the "
               "eviction's too: scripts/ncu_compare.py takes only the writes from such a run)");
  // Hidden (no help line): the counters' failure paths no healthy machine takes, for
  // scripts/gpu_check.sh (docs/io-model.md).
  app.add_option("--test-force-counter-error", o.test_counter_error)->group("");
  app.add_option("--test-force-energy-error", o.test_energy_error)->group("");
}

void add_output_flags(CLI::App& app, Options& o) {
  app.add_option("--json", o.json_path, "result file (default results/fa-bench-<time>.json)");
  app.add_option("--csv", o.csv_path, "also write CSV");
  app.add_option("--markdown", o.markdown_path, "also write a Markdown table");
  app.footer(
      "Flags starting with --benchmark_ go to Google Benchmark.\n"
      "fa-bench gate --baseline BASE.json --current CUR.json: compare two result files, the "
      "CI performance gate (fa-bench gate --help).\n"
      "Exit codes: 0 ok, 1 a variant failed or errored, 2 bad input, 3 no GPU with "
      "--require-gpu, 4 an output (result file, stdout) could not be written, "
      "130 interrupted.\n"
      "fa-bench merge FILE... -o OUT: one result file from shards or runs (fa-bench merge "
      "--help).");
}

// CLI11's own parse: help, version and its errors end the run here (true).
bool parse_flags(CLI::App& app, const std::vector<std::string>& ours, ParseOutcome* out) {
  try {
    std::vector<std::string> rev(ours.rbegin(), ours.rend());
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    out->action = ParseOutcome::Action::exit;
    out->output = app.help();
    if (out->output.empty() || out->output.back() != '\n') out->output += '\n';
    return true;
  } catch (const CLI::CallForVersion&) {
    out->action = ParseOutcome::Action::exit;
    out->output = std::string(kVersionString) + "\n";
    return true;
  } catch (const CLI::ParseError& e) {
    out->action = ParseOutcome::Action::exit;
    out->exit_code = kExitBadInput;
    out->output = fmt::format("error: {} (see fa-bench --help)\n", e.what());
    return true;
  }
  return false;
}

// --kv-lengths against the cache (--kv-len, or N) and the batch; --causal's bound is checked
// with the lengths below.
void resolve_kv_lengths(const RawFlags& f, Options& o) {
  if (f.kv_lengths.empty()) return;
  const std::vector<std::int64_t> caches = o.kv_len.empty() ? o.N : o.kv_len;
  const std::int64_t smallest_cache = *std::min_element(caches.begin(), caches.end());
  const std::string accepted =
      "accepted: uniform:MIN or a list of lengths, one per sequence, each from 1 to the K/V "
      "length (--kv-len)";
  std::vector<std::int64_t> lengths;
  if (f.kv_lengths.rfind("uniform:", 0) == 0) {
    std::int64_t lo = 0;
    if (!parse_int(f.kv_lengths.substr(8), &lo) || lo <= 0)
      throw BadInput{fmt::format("--kv-lengths: '{}' ({})", f.kv_lengths, accepted)};
    o.kv_lengths_min = lo;
    lengths = {lo};
  } else {
    for (const auto& item : split(f.kv_lengths, ',')) {
      std::int64_t v = 0;
      if (!parse_int(item, &v) || v <= 0)
        throw BadInput{fmt::format("--kv-lengths: '{}' is not a length ({})", item, accepted)};
      lengths.push_back(v);
    }
    if (o.batch && *o.batch != static_cast<std::int64_t>(lengths.size()))
      throw BadInput{
          fmt::format("--kv-lengths: {} lengths for --batch {} (accepted: one length per sequence)",
                      lengths.size(), *o.batch)};
    o.kv_lengths_list = lengths;
  }
  for (std::int64_t len : lengths) {
    if (len > smallest_cache)
      throw BadInput{
          fmt::format("--kv-lengths: {} is longer than the cache's K/V length {} (--kv-len; {})",
                      len, smallest_cache, accepted)};
  }
}

void resolve_problem(const CLI::App& app, const RawFlags& f, Options& o) {
  o.N = parse_sizes("--N", f.n);
  o.d = parse_sizes("--d", f.d);
  for (auto d : o.d) {
    if (std::find(std::begin(kAcceptedHeadDims), std::end(kAcceptedHeadDims), d) ==
        std::end(kAcceptedHeadDims)) {
      throw BadInput{fmt::format("--d: {} is not supported (accepted: 64, 128, 256)", d)};
    }
  }
  if (app.count("--batch")) {
    if (f.batch <= 0)
      throw BadInput{fmt::format("--batch: {} (accepted: a positive integer)", f.batch)};
    o.batch = f.batch;
  }
  if (app.count("--heads")) {
    if (f.heads <= 0)
      throw BadInput{fmt::format("--heads: {} (accepted: a positive integer)", f.heads)};
    o.heads = f.heads;
  }
  if (app.count("--heads-kv")) {
    if (f.heads_kv <= 0)
      throw BadInput{fmt::format("--heads-kv: {} (accepted: a positive integer)", f.heads_kv)};
    o.heads_kv = f.heads_kv;
    for (auto d : o.d) {
      const std::int64_t H = o.heads.value_or(default_heads(d));
      if (H % f.heads_kv != 0)
        throw BadInput{fmt::format(
            "--heads-kv: {} does not divide the {} query heads{} (accepted: a divisor of "
            "--heads)",
            f.heads_kv, H, o.heads ? "" : fmt::format(" at d={} (default 2048/d)", d))};
    }
  }
  if (!f.kv_len.empty()) o.kv_len = parse_sizes("--kv-len", f.kv_len);
  if (app.count("--page-size")) {
    if (!is_pow2(f.page_size))
      throw BadInput{
          fmt::format("--page-size: {} (accepted: a power of two, 1 or more)", f.page_size)};
    o.page_size = f.page_size;
  }
  resolve_kv_lengths(f, o);
  if (f.causal == "off") {
    o.causal = CausalMode::off;
  } else if (f.causal == "on") {
    o.causal = CausalMode::on;
  } else if (f.causal == "both") {
    o.causal = CausalMode::both;
  } else {
    throw BadInput{fmt::format("--causal: '{}' (accepted: off, on, both)", f.causal)};
  }
  if (o.causal != CausalMode::off) {
    for (auto kv : o.kv_len) {
      for (auto n : o.N) {
        if (kv < n)
          throw BadInput{fmt::format(
              "--kv-len: {} is shorter than --N {} with --causal (aligned bottom-right, query "
              "rows before {} would see no key; accepted: K/V lengths >= N when causal)",
              kv, n, n - kv)};
      }
    }
    std::vector<std::int64_t> lengths = o.kv_lengths_list;
    if (o.kv_lengths_min > 0) lengths.push_back(o.kv_lengths_min);
    const std::int64_t longest_n = *std::max_element(o.N.begin(), o.N.end());
    for (auto len : lengths) {
      if (len < longest_n)
        throw BadInput{fmt::format(
            "--kv-lengths: {} is shorter than --N {} with --causal (accepted: lengths >= N when "
            "causal)",
            len, longest_n)};
    }
  }
  if (!parse_dtype(f.dtype, &o.dtype)) {
    throw BadInput{fmt::format("--dtype: '{}' (accepted: bf16, fp16)", f.dtype)};
  }
  if (f.direction == "fwd") {
    o.directions = {Direction::forward};
  } else if (f.direction == "bwd") {
    o.directions = {Direction::backward};
  } else if (f.direction == "both") {
    o.directions = {Direction::forward, Direction::backward};
  } else {
    throw BadInput{fmt::format("--direction: '{}' (accepted: fwd, bwd, both)", f.direction)};
  }
}

// "all" expands to the variants in `all` (registry order); names add themselves; each variant
// once, where it first appears.
void resolve_variants(const RawFlags& f, Options& o) {
  std::string known;
  for (const auto& v : variant_registry()) known += (known.empty() ? "" : ", ") + v.name;
  auto add_variant = [&](const std::string& name) {
    if (std::find(o.variants.begin(), o.variants.end(), name) == o.variants.end())
      o.variants.push_back(name);
  };
  for (const auto& name : split(f.variants, ',')) {
    if (name.empty()) {
      throw BadInput{
          fmt::format("--variants: empty name in '{}' (accepted: all, {}, comma-separated)",
                      f.variants, known)};
    } else if (name == "all") {
      for (const auto& v : variant_registry()) {
        if (v.in_all) add_variant(v.name);
      }
    } else if (find_variant(name)) {
      add_variant(name);
    } else {
      throw BadInput{
          fmt::format("--variants: unknown variant '{}' (accepted: all, {})", name, known)};
    }
  }
  if (o.variants.empty())
    throw BadInput{fmt::format("--variants: empty (accepted: all, {})", known)};
}

// Each option flag given: its text in Options::option_text, one of what the flag accepts.
void resolve_option_flags(const CLI::App& app, const RawFlags& f, Options& o) {
  for (const OptionFlag& flag : option_flags()) {
    if (flag.syntax == FlagSyntax::toggle && app.count("--" + flag.name))
      o.option_text[flag.option] = f.toggles.at(flag.option) ? "true" : "false";
    const auto given = o.option_text.find(flag.option);
    if (given == o.option_text.end()) continue;  // not given: the option's default
    std::vector<OptionValue> values;
    if (std::string e = flag_values(flag, given->second, &values); !e.empty()) throw BadInput{e};
  }
}

// Tiles and options: every head dim must plan (bench/plan.cpp) with what was asked.
void resolve_rows(const RawFlags& f, Options& o) {
  // Compiled tile shapes are at most a few hundred rows; anything past 65536 is a typo (and
  // past 2^31 would wrap to another size as an int).
  for (auto [flag, text, list] : {std::tuple{"--block-q", &f.block_q, &o.block_q},
                                  std::tuple{"--block-kv", &f.block_kv, &o.block_kv}}) {
    if (text->empty()) continue;
    for (auto v : parse_sizes(flag, *text, 65536)) list->push_back(static_cast<int>(v));
  }
  for (auto d : o.d) {
    std::vector<PlannedRow> rows;
    if (std::string err = plan_rows(o, static_cast<int>(d), &rows); !err.empty()) {
      throw BadInput{err};
    }
  }
}

void resolve_measurement(const CLI::App& app, const RawFlags& f, Options& o) {
  o.counters = !f.no_counters;
  o.kernel_breakdown = !f.no_kernel_breakdown;
  o.energy = !f.no_energy;
  if (!(o.energy_window_s >= 0.1 && o.energy_window_s <= 60)) {
    throw BadInput{
        fmt::format("--energy-window: {} (accepted: seconds from 0.1 to 60)", o.energy_window_s)};
  }
  if (o.stall_reasons && !o.counters) {
    throw BadInput{
        "--stall-reasons: needs the hardware counters (accepted: without --no-counters)"};
  }
  if (!f.metrics.empty()) {
    for (const auto& m : split(f.metrics, ',')) {
      if (m.empty() || m.find_first_of(" \t") != std::string::npos) {
        throw BadInput{
            fmt::format("--metrics: '{}' is not a metric name (accepted: names like "
                        "dram__bytes_read.sum, comma-separated)",
                        m)};
      }
      o.extra_metrics.push_back(m);
    }
  }
  if (Inputs dist; !parse_inputs(o.inputs, &dist)) {
    throw BadInput{fmt::format("--inputs: '{}' (accepted: {})", o.inputs, inputs_names())};
  }
  if (o.warmup < 0) throw BadInput{fmt::format("--warmup: {} (accepted: 0 or more)", o.warmup)};
  if (app.count("--repetitions") && o.repetitions < 1) {
    throw BadInput{fmt::format("--repetitions: {} (accepted: 1 or more)", o.repetitions)};
  }
  if (!(o.min_time_s > 0) || !std::isfinite(o.min_time_s)) {
    throw BadInput{
        fmt::format("--min-time: {} (accepted: a finite number of seconds > 0)", o.min_time_s)};
  }
  if (f.cold && f.warm) throw BadInput{"--cold and --warm: choose one"};
  if (o.launch != "stream" && o.launch != "graph")
    throw BadInput{fmt::format("--launch: '{}' (accepted: stream, graph)", o.launch)};
  o.cold_l2 = !f.warm;
  if (o.device < 0) throw BadInput{fmt::format("--device: {} (accepted: 0 or more)", o.device)};
  if (o.model_smem_per_sm < 0) {
    throw BadInput{
        fmt::format("--model-smem-per-sm: {} (accepted: bytes > 0)", o.model_smem_per_sm)};
  }
  if (!o.test_counter_error.empty() && o.test_counter_error != "insufficient_privileges" &&
      o.test_counter_error != "hardware_busy") {
    throw BadInput{fmt::format(
        "--test-force-counter-error: '{}' (accepted: insufficient_privileges, hardware_busy)",
        o.test_counter_error)};
  }
  if (!o.test_energy_error.empty() && o.test_energy_error != "no_permission" &&
      o.test_energy_error != "no_counter") {
    throw BadInput{
        fmt::format("--test-force-energy-error: '{}' (accepted: no_permission, no_counter)",
                    o.test_energy_error)};
  }
}

// Every buffer a variant may allocate must be addressable with 64-bit indices: Q/O are B*H*N*d
// elements, K/V B*H_kv*N_kv*d, standard's S/P is B*H*N*N_kv, all of 2-byte elements.
void check_indexing(const Options& o) {
  for (const Shape& s : make_plan(o)) {
    std::int64_t n1 = 0, n2 = 0, n3 = 0;
    const std::int64_t kv_rows = s.paged() ? s.pages_per_sequence() * s.page_size : s.kv_len();
    if (!checked_product({s.B, s.H, s.N, s.d, 2}, &n1) ||
        !checked_product({s.B, s.H, kv_rows, s.d, 2}, &n2) ||
        !checked_product({s.B, s.H, s.N, s.kv_len(), 2}, &n3)) {
      throw BadInput{fmt::format(
          "--N/--kv-len/--batch/--heads: {} overflows 64-bit indexing (B*H*N*N_kv*2 bytes must "
          "be < 2^63)",
          shape_text(s))};
    }
  }
}

// ---- Spreading a sweep: --devices, --shard and the job-array variables (docs/multi-gpu.md) ----

struct DistributionFlags {
  std::string shard, worker_configs;
};

void add_distribution_flags(CLI::App& app, Options& o, DistributionFlags& f) {
  app.add_option("--devices", o.devices,
                 "all | a list of device indices (0,1): one worker process per GPU, the "
                 "configurations dealt longest first, one merged result file");
  app.add_option("--shard", f.shard,
                 "i/n: run shard i (0-based) of n of the planned configurations, for job arrays "
                 "(default: from SLURM_ARRAY_TASK_ID/COUNT or JOB_COMPLETION_INDEX with "
                 "FA_BENCH_SHARD_COUNT when set)");
  // Hidden: what a --devices parent passes its workers, and the no-GPU test mode.
  app.add_option("--worker-configs", f.worker_configs)->group("");
  app.add_option("--test-fake-devices", o.test_fake_devices)->group("");
  app.add_option("--test-fake-worker-fail", o.test_fake_worker_fail)->group("");
}

// A non-negative integer of an environment variable or flag value; false when it is not one.
bool parse_count(const std::string& text, std::int64_t* out) {
  return parse_int(text, out) && *out >= 0;
}

// "i/n" with 0 <= i < n.
bool parse_shard(const std::string& text, int* index, int* count) {
  const auto parts = split(text, '/');
  std::int64_t i = 0, n = 0;
  if (parts.size() != 2 || !parse_count(parts[0], &i) || !parse_int(parts[1], &n) || n < 1 ||
      i >= n || n > 1000000) {
    return false;
  }
  *index = static_cast<int>(i);
  *count = static_cast<int>(n);
  return true;
}

// Slurm job arrays: index (SLURM_ARRAY_TASK_ID - MIN) / STEP of SLURM_ARRAY_TASK_COUNT (MIN 0 and
// STEP 1 when unset). Kubernetes Indexed Jobs: JOB_COMPLETION_INDEX of FA_BENCH_SHARD_COUNT
// (Kubernetes sets no variable with the Job's completions: set it to spec.completions).
void shard_from_environment(Options& o) {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
  auto number = [&](const char* name, const std::string& text, const char* accepted) {
    std::int64_t v = 0;
    if (!parse_count(text, &v) || v > 1000000) {
      throw BadInput{fmt::format("{}: '{}' is not {} (accepted: {}; or pass --shard i/n)", name,
                                 text, accepted, accepted)};
    }
    return v;
  };
  if (auto id = env("SLURM_ARRAY_TASK_ID")) {
    const auto count = env("SLURM_ARRAY_TASK_COUNT");
    if (!count) {
      throw BadInput{
          "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (accepted: both, as "
          "Slurm sets them in a job array; or pass --shard i/n)"};
    }
    const std::int64_t t = number("SLURM_ARRAY_TASK_ID", *id, "an integer >= 0");
    const std::int64_t n = number("SLURM_ARRAY_TASK_COUNT", *count, "an integer >= 1");
    const std::int64_t lo = number("SLURM_ARRAY_TASK_MIN",
                                   env("SLURM_ARRAY_TASK_MIN").value_or("0"), "an integer >= 0");
    const std::int64_t step = number("SLURM_ARRAY_TASK_STEP",
                                     env("SLURM_ARRAY_TASK_STEP").value_or("1"), "an integer >= 1");
    if (n < 1 || step < 1 || t < lo || (t - lo) % step != 0 || (t - lo) / step >= n) {
      throw BadInput{fmt::format(
          "SLURM_ARRAY_TASK_ID={} SLURM_ARRAY_TASK_MIN={} SLURM_ARRAY_TASK_STEP={} "
          "SLURM_ARRAY_TASK_COUNT={}: not a task of the array (accepted: a contiguous array such "
          "as --array=0-3, or --array=1-7:2; or pass --shard i/n)",
          t, lo, step, n)};
    }
    o.shard_index = static_cast<int>((t - lo) / step);
    o.shard_count = static_cast<int>(n);
    o.shard_source = fmt::format("SLURM_ARRAY_TASK_ID={}, SLURM_ARRAY_TASK_COUNT={}", t, n);
    if (lo != 0 || step != 1)
      o.shard_source +=
          fmt::format(", SLURM_ARRAY_TASK_MIN={}, SLURM_ARRAY_TASK_STEP={}", lo, step);
    return;
  }
  if (auto index = env("JOB_COMPLETION_INDEX")) {
    const auto count = env("FA_BENCH_SHARD_COUNT");
    if (!count) {
      throw BadInput{
          "JOB_COMPLETION_INDEX is set but FA_BENCH_SHARD_COUNT is not (accepted: "
          "FA_BENCH_SHARD_COUNT = the Indexed Job's completions; or pass --shard i/n)"};
    }
    const std::int64_t i = number("JOB_COMPLETION_INDEX", *index, "an integer >= 0");
    const std::int64_t n = number("FA_BENCH_SHARD_COUNT", *count, "an integer >= 1");
    if (n < 1 || i >= n) {
      throw BadInput{fmt::format(
          "JOB_COMPLETION_INDEX={} FA_BENCH_SHARD_COUNT={}: the index must be below the count "
          "(accepted: 0 <= JOB_COMPLETION_INDEX < FA_BENCH_SHARD_COUNT; or pass --shard i/n)",
          i, n)};
    }
    o.shard_index = static_cast<int>(i);
    o.shard_count = static_cast<int>(n);
    o.shard_source = fmt::format("JOB_COMPLETION_INDEX={}, FA_BENCH_SHARD_COUNT={}", i, n);
  }
}

void resolve_distribution(const CLI::App& app, const DistributionFlags& f, Options& o) {
  if (!f.worker_configs.empty()) {  // a --devices worker: its parent chose the configurations
    for (const auto& item : split(f.worker_configs, ',')) {
      std::int64_t v = 0;
      if (!parse_count(item, &v)) {
        throw BadInput{
            fmt::format("--worker-configs: '{}' (accepted: indices, comma-separated)", item)};
      }
      o.worker_configs.push_back(static_cast<std::size_t>(v));
    }
    return;
  }
  if (app.count("--shard")) {
    if (!parse_shard(f.shard, &o.shard_index, &o.shard_count)) {
      throw BadInput{fmt::format(
          "--shard: '{}' (accepted: i/n with 0 <= i < n, e.g. 0/4 for the first of four)",
          f.shard)};
    }
  } else {
    shard_from_environment(o);
  }
  if (app.count("--devices")) {
    if (o.devices != "all") {
      for (const auto& item : split(o.devices, ',')) {
        std::int64_t v = 0;
        if (!parse_count(item, &v) || v > 1023) {
          throw BadInput{fmt::format(
              "--devices: '{}' is not a device index (accepted: all, or indices like 0,1)",
              item.empty() ? o.devices : item)};
        }
        if (std::find(o.device_list.begin(), o.device_list.end(), v) == o.device_list.end())
          o.device_list.push_back(static_cast<int>(v));
      }
      if (o.device_list.empty())
        throw BadInput{"--devices: empty (accepted: all, or indices like 0,1)"};
    }
    if (app.count("--device"))
      throw BadInput{"--device and --devices: choose one (--devices 1 runs on GPU 1 alone)"};
    if (o.model_only)
      throw BadInput{"--devices and --model-only: choose one (--model-only launches nothing)"};
    if (o.profiler_range)
      throw BadInput{"--devices and --profiler-range: choose one (profile one GPU: --device)"};
  } else if (o.test_fake_devices != 0 || o.test_fake_worker_fail != -1) {
    throw BadInput{"--test-fake-devices/--test-fake-worker-fail: only with --devices"};
  }
  if (o.test_fake_devices < 0 || o.test_fake_devices > 64) {
    throw BadInput{fmt::format("--test-fake-devices: {} (accepted: 0 to 64)", o.test_fake_devices)};
  }
  if (o.profiler_range_write_back && !o.profiler_range)
    throw BadInput{"--profiler-range-write-back: only with --profiler-range"};
}

// ---- end of --devices / --shard ----
}  // namespace

ParseOutcome parse_cli(int argc, const char* const* argv) {
  ParseOutcome out;
  Options& o = out.options;
  const std::vector<std::string> ours = split_arguments(argc, argv, o);
  CLI::App app{
      "fa-bench: attention variants side by side, verified, timed and set against the "
      "IO model and the roofline",
      "fa-bench"};
  app.set_version_flag("--version", std::string(kVersionString));
  RawFlags f;
  add_problem_flags(app, o, f);
  add_measurement_flags(app, o, f);
  add_output_flags(app, o);
  DistributionFlags distribution;
  add_distribution_flags(app, o, distribution);
  if (parse_flags(app, ours, &out)) return out;
  if (f.list) {
    out.action = ParseOutcome::Action::exit;
    out.output = list_variants_text();
    return out;
  }
  try {
    resolve_problem(app, f, o);
    resolve_variants(f, o);
    resolve_option_flags(app, f, o);
    resolve_rows(f, o);
    resolve_measurement(app, f, o);
    check_indexing(o);
    resolve_distribution(app, distribution, o);
  } catch (const BadInput& e) {
    out.action = ParseOutcome::Action::exit;
    out.exit_code = kExitBadInput;
    out.output = "error: " + e.message + "\n";
  }
  return out;
}

}  // namespace fa::bench
