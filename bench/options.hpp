// What the user asked for, parsed and validated (bench/cli.cpp). Nothing here touches a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/problem.hpp"
#include "kernels/variant.hpp"
#include "profiler/energy.hpp"

namespace fa::bench {

enum class CausalMode { off, on, both };

struct Options {
  std::vector<std::int64_t> N{4096};
  std::vector<std::int64_t> d{64};
  std::optional<std::int64_t> batch;  // default: max(1, 16384 / N)
  std::optional<std::int64_t> heads;  // default: 2048 / d
  // --heads-kv: K/V heads, a divisor of every configuration's query heads (default: as many).
  std::optional<std::int64_t> heads_kv;
  // --kv-len: K/V lengths, each run against every N (empty: each configuration's own N).
  std::vector<std::int64_t> kv_len;
  // --page-size: K/V in pages of this many rows, a power of two, through a page table (0: not).
  std::int64_t page_size = 0;
  // --kv-lengths: each sequence's K/V length, drawn uniformly from [kv_lengths_min, N_kv]
  // (uniform:MIN, seeded by --seed) or listed (one per sequence: the list sets the batch). Both
  // unset: every sequence holds N_kv.
  std::int64_t kv_lengths_min = 0;
  std::vector<std::int64_t> kv_lengths_list;
  CausalMode causal = CausalMode::off;
  DType dtype = DType::bf16;
  std::vector<std::string> variants;  // resolved names, registry order
  std::vector<int> block_q;   // --block-q: tiled variants run with each listed Br (empty: default)
  std::vector<int> block_kv;  // --block-kv: likewise for Bc
  // --direction: the passes each row runs, forward first (fwd | bwd | both; default fwd).
  std::vector<Direction> directions{Direction::forward};
  std::uint64_t seed = 1234;
  std::string inputs = "normal";  // normal | outliers | uniform | heavy (kernels/common/fill.hpp)
  // The option flags the run gave (--fa2-order, --fa3-schedule, ...: declared in the registry,
  // kernels/option_flags.hpp), by the option each sets: the text as given ("both",
  // "persistent,full"; a toggle's "true" or "false"). An option not here takes its default
  // (bench/plan.cpp, requested_values).
  std::map<std::string, std::string> option_text;
  int warmup = 10;
  int repetitions = 0;  // 0: as many as --min-time needs
  double min_time_s = 0.2;
  bool cold_l2 = true;
  // --launch: how a timed sample enqueues the row: "stream" (the launcher's calls, as an
  // application makes them) or "graph" (captured once into a CUDA graph, replayed per sample:
  // the GPU-side gaps before and between a row's kernels shrink, as in graph-launched serving).
  std::string launch = "stream";
  int device = 0;
  std::string json_path, csv_path, markdown_path;
  bool model_only = false;
  bool counters = true;  // --no-counters turns collection off
  bool energy = true;    // --no-energy: no energy window per row, no energy model
  // --energy-window: seconds between the energy counter's updates that bound a row's window
  double energy_window_s = energy::kDefaultWindowS;
  bool kernel_breakdown =
      true;  // per-kernel counters of multi-kernel variants (--no-kernel-breakdown)
  std::vector<std::string> extra_metrics;  // --metrics: more CUPTI metrics, by name
  // --stall-reasons: the warp stall reasons' metrics too (those the GPU offers), each row's
  // largest ones printed beside its counters
  bool stall_reasons = false;
  bool remeasure_ceilings = false;  // --remeasure: ignore the ceilings cache
  bool datasheet_roofs = false;     // --datasheet-roofs: measure no ceilings
  bool require_gpu = false;
  // --profiler-range: each row's verification launch alone between cudaProfilerStart/Stop,
  // after one untimed launch (Nsight Compute's range replays).
  bool profiler_range = false;
  // --profiler-range-write-back: the range also holds an L2 eviction after the launch (reads of
  // clean lines only), so the launch's dirty lines are written back inside it, as fa-bench's own
  // DRAM write count has them; the range's reads then include the eviction's.
  bool profiler_range_write_back = false;
  // --test-force-counter-error (hidden): the counter session fails as CUPTI would with this
  // error ("insufficient_privileges" | "hardware_busy"); scripts/gpu_check.sh. "" = none.
  std::string test_counter_error;
  // --test-force-energy-error (hidden): NVML answers as a driver would without permission
  // ("no_permission") or without the energy counter ("no_counter"); scripts/energy_gpu_check.sh.
  std::string test_energy_error;
  std::int64_t model_smem_per_sm = 0;  // 0: the device's (233472, Hopper's, with no GPU)
  // Spreading a sweep (docs/multi-gpu.md). --devices: "" (one process, --device), "all" or a
  // list of device indices, one worker process each.
  std::string devices;
  std::vector<int>
      device_list;  // --devices LIST resolved ("all": empty until the GPUs are counted)
  // --shard i/n (or a job array's variables): this run covers shard `shard_index` of
  // `shard_count` (1: the whole plan); `shard_source` says where it came from, "" for the flag.
  int shard_index = 0, shard_count = 1;
  std::string shard_source;
  // Hidden, set by the --devices parent for its workers: the plan's configuration indices this
  // worker runs (empty: not a worker).
  std::vector<std::size_t> worker_configs;
  // Hidden, for tests without a GPU: pretend there are this many GPUs (workers mark their rows
  // model_only instead of launching); one worker that dies on purpose (-1: none).
  int test_fake_devices = 0;
  int test_fake_worker_fail = -1;
  std::vector<std::string> benchmark_args;  // --benchmark_* flags, handed to Google Benchmark
  std::string command_line;

  // Whether the run gave --fp8-prequantized (option prequantized true): the record's settings.
  bool fp8_prequantized() const {
    const auto it = option_text.find(kOptionPrequantized);
    return it != option_text.end() && it->second == "true";
  }
};

// Documented exit codes (README).
enum ExitCode : int {
  kExitOk = 0,
  kExitVariantFailed = 1,  // a variant failed verification or errored
  kExitBadInput = 2,
  kExitNoGpu = 3,         // --require-gpu and no usable GPU
  kExitOutputFailed = 4,  // a result file or stdout could not be written (e.g. disk full)
  kExitInterrupted = 130,
};

struct ParseOutcome {
  enum class Action { run, exit } action = Action::run;
  int exit_code = kExitOk;
  std::string output;  // what to print (stdout on success, stderr on error)
  Options options;
};

ParseOutcome parse_cli(int argc, const char* const* argv);

// Batch and heads for a sequence length and head dim: the FlashAttention benchmark convention
// (16k tokens, hidden 2048) unless the user fixed them. With --kv-len, N is the longer of the
// query and K/V lengths (16k cached tokens a batch), so that decode (N = 1) does not run 16384
// sequences, nor a short K/V 16384 / N_kv times the usual queries.
std::int64_t default_batch(std::int64_t N);
std::int64_t default_heads(std::int64_t d);

}  // namespace fa::bench
