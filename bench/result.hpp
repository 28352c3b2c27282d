// One result record per run: what every writer (table, JSON, CSV, Markdown), the reports and the
// CI gate read. Schema: docs/results-schema.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/problem.hpp"
#include "kernels/variant.hpp"
#include "profiler/device_info.hpp"
#include "profiler/energy.hpp"
#include "profiler/energy_model.hpp"
#include "profiler/io_model.hpp"
#include "profiler/roofline.hpp"
#include "profiler/stats.hpp"
#include "profiler/utc_time.hpp"

namespace fa::bench {

inline constexpr const char* kSchema = "fa-bench/5";
// Still read: /4 is /5 without the configurations' page_size and kv_lengths (a contiguous cache,
// every sequence at N_kv), /3 also without H_kv and N_kv (square multi-head attention: H and N),
// /2 also without their `gpu` (taken from the file's device), /1 also without the rows' specs
// (forward rows, rebuilt from the fields /1 wrote; bench/result_json.cpp).
inline constexpr const char* kSchemaV4 = "fa-bench/4";
inline constexpr const char* kSchemaV3 = "fa-bench/3";
inline constexpr const char* kSchemaV2 = "fa-bench/2";
inline constexpr const char* kSchemaV1 = "fa-bench/1";

enum class Status { ok, failed, skipped, unsupported, error, model_only, interrupted };
std::string to_string(Status s);
bool parse_status(const std::string& s, Status* out);

struct Verification {
  // What `tolerance` bounds. "row_ratio": the worst sampled row's error over that row's own
  // tolerance (docs/accuracy.md), so tolerance is 1. Older files: max_abs_error | rmse.
  std::string metric = "row_ratio";
  bool passed = false;
  bool all_finite = false;
  std::int64_t nonfinite_count = 0;
  double max_abs_error = 0;
  double rmse = 0;
  double baseline_max_abs_error = 0;
  double baseline_rmse = 0;  // of the plain implementation the rule compares with
  double tolerance = 0;
  std::int64_t rows_checked = 0;
  std::int64_t heads_checked = 0;
  std::optional<double> lse_max_abs_error;  // variants that write the log-sum-exp
  // Per-row rule (metric row_ratio): the worst row's error / its tolerance (<= 1 passes), where.
  double worst_row_ratio = 0;
  std::int64_t worst_head = -1, worst_row = -1;
  std::optional<double> lse_worst_row_ratio;  // the same for the log-sum-exp
  // fp8: RMSE over all sampled elements / RMS of the reference, and the plain FP8 figure.
  std::optional<double> relative_rmse, baseline_relative_rmse;
  bool inputs_unchanged = true;  // Q, K, V as they were before the run (sampled heads)
};

struct Timing {
  std::string l2 = "cold";
  // How each sample enqueued the row: "stream" or "graph" (--launch; a row whose capture failed
  // is timed with stream launches, and its reason says why).
  std::string launch = "stream";
  int warmup = 0;
  std::vector<double> samples_ms;
  SampleStats stats;  // of samples_ms, in ms
  int sm_clock_before_mhz = -1;
  int sm_clock_after_mhz = -1;
};

struct Derived {
  double tflops_convention = 0;
  double tflops_model = 0;
  double effective_gbps = 0;
  double arithmetic_intensity = 0;  // the model's matrix FLOPs per modelled byte
  // Read from files written before `placement` (VariantResult::placement); never written now.
  double roofline_attainable_tflops = 0;
  double roofline_fraction = 0;
  std::string bound;
  // The fastest peer (e.g. cudnn) that ran in the same configuration, and its median time over
  // this row's: 0.5 = half the peer's speed. Empty / 0 when no peer ran (and on peer rows).
  std::string best_peer;
  double speed_vs_best_peer = 0;
};

// Hardware counters of one variant run (a separate, untimed run; profiler/cupti_range.hpp).
struct CounterResult {
  std::string status = "ok";  // ok | unavailable | error | skipped (--no-counters)
  std::string reason;
  std::map<std::string, double> values;  // metric name -> value
  double collect_seconds = 0;            // wall time the collection took (all passes)
  // Multi-kernel variants: the same metrics per kernel (phase), in launch order, from a second
  // collection with one user range per kernel. Empty for single-kernel variants.
  struct Kernel {
    std::string name;
    std::map<std::string, double> values;
  };
  std::vector<Kernel> kernels;
  std::string kernels_reason;  // why `kernels` is empty when that collection failed
};

// The model set against what the counters measured.
struct MeasuredDerived {
  double dram_bytes = 0, dram_over_model = 0, dram_over_compulsory = 0;
  double l2_bytes = 0, l2_over_model = 0;
  double tensor_flops = 0, tensor_over_model = 0;
  double fp32_flops = 0;
  double intensity_dram = 0, intensity_l2 = 0;  // model matrix FLOPs per measured byte
  // Read from files written before `placement`; never written now.
  double roofline_fraction = 0;
  std::string bound;
};

struct VariantResult {
  RowSpec spec;  // the row's identity: variant, direction, kernel configuration, option values
  // Whether spec.kernel_config is the variant's default for this shape (the first of
  // VariantInfo::kernel_configs, or VariantInfo::default_tiles(Shape) where the variant picks by
  // more of the shape; true for a row with none): a row of another configuration is a tile
  // sweep's. Unknown (not written) for files that do not say.
  std::optional<bool> default_config;
  // Whether every option value in spec is the variant's default for this shape (what a run that
  // names none of them runs: fa3's schedule by head dim, fp8's by shape). Unknown for files that
  // do not say.
  std::optional<bool> default_options;
  Algorithm algorithm = Algorithm::standard;
  bool peer = false;
  Status status = Status::model_only;
  std::string reason;
  // The option block_order ("blocks" | "heads") when the variant declares it, else "" (written
  // as the schema's old block_order field for one more version).
  std::string block_order() const;
  std::optional<Verification> verification;
  std::optional<Timing> timing;
  model::IoModel model;
  std::optional<Derived> derived;
  std::optional<CounterResult> counters;
  std::optional<MeasuredDerived> measured;
  // Where the row sits on the roofline (timed rows): from the counters' bytes when measured,
  // otherwise from the compulsory bytes. The one placement every output shows.
  std::optional<Placement> placement;
  // Energy per launch from NVML, in a window of launches run back to back after the timing
  // (profiler/energy.hpp), and the energy model's figure for the same launch beside it
  // (profiler/energy_model.hpp: the counted instructions, the counters' DRAM bytes when they ran,
  // else the IO model's, the window's time and SM clock), or why it has none (one line; "" when
  // there is no model to say it of).
  std::optional<energy::Measurement> energy;
  std::optional<energy::Breakdown> energy_model;
  std::string energy_model_reason;
};

// The GPU a configuration ran on: its UUID (the identity) and its model name.
struct GpuId {
  std::string uuid, name;
  bool operator==(const GpuId&) const = default;
};

struct ConfigResult {
  Shape shape;
  std::uint64_t seed = 0;
  std::optional<GpuId> gpu;    // none: no GPU (model-only without a device)
  std::size_t plan_index = 0;  // its index in the whole plan (make_plan); not written
  std::vector<VariantResult> results;
};

// What a row is called on a console, in a table or in the gate's report, built from the specs of
// its configuration: the variant's name, followed by what tells it from the configuration's other
// rows of the same variant and direction: "@BrxBc" (and stages, warpgroups, cluster when those
// differ) and "~value" per differing option ("~key=value" for numbers and bools); a backward row
// ends in " bwd". A label is never read back: the spec is the identity.
std::string row_label(const ConfigResult& config, const VariantResult& row);

struct Settings {
  std::uint64_t seed = 0;
  int warmup = 0;
  int repetitions = 0;
  double min_time_s = 0;
  std::string l2 = "cold";
  bool model_only = false;
  std::string inputs = "normal";
  bool fp8_prequantized = false;
  std::string timing_engine = "google-benchmark";
  std::string launch = "stream";  // --launch
  std::int64_t model_smem_per_sm_bytes = 0;
  // --energy-window's seconds; 0: no energy windows (--no-energy, or a file from before them).
  double energy_window_s = 0;
};

// One GPU of a file whose configurations ran on several (--devices, fa-bench merge): the device
// and the roofs measured on it.
struct DeviceRecord {
  DeviceInfo info;
  Ceilings ceilings;
};

// Which part of the plan a run covers (--shard i/n): the configurations dealt to shard `index`.
struct Shard {
  int index = 0, count = 1;
};

struct RunResult {
  std::string schema = kSchema;  // as read (a written file is always kSchema)
  std::string tool_version;
  std::string git_revision;
  std::string created_utc;
  std::string command_line;
  bool complete = false;
  std::optional<DeviceInfo> device;
  std::string no_gpu_reason;
  Settings settings;
  Ceilings ceilings;
  // Every GPU the configurations ran on, when more than one (`device` and `ceilings` are then
  // the first's); empty for a run on one GPU or none.
  std::vector<DeviceRecord> devices;
  std::optional<Shard> shard;
  std::vector<ConfigResult> configs;
};

using fa::utc_time;  // profiler/utc_time.hpp

// Fills `derived` from the timing, the model and the ceilings.
// `peak_flops_per_s` is the tensor roof of the variant's arithmetic (bf16, fp16 or fp8).
Derived derive(const model::IoModel& m, const Timing& t, const Ceilings& c,
               double peak_flops_per_s);

// Sets the model against the counters (needs `counters` with status ok and a timing).
MeasuredDerived derive_measured(const VariantResult& r, const Ceilings& c, double peak_flops_per_s);

// The row's placement (needs a timing): counters' DRAM and L2 bytes when counters are ok, else
// the model's compulsory bytes.
Placement placement_of(const VariantResult& r, const Ceilings& c, double peak_flops_per_s);

// The tensor roof that applies to a variant's matrix products.
double tensor_peak_for(const Ceilings& c, Algorithm a, DType dtype);

// The energy model's figure for the launch the row's energy window measured (needs `energy`, and
// `counters` and `measured` as the row's counters left them): its matrix FLOPs by precision, the
// counted instructions, the counters' DRAM bytes when they ran (else the IO model's), the window's
// time per launch and mean SM clock. A row without counted instructions (counters off or failed)
// gets no figure and `why_not` says so: its instructions are never taken as 0. `why_not` stays ""
// when there is no model (the legend says why) or no window (the energy's reason says why).
// `mma_sync`: the row's matrix products run on mma.sync (VariantInfo::uses_mma_sync), else wgmma.
std::optional<energy::Breakdown> energy_model_of(const VariantResult& row, const Ceilings& c,
                                                 bool mma_sync, std::string* why_not);

}  // namespace fa::bench
