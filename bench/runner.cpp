#include "bench/runner.hpp"

#include <benchmark/benchmark.h>
#include <cuda_profiler_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>

#include "bench/crash_report.hpp"
#include "bench/plan.hpp"
#include "bench/verify.hpp"
#include "bench/version.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/device_buffer.hpp"
#include "kernels/common/fill.hpp"
#include "kernels/registry.hpp"
#include "profiler/ceilings.hpp"
#include "profiler/counters.hpp"
#include "profiler/cupti_range.hpp"
#include "profiler/energy_queue.hpp"
#include "profiler/timer.hpp"

namespace fa::bench {

std::atomic<bool> g_interrupted{false};

namespace {

// Hopper's shared memory per SM: what the asymptotic model uses when no GPU is present.
constexpr std::int64_t kDefaultSmemPerSm = 233472;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Google Benchmark draws nothing by default: fa-bench prints its own table. Asking for
// --benchmark_format or --benchmark_display brings its console reporter back.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

bool wants_gbench_console(const Options& o) {
  for (const auto& a : o.benchmark_args) {
    if (a.rfind("--benchmark_format", 0) == 0 || a.rfind("--benchmark_display", 0) == 0)
      return true;
  }
  return false;
}

std::string benchmark_name(const std::string& variant, const Shape& s) {
  std::string shape = shape_text(s);
  std::replace(shape.begin(), shape.end(), ' ', '/');
  return fmt::format("{}/{}/causal={}/{}", variant, shape, s.causal ? 1 : 0, to_string(s.dtype));
}

// A CUDA graph of one enqueue of `launch` on `stream`, instantiated: the row's kernels replayed
// with the GPU's own launch path (--launch graph). Relaxed capture: a launcher's host-side work
// (a plan already cached, a kernel attribute already set) is allowed, only the stream's work is
// recorded. "" and *exec, or why the row cannot be captured.
std::string capture_graph(cudaStream_t stream, const std::function<std::string()>& launch,
                          cudaGraphExec_t* exec) {
  if (cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
      e != cudaSuccess) {
    cudaGetLastError();
    return std::string("graph capture: ") + cudaGetErrorString(e);
  }
  const std::string launched = launch();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!launched.empty() || ended != cudaSuccess) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    return "graph capture: " + (launched.empty() ? cudaGetErrorString(ended) : launched);
  }
  const cudaError_t made = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    *exec = nullptr;
    return std::string("graph instantiate: ") + cudaGetErrorString(made);
  }
  // The graph's upload, untimed: a first replay.
  cudaError_t e = cudaGraphLaunch(*exec, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    cudaGraphExecDestroy(*exec);
    *exec = nullptr;
    return std::string("graph launch: ") + cudaGetErrorString(e);
  }
  return "";
}

// Times `launch` as one Google Benchmark benchmark with manual (CUDA event) time. Every timed
// launch is one iteration; the samples of the final run are returned. `graph` (--launch graph):
// each sample replays it from a graph captured here, after one untimed replay (the graph's
// upload); *graph_note is why a capture failed (the row is then timed with stream launches).
// Returns an error string.
std::string time_variant(const std::string& name, const Options& o, L2Flusher* flusher,
                         cudaStream_t stream, const std::function<std::string()>& stream_launch,
                         std::vector<double>* samples, std::string* launched_as,
                         std::string* graph_note) {
  std::string error;
  EventTimer timer;
  cudaGraphExec_t exec = nullptr;
  *launched_as = "stream";
  if (o.launch == "graph") {
    *graph_note = capture_graph(stream, stream_launch, &exec);
    if (graph_note->empty()) *launched_as = "graph";
  }
  const std::function<std::string()> launch =
      exec ? std::function<std::string()>([&]() -> std::string {
        const cudaError_t e = cudaGraphLaunch(exec, stream);
        return e == cudaSuccess ? "" : std::string("cudaGraphLaunch: ") + cudaGetErrorString(e);
      })
           : stream_launch;
  benchmark::ClearRegisteredBenchmarks();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [&](benchmark::State& state) {
    samples->clear();  // Google Benchmark may call this more than once while sizing the run
    for (auto _ : state) {
      if (g_interrupted) {
        error = "interrupted";
        state.SkipWithError("interrupted");
        break;
      }
      if (flusher) flusher->flush(stream);
      timer.start(stream);
      const std::string e = launch();
      timer.stop(stream);
      if (!e.empty()) {
        error = e;
        state.SkipWithError(error.c_str());
        break;
      }
      const double ms = timer.elapsed_ms();
      state.SetIterationTime(ms * 1e-3);
      samples->push_back(ms);
    }
  });
  b->UseManualTime()->Unit(benchmark::kMillisecond);
  if (o.repetitions > 0) {
    b->Iterations(o.repetitions);
  } else {
    b->MinTime(o.min_time_s);
  }
  if (wants_gbench_console(o)) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::ClearRegisteredBenchmarks();
  if (exec) cudaGraphExecDestroy(exec);
  if (error.empty() && samples->empty()) {
    error = "not timed (excluded by --benchmark_filter?)";
  }
  return error;
}

}  // namespace

const VariantInfo& backward_forward_variant(const Shape& s) {
  const VariantInfo* fa2 = find_variant("fa2");
  return fa2->unsupported_reason(s).empty() ? *fa2 : *find_variant("standard");
}

std::string run_backward_forward(const Shape& s, const void* q, const void* k, const void* v,
                                 void* o, float* lse, StreamHandle stream) {
  const VariantInfo& info = backward_forward_variant(s);
  const Tiles tiles = info.default_tiles(static_cast<int>(s.d));
  auto launcher = info.make_launcher(LaunchOptions{});
  DeviceAllocation ws;
  const std::size_t ws_bytes = launcher->workspace_bytes(s, tiles);
  if (ws_bytes > 0 && !ws.allocate(ws_bytes))
    return fmt::format("the forward for the backward's O and lse needs {:.2f} GiB",
                       ws_bytes / kGiB);
  const DeviceBuffers b{q, k, v, o, lse, ws.ptr, ws_bytes};
  std::string err = launcher->prepare(s, tiles, b, stream);
  if (err.empty()) err = launcher->run(s, tiles, b, stream);
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return err.empty() ? "" : info.name + " forward (O and lse for the backward): " + err;
}

std::string direction_unsupported_reason(const VariantInfo& info, Direction d) {
  if (std::find(info.directions.begin(), info.directions.end(), d) != info.directions.end())
    return "";
  return fmt::format("{} has no {} pass", info.name, to_string(d));
}

namespace {

// A planned row's record before it runs: its spec, what the variant is, the IO model, and
// whether it can run here (unsupported, model only, or not run yet).
VariantResult planned_result(const PlannedRow& row, const Shape& shape,
                             const std::optional<DeviceInfo>& device, std::int64_t smem,
                             const RunResult& r) {
  const VariantInfo& info = *row.info;
  VariantResult v;
  v.spec = row.spec;
  v.default_config = row.default_config;
  v.default_options = row.default_options;
  v.algorithm = info.algorithm;
  v.peer = info.peer;
  model::ModelOptions mo;
  mo.fp8_quantisation_timed = info.quantisation_timed(row.spec.options);
  const OptionValue* fp8_scale = row.spec.option(kOptionFp8Scale);
  mo.fp8_amax_pass = fp8_scale && *fp8_scale == OptionValue(std::string("head"));
  mo.direction = row.spec.direction;
  mo.writes_lse = info.row_writes_lse(row.spec.options);
  mo.dq_accumulation = info.dq_accumulation;
  if (const OptionValue* dq = row.spec.option(kOptionDq))
    mo.dq_separate = *dq == OptionValue(std::string(kDqSeparate));
  const Tiles tiles = row.spec.tiles();
  const Tiles model_tiles = tiles.block_q > 0 ? tiles : info.model_tiles;
  mo.library_tiles = tiles.block_q == 0;
  // Without a GPU, Hopper's 132 SMs (the H100 SXM's and H200's).
  if (info.kv_splits) mo.kv_splits = info.kv_splits(shape, device ? device->sm_count : 132);
  v.reason = direction_unsupported_reason(info, row.spec.direction);
  if (v.reason.empty()) v.reason = info.unsupported_row(shape, row.spec);
  // No model for a shape the variant does not support: it has no tiles there (fa2 at d=256).
  if (v.reason.empty()) v.model = model::io_model(info.algorithm, shape, model_tiles, smem, mo);
  if (v.reason.empty() && device)
    v.reason = info.unsupported_on_device(device->cc_major, device->cc_minor);
  if (!v.reason.empty()) {
    v.status = Status::unsupported;
  } else if (r.settings.model_only) {
    v.status = Status::model_only;
    v.reason = device ? "--model-only" : "no GPU";
  } else {
    v.status = Status::interrupted;  // until it runs
    v.reason = "not run";
  }
  return v;
}

}  // namespace

RunResult plan_run(const Options& o, const std::optional<DeviceInfo>& device,
                   const std::string& no_gpu_reason,
                   const std::function<void(const std::string&)>& progress) {
  RunResult r;
  r.tool_version = kVersion;
  r.git_revision = kGitRevision;
  r.created_utc = utc_time("%Y-%m-%dT%H:%M:%SZ");
  r.command_line = o.command_line;
  r.device = device;
  r.no_gpu_reason = no_gpu_reason;
  r.settings.seed = o.seed;
  r.settings.warmup = o.warmup;
  r.settings.repetitions = o.repetitions;
  r.settings.min_time_s = o.min_time_s;
  r.settings.l2 = o.cold_l2 ? "cold" : "warm";
  r.settings.launch = o.launch;
  r.settings.inputs = o.inputs;
  r.settings.fp8_prequantized = o.fp8_prequantized();
  r.settings.model_only = o.model_only || !device;
  r.settings.energy_window_s = o.energy && !r.settings.model_only ? o.energy_window_s : 0;
  const std::int64_t smem = o.model_smem_per_sm > 0 ? o.model_smem_per_sm
                            : device                ? device->smem_per_sm_bytes
                                                    : kDefaultSmemPerSm;
  r.settings.model_smem_per_sm_bytes = smem;
  r.ceilings = device ? datasheet_ceilings(device->name, device->bus_bandwidth_bytes_per_s())
                      : Ceilings{"none (no GPU)", 0, 0, 0, 0};
  const auto plan = make_plan(o);
  // A --devices worker runs the configurations its parent dealt it; a shard, its part of the
  // plan (bench/plan.hpp). Seeds stay those of the whole plan, so the rows are the same.
  std::vector<bool> keep(plan.size(), o.worker_configs.empty() && o.shard_count <= 1);
  for (std::size_t i : o.worker_configs) {
    if (i < keep.size()) keep[i] = true;
  }
  if (o.worker_configs.empty() && o.shard_count > 1) {
    for (std::size_t i : shard_configs(o, plan, o.shard_index, o.shard_count)) keep[i] = true;
    r.shard = Shard{o.shard_index, o.shard_count};
  }
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (g_interrupted) break;  // Ctrl-C while planning: the record keeps what was planned
    if (!keep[i]) continue;
    if (progress)
      progress(fmt::format("planning [{}/{}] {}", i + 1, plan.size(),
                           benchmark_name("", plan[i]).substr(1)));
    ConfigResult c;
    c.shape = plan[i];
    c.seed = o.seed + 1000003ULL * i;  // fresh inputs for every configuration
    c.plan_index = i;
    if (device) c.gpu = GpuId{device->uuid, device->name};
    std::vector<PlannedRow> rows;
    plan_rows(o, static_cast<int>(c.shape.d), &rows, &c.shape);  // validated by the CLI
    for (const auto& row : rows) c.results.push_back(planned_result(row, c.shape, device, smem, r));
    r.configs.push_back(std::move(c));
  }
  r.complete = r.settings.model_only && !g_interrupted;
  return r;
}

namespace {

// The energy model for ceilings that lack one (or whose fit failed before, or was made without the
// counters while they are on now): fitted now. True when it was (the ceilings then need caching
// again).
bool fit_energy_model(const RunResult& r, energy::PowerSource* power, const Options& o,
                      MeasuredCeilings* m) {
  if (!power || !energy::fit_again(m->energy_model, o.counters)) return false;
  std::fprintf(stderr,
               "fitting the energy model (copy, softmax-step, mma.sync, L2, GEMM and sleep kernels "
               "in energy windows, each counted once)...\n");
  energy::Settings settings;
  settings.window_s = o.energy_window_s;
  try {
    m->energy_model = measure_energy_model(*r.device, *power, settings);
  } catch (const std::exception& e) {
    energy::Fit f;
    f.status = "unavailable";
    f.reason = std::string("calibration failed: ") + e.what();
    m->energy_model = f;
  }
  if (m->energy_model->status != "ok") {
    std::fprintf(stderr, "warning: no energy model: %s\n", m->energy_model->reason.c_str());
  }
  return true;
}

// Measured ceilings (and the energy model) from the cache, or measured now (and cached).
// Datasheet roofs, and no energy model, on failure.
void use_measured_ceilings(RunResult& r, const Options& o, energy::PowerSource* power) {
  if (o.datasheet_roofs) return;
  const std::string key = ceilings_cache_key(*r.device, kVersion);
  const std::string path = ceilings_cache_path(*r.device, kVersion);
  std::optional<MeasuredCeilings> m;
  std::string origin = "cached in " + path;
  bool save = false;
  if (!o.remeasure_ceilings) m = load_ceilings(path, key);
  try {
    if (!m) {
      std::fprintf(
          stderr,
          "measuring the roofline ceilings (copy, L2 read, FFMA, bf16/fp16/fp8 GEMMs)...\n");
      m = measure_ceilings(*r.device);
      m->key = key;
      origin = "this run";
      save = true;
    }
    save = fit_energy_model(r, power, o, &*m) || save;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: ceilings not measured (%s); the roofline uses datasheet roofs\n",
                 e.what());
    return;
  }
  if (save) {
    // A run under a sanitizer or a busy GPU measures roofs far below the hardware's: use them
    // for this run if asked, but never cache figures under a fifth of the datasheet's. A DRAM
    // roof above the datasheet's pins is a broken measurement (loads that never reached DRAM).
    const double ds_bw = r.ceilings.datasheet_dram_bytes_per_s,
                 ds_tc = r.ceilings.datasheet_tensor_flops_per_s_bf16;
    const bool implausible =
        (ds_bw > 0 && (m->dram_bytes_per_s < 0.2 * ds_bw || m->dram_bytes_per_s > 1.1 * ds_bw)) ||
        (ds_tc > 0 && m->bf16_flops_per_s < 0.2 * ds_tc);
    if (implausible) {
      std::fprintf(
          stderr,
          "warning: measured ceilings are implausible against the datasheet's (DRAM %.0f GB/s, "
          "bf16 %.0f TFLOP/s): not cached; is a profiler or sanitizer attached? "
          "(--datasheet-roofs)\n",
          m->dram_bytes_per_s * 1e-9, m->bf16_flops_per_s * 1e-12);
      origin = "this run, implausible against the datasheet, not cached";
    } else {
      try {
        save_ceilings(path, *m);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: ceilings not cached: %s\n", e.what());
      }
    }
  }
  r.ceilings = to_ceilings(*m, r.ceilings, origin);
}

// Pushes a CUPTI user range around one phase (the `target`-th) of a launch and none around the
// others. The work runs on a non-blocking stream that CUPTI's range markers are not ordered
// with, so the marks wait for the stream.
struct OnePhaseMarker final : PhaseMarker {
  const std::function<void(const char*)>& push;
  const std::function<void()>& pop;
  cudaStream_t stream;
  int target, seen = 0;
  bool open = false;
  OnePhaseMarker(const std::function<void(const char*)>& pu, const std::function<void()>& po,
                 cudaStream_t s, int t)
      : push(pu), pop(po), stream(s), target(t) {}
  void begin(const char* name) override {
    if (seen++ != target) return;
    FA_CUDA_CHECK(cudaStreamSynchronize(stream));
    push(name);
    open = true;
  }
  void end() override {
    if (!open) return;
    FA_CUDA_CHECK(cudaStreamSynchronize(stream));
    pop();
    open = false;
  }
};

// Names of the phases a launch marks (a launch with a recording marker, no profiler).
struct PhaseNames final : PhaseMarker {
  std::vector<std::string> names;
  void begin(const char* name) override { names.emplace_back(name); }
  void end() override {}
};

// Multi-kernel variants: counters per kernel, one measurement per phase (the whole launch runs
// every pass, the range covers that phase only), L2 flushed before each pass as for the variant.
void count_kernels(CounterSession& session, Launcher& launcher,
                   const std::function<std::string()>& launch, cudaStream_t stream,
                   L2Flusher& flusher, CounterResult* cr) {
  PhaseNames phases;
  launcher.set_phase_marker(&phases);
  const std::string err = launch();
  launcher.set_phase_marker(nullptr);
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!err.empty() || phases.names.size() < 2) return;
  try {
    for (int k = 0; k < static_cast<int>(phases.names.size()); ++k) {
      const auto values = session.measure_within(
          [&](const std::function<void(const char*)>& push, const std::function<void()>& pop) {
            OnePhaseMarker marker(push, pop, stream, k);
            launcher.set_phase_marker(&marker);
            const std::string e = launch();
            launcher.set_phase_marker(nullptr);
            if (!e.empty()) throw std::runtime_error(e);
            FA_CUDA_CHECK(cudaStreamSynchronize(stream));
          },
          [&] {
            flusher.flush(stream);
            FA_CUDA_CHECK(cudaStreamSynchronize(stream));
          });
      cr->kernels.push_back({phases.names[k], values});
    }
  } catch (const std::exception& e) {
    launcher.set_phase_marker(nullptr);
    cr->kernels.clear();
    cr->kernels_reason = e.what();
  }
}

}  // namespace

void compare_with_peers(ConfigResult& c) {
  // Against the fastest peer of the same arithmetic: fp8 rows against fp8 peers, 16-bit rows
  // against 16-bit peers (a bf16 kernel is not slow for losing to an FP8 one).
  for (auto& v : c.results) {
    if (v.peer || v.status != Status::ok) continue;
    const VariantResult* best = nullptr;
    for (const auto& p : c.results) {
      if (!p.peer || p.status != Status::ok ||
          (p.algorithm == Algorithm::fp8) != (v.algorithm == Algorithm::fp8)) {
        continue;
      }
      if (!best || p.timing->stats.median < best->timing->stats.median) best = &p;
    }
    if (!best) continue;
    v.derived->best_peer = row_label(c, *best);
    v.derived->speed_vs_best_peer = best->timing->stats.median / v.timing->stats.median;
  }
}

namespace {

// What every row of a run shares: the options, the counter session, the stream, the flusher.
struct RunContext {
  const Options& o;
  const RunHooks& hooks;
  RunResult& r;
  mutable std::optional<CounterSession> session;  // measuring changes its state, not the run's
  std::string counters_off_reason = "--no-counters";
  cudaStream_t stream = nullptr;
  std::unique_ptr<L2Flusher> flusher;
  std::unique_ptr<energy::PowerSource> power;  // NVML; none with --no-energy or without NVML
  std::string energy_off_reason = "--no-energy";
  mutable bool energy_settled = false;  // a window has run: the GPU is at its running state

  void checkpoint() const {
    if (hooks.checkpoint) hooks.checkpoint(r);
  }
};

// One CUPTI session for the whole run; if it cannot start, every row says why.
void start_counters(RunContext& ctx) {
  if (!ctx.o.counters) return;
  if (ctx.o.test_counter_error == "insufficient_privileges") {
    CounterSession::force_error_for_tests(CounterError::no_permission);
  } else if (ctx.o.test_counter_error == "hardware_busy") {
    CounterSession::force_error_for_tests(CounterError::busy);
  }
  std::vector<std::string> metrics = counters::default_metrics();
  metrics.insert(metrics.end(), ctx.o.extra_metrics.begin(), ctx.o.extra_metrics.end());
  ctx.session.emplace(CounterSession::create(ctx.r.device->index, metrics));
  CounterSession::force_error_for_tests(CounterError::none);
  if (!ctx.session->ok()) {
    ctx.counters_off_reason = ctx.session->error().message;
    std::fprintf(stderr, "warning: hardware counters unavailable: %s; timing only\n",
                 ctx.counters_off_reason.c_str());
    ctx.session.reset();
  }
}

// NVML for the whole run; if it cannot be had, every row says why.
void start_energy(RunContext& ctx) {
  if (!ctx.o.energy) return;
  ctx.power = energy::nvml_power_source(ctx.r.device->pci_bus_id, &ctx.energy_off_reason);
  if (ctx.power && !ctx.o.test_energy_error.empty())
    ctx.power = energy::failing_power_source(std::move(ctx.power), ctx.o.test_energy_error);
  if (!ctx.power) {
    std::fprintf(stderr, "warning: energy not measured: %s\n", ctx.energy_off_reason.c_str());
  }
}

// A configuration's inputs on the device (Q, K, V filled, O and lse to be written) and the fp64
// reference sample their outputs are judged against; `ok` false when they could not be allocated.
// With backward rows also the backward's inputs: dO (random), O and lse from one forward pass
// (fa2's, or standard's where fa2 has no kernel), and dQ, dK, dV to be written.
struct ConfigInputs {
  DeviceAllocation q, k, v, out, lse;
  DeviceAllocation page_table, kv_lengths;  // a paged or ragged cache (Shape::paged, ragged)
  DeviceBuffers buffers{};
  std::optional<ReferenceSample> reference;
  std::size_t qo_bytes = 0, lse_bytes = 0;
  bool ok = false;
  DeviceAllocation d_o, bwd_o, bwd_lse, dq, dk, dv;
  BackwardBuffers bwd{};
  std::optional<BackwardReferenceSample> bwd_reference;
  std::string bwd_error;  // why the backward rows cannot run ("" when they can)
};

bool has_rows(const ConfigResult& c, Direction d) {
  return std::any_of(c.results.begin(), c.results.end(), [d](const VariantResult& v) {
    return v.spec.direction == d && v.status != Status::unsupported;
  });
}

// Runs backward_forward_variant(s) into the configuration's backward inputs.
std::string backward_forward_pass(const RunContext& ctx, const Shape& s, ConfigInputs* in) {
  return run_backward_forward(s, in->q.ptr, in->k.ptr, in->v.ptr, in->bwd_o.ptr,
                              static_cast<float*>(in->bwd_lse.ptr), ctx.stream);
}

void prepare_backward_inputs(const RunContext& ctx, const ConfigResult& c, ConfigInputs* in) {
  const Shape& s = c.shape;
  Inputs dist = Inputs::normal;
  parse_inputs(ctx.o.inputs, &dist);  // checked by the CLI
  // dK and dV are K's and V's shape (contiguous: backward rows take no paged cache).
  const std::size_t kv_bytes = static_cast<std::size_t>(s.kv_elements()) * element_bytes(s.dtype);
  if (!(in->d_o.allocate(in->qo_bytes) && in->bwd_o.allocate(in->qo_bytes) &&
        in->bwd_lse.allocate(in->lse_bytes) && in->dq.allocate(in->qo_bytes) &&
        in->dk.allocate(kv_bytes) && in->dv.allocate(kv_bytes))) {
    in->bwd_error = fmt::format("backward inputs need {:.2f} GiB more, allocation failed",
                                (3 * in->qo_bytes + 2 * kv_bytes + in->lse_bytes) / kGiB);
    return;
  }
  FA_CUDA_CHECK(
      fill_normal(in->d_o.ptr, s.qo_elements(), s.dtype, c.seed * 3 + 3, ctx.stream, dist));
  if (std::string e = backward_forward_pass(ctx, s, in); !e.empty()) {
    in->bwd_error = e;
    return;
  }
  in->bwd = {in->q.ptr,
             in->k.ptr,
             in->v.ptr,
             in->bwd_o.ptr,
             in->d_o.ptr,
             static_cast<const float*>(in->bwd_lse.ptr),
             in->dq.ptr,
             in->dk.ptr,
             in->dv.ptr,
             nullptr,
             0};
  in->bwd_reference.emplace(s, in->bwd, c.seed);
}

void prepare_inputs(const RunContext& ctx, const ConfigResult& c, ConfigInputs* in) {
  const Shape& s = c.shape;
  in->qo_bytes = static_cast<std::size_t>(s.qo_elements()) * element_bytes(s.dtype);
  const std::size_t kv_bytes =
      static_cast<std::size_t>(s.kv_stored_elements()) * element_bytes(s.dtype);
  in->lse_bytes = static_cast<std::size_t>(s.heads_total() * s.N) * sizeof(float);
  in->ok = in->q.allocate(in->qo_bytes) && in->k.allocate(kv_bytes) && in->v.allocate(kv_bytes) &&
           in->out.allocate(in->qo_bytes) && in->lse.allocate(in->lse_bytes);
  in->buffers = {in->q.ptr, in->k.ptr, in->v.ptr, in->out.ptr, static_cast<float*>(in->lse.ptr),
                 nullptr,   0};
  if (!in->ok) return;
  if (s.paged() || s.ragged()) {
    const std::vector<std::int32_t> table = kv_page_table(s, c.seed);
    const std::vector<std::int32_t> lengths = kv_lengths_i32(s);
    in->ok = in->kv_lengths.allocate(lengths.size() * 4) &&
             (table.empty() || in->page_table.allocate(table.size() * 4));
    if (!in->ok) return;
    FA_CUDA_CHECK(
        cudaMemcpy(in->kv_lengths.ptr, lengths.data(), lengths.size() * 4, cudaMemcpyHostToDevice));
    if (!table.empty()) {
      FA_CUDA_CHECK(
          cudaMemcpy(in->page_table.ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    }
    in->buffers.page_table = static_cast<const std::int32_t*>(in->page_table.ptr);
    in->buffers.kv_lengths = static_cast<const std::int32_t*>(in->kv_lengths.ptr);
  }
  Inputs dist = Inputs::normal;
  parse_inputs(ctx.o.inputs, &dist);  // checked by the CLI
  const cudaStream_t stream = ctx.stream;
  FA_CUDA_CHECK(fill_normal(in->q.ptr, s.qo_elements(), s.dtype, c.seed * 3 + 0, stream, dist));
  // Every stored row, the pages' and the sequences' rows past their lengths too: a kernel that
  // reads them sees values the reference never used.
  FA_CUDA_CHECK(
      fill_normal(in->k.ptr, s.kv_stored_elements(), s.dtype, c.seed * 3 + 1, stream, dist));
  FA_CUDA_CHECK(
      fill_normal(in->v.ptr, s.kv_stored_elements(), s.dtype, c.seed * 3 + 2, stream, dist));
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (has_rows(c, Direction::forward)) in->reference.emplace(s, in->buffers, c.seed);
  if (has_rows(c, Direction::backward)) prepare_backward_inputs(ctx, c, in);
}

// One row on the device: its launcher, its buffers (the configuration's plus its workspace).
struct RowRun {
  const VariantInfo* info = nullptr;
  std::unique_ptr<Launcher> launcher;
  DeviceAllocation workspace;
  DeviceBuffers buffers{};
  BackwardBuffers bwd{};  // backward rows
  std::function<std::string()> launch;
};

// The launcher made with the row's option values, and its workspace. Returns "" or why the row is
// skipped (the workspace does not fit).
std::string make_row_run(const RunContext& ctx, const VariantResult& row, const Shape& s,
                         const ConfigInputs& in, RowRun* run) {
  run->info = find_variant(row.spec.variant);
  LaunchOptions lo;
  lo.options = row.spec.options;
  run->launcher = run->info->make_launcher(lo);
  const Tiles tiles = row.spec.tiles();
  const bool backward = row.spec.direction == Direction::backward;
  const std::size_t ws_bytes = backward ? run->launcher->backward_workspace_bytes(s, tiles)
                                        : run->launcher->workspace_bytes(s, tiles);
  if (ws_bytes > 0) {
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    if (ws_bytes > free_b || !run->workspace.allocate(ws_bytes)) {
      return fmt::format("needs {:.2f} GiB, {:.2f} GiB free", ws_bytes / kGiB, free_b / kGiB);
    }
  }
  run->buffers = in.buffers;
  run->buffers.workspace = run->workspace.ptr;
  run->buffers.workspace_bytes = ws_bytes;
  run->bwd = in.bwd;
  run->bwd.workspace = run->workspace.ptr;
  run->bwd.workspace_bytes = ws_bytes;
  // The workspace poisoned too (0xff bytes: NaN in fp32, bf16, fp16 and E4M3), so a variant that
  // reads scratch it never wrote shows in its output.
  if (ws_bytes > 0) FA_CUDA_CHECK(cudaMemsetAsync(run->workspace.ptr, 0xff, ws_bytes, ctx.stream));
  if (backward) {
    run->launch = [&ctx, run, s, tiles] {
      return run->launcher->run_backward(s, tiles, run->bwd, ctx.stream);
    };
  } else {
    run->launch = [&ctx, run, s, tiles] {
      return run->launcher->run(s, tiles, run->buffers, ctx.stream);
    };
  }
  return "";
}

void poison_outputs(const RunContext& ctx, const Shape& s, const ConfigInputs& in,
                    Direction direction) {
  if (direction == Direction::backward) {
    FA_CUDA_CHECK(poison_nan16(in.dq.ptr, s.qo_elements(), ctx.stream));
    for (void* g : {in.dk.ptr, in.dv.ptr})
      FA_CUDA_CHECK(poison_nan16(g, s.kv_elements(), ctx.stream));
    return;
  }
  FA_CUDA_CHECK(poison_nan16(in.out.ptr, s.qo_elements(), ctx.stream));
  FA_CUDA_CHECK(poison_nan32(static_cast<float*>(in.lse.ptr), s.heads_total() * s.N, ctx.stream));
}

// Verify: poisoned outputs, prepare, one run, every element finite, sampled rows against fp64.
// Returns "" or the launch's error (the row then errored).
// Backward rows: `worst` gets the gradient (dQ, dK, dV) of the worst row.
std::string verify_row(const RunContext& ctx, VariantResult& row, const Shape& s,
                       const ConfigInputs& in, RowRun& run, std::string* worst) {
  const Direction dir = row.spec.direction;
  poison_outputs(ctx, s, in, dir);
  std::string err = dir == Direction::backward
                        ? run.launcher->prepare_backward(s, row.spec.tiles(), run.bwd, ctx.stream)
                        : run.launcher->prepare(s, row.spec.tiles(), run.buffers, ctx.stream);
  // --profiler-range, for Nsight Compute (scripts/ncu_compare.py): the verification launch alone
  // between cudaProfilerStart and cudaProfilerStop, so ncu counts the variant's kernels as one
  // range, as fa-bench's CUPTI range does. With ncu's default kernel replay a stop would hide
  // everything after it. prepare() ran above, outside the range and the timed loop: our
  // launchers do their host work there (fa3's and fp8's TMA descriptors, whose encoding range
  // replay cannot capture). Peers get a range too, but cuDNN sets kernel attributes on every
  // call, which range replay cannot capture either: ncu_compare.py profiles them with
  // application-range replay.
  const bool profiler_range = ctx.o.profiler_range;
  if (profiler_range && err.empty()) {
    // One launch first, outside the range: first-call set-up (kernel attributes, library
    // handles) is not allowed inside an ncu capture. Then poison again.
    err = run.launch();
    FA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    poison_outputs(ctx, s, in, dir);
    FA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    FA_CUDA_CHECK(cudaProfilerStart());
  }
  if (err.empty()) err = run.launch();
  if (profiler_range) {
    // Two reads of twice the L2 from a buffer nothing writes: every line the launch dirtied is
    // written back before the range ends, and the eviction writes nothing of its own.
    if (ctx.o.profiler_range_write_back && err.empty() && ctx.flusher) {
      ctx.flusher->flush(ctx.stream);
      ctx.flusher->flush(ctx.stream);
    }
    cudaStreamSynchronize(ctx.stream);
    cudaProfilerStop();
  }
  if (err.empty()) {
    if (cudaError_t e = cudaStreamSynchronize(ctx.stream); e != cudaSuccess) {
      err = std::string("kernel failed: ") + cudaGetErrorName(e) + " " + cudaGetErrorString(e);
    }
  }
  if (!err.empty()) return err;
  if (dir == Direction::backward) {
    row.verification = in.bwd_reference->check(run.bwd, worst);
  } else {
    row.verification =
        in.reference->check(run.buffers, ReferenceSample::rule_for(*run.info, row.spec.options));
  }
  return "";
}

// Time: warm-up launches, then Google Benchmark with CUDA-event manual time. Returns "" or why
// the row was not timed.
std::string time_row(const RunContext& ctx, const std::string& name, RowRun& run, Timing* t,
                     std::string* graph_note) {
  std::string err;
  for (int i = 0; i < ctx.o.warmup && err.empty(); ++i) err = run.launch();
  FA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  t->l2 = ctx.o.cold_l2 ? "cold" : "warm";
  t->warmup = ctx.o.warmup;
  t->sm_clock_before_mhz = current_sm_clock_mhz(*ctx.r.device);
  if (err.empty()) {
    err = time_variant(name, ctx.o, ctx.o.cold_l2 ? ctx.flusher.get() : nullptr, ctx.stream,
                       run.launch, &t->samples_ms, &t->launch, graph_note);
  }
  t->sm_clock_after_mhz = current_sm_clock_mhz(*ctx.r.device);
  return err;
}

constexpr double kFirstWindowPrerollS = 3.0;

// Energy: the row's launches back to back, after and apart from the timed samples (which it leaves
// unchanged), in a window bounded by the energy counter's updates (profiler/energy.hpp).
energy::Measurement energy_row(const RunContext& ctx, RowRun& run, double median_ms) {
  if (!ctx.power) {
    return energy::not_measured(ctx.o.energy ? "unavailable" : "skipped", ctx.energy_off_reason);
  }
  energy::Settings settings;
  settings.window_s = ctx.o.energy_window_s;
  // The run's first window follows the setup's idle and light work: a longer preroll brings the
  // board to the power and temperature of launches back to back (H200: the first row of three
  // same-build runs drew 563, 577 and 581 W with 0.25 s).
  if (!ctx.energy_settled) settings.preroll_s = kFirstWindowPrerollS;
  ctx.energy_settled = true;
  energy::StreamLaunchQueue queue(ctx.stream, run.launch);
  return energy::measure(*ctx.power, queue, energy::steady_clock(), median_ms * 1e-3, settings);
}

// Counters: a separate, untimed run, replayed once per pass; L2 flushed before each pass; then,
// for multi-kernel variants, kernel by kernel.
CounterResult count_row(const RunContext& ctx, const std::string& name, RowRun& run) {
  CounterResult cr;
  if (!ctx.session) {
    cr.status = ctx.o.counters ? "unavailable" : "skipped";
    cr.reason = ctx.counters_off_reason;
    return cr;
  }
  CounterSession* session = &*ctx.session;
  const auto start = std::chrono::steady_clock::now();
  try {
    cr.values = session->measure(
        name,
        [&] {
          if (std::string e = run.launch(); !e.empty()) throw std::runtime_error(e);
          FA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        },
        [&] {
          ctx.flusher->flush(ctx.stream);
          FA_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        });
  } catch (const std::exception& e) {
    cr.status = "error";
    cr.reason = e.what();
  }
  if (cr.status == "ok" && ctx.o.kernel_breakdown) {
    count_kernels(*session, *run.launcher, run.launch, ctx.stream, *ctx.flusher, &cr);
  }
  cr.collect_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return cr;
}

// What happened to a row that could not finish: its status and reason, recorded at once.
void stop_row(const RunContext& ctx, VariantResult& row, Status status, std::string reason) {
  row.status = status;
  row.reason = std::move(reason);
  ctx.checkpoint();
}

// One row, start to end: launcher, verification, timing, counters. Returns false when the
// device's context is lost (a sticky error): nothing after it can run.
bool run_row(const RunContext& ctx, const ConfigResult& c, VariantResult& row,
             const ConfigInputs& in) {
  const Shape& s = c.shape;
  const std::string label = row_label(c, row);
  const std::string where = benchmark_name(label, s);
  auto step = [&](const char* what) { set_crash_context((where + ": " + what).c_str()); };
  RowRun run;
  step("setting up (launcher, workspace)");
  if (std::string why = make_row_run(ctx, row, s, in, &run); !why.empty()) {
    stop_row(ctx, row, Status::skipped, why);
    return true;
  }
  std::string worst_gradient;
  step("verification run");
  if (std::string err = verify_row(ctx, row, s, in, run, &worst_gradient); !err.empty()) {
    stop_row(ctx, row, Status::error, err);
    // A sticky error (e.g. an illegal address) poisons the context: nothing after can run.
    return !(cudaGetLastError() != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess);
  }
  if (!row.verification->passed) {
    stop_row(ctx, row, Status::failed,
             row.spec.direction == Direction::backward
                 ? backward_failure_reason(*row.verification, worst_gradient)
                 : verification_failure_reason(*row.verification));
    return true;
  }
  Timing t;
  step("timing");
  std::string graph_note;
  if (std::string err = time_row(ctx, benchmark_name(label, s), run, &t, &graph_note);
      !err.empty()) {
    stop_row(ctx, row, err == "interrupted" ? Status::interrupted : Status::error, err);
    return true;
  }
  t.stats = summarize(t.samples_ms);
  const double peak = tensor_peak_for(ctx.r.ceilings, row.algorithm, s.dtype);
  row.derived = derive(row.model, t, ctx.r.ceilings, peak);
  row.timing = std::move(t);
  row.status = Status::ok;
  row.reason = graph_note.empty() ? "" : graph_note + "; timed with stream launches";
  // The energy window before the counters, and never beside them: the range profiler is enabled
  // only inside a counter measurement (CounterSession), so the window sees the row as a run
  // without counters does.
  step("energy (NVML)");
  row.energy = energy_row(ctx, run, row.timing->stats.median);
  step("hardware counters (CUPTI)");
  row.counters = count_row(ctx, label, run);
  step("after the row (launcher and workspace released)");
  if (row.counters->status == "ok") row.measured = derive_measured(row, ctx.r.ceilings, peak);
  row.placement = placement_of(row, ctx.r.ceilings, peak);
  row.energy_model =
      energy_model_of(row, ctx.r.ceilings, run.info->uses_mma_sync(), &row.energy_model_reason);
  ctx.checkpoint();
  return true;
}

// Every row of one configuration; a lost device context ends the configuration's rows. Returns
// false when the run was interrupted.
bool run_config(RunContext& ctx, ConfigResult& c, std::size_t* done_rows, std::size_t total_rows) {
  ConfigInputs in;
  set_crash_context(
      (benchmark_name("", c.shape).substr(1) + ": preparing inputs and references").c_str());
  prepare_inputs(ctx, c, &in);
  for (auto& row : c.results) {
    ++*done_rows;
    if (g_interrupted) break;
    if (row.status == Status::unsupported) continue;
    if (ctx.hooks.progress) {
      ctx.hooks.progress(fmt::format("[{}/{}] {} {}", *done_rows, total_rows, row_label(c, row),
                                     benchmark_name("", c.shape).substr(1)));
    }
    if (!in.ok) {
      row.status = Status::skipped;
      const double kv_bytes =
          static_cast<double>(c.shape.kv_stored_elements()) * element_bytes(c.shape.dtype);
      row.reason = fmt::format("inputs need {:.2f} GiB, allocation failed",
                               (2 * in.qo_bytes + 2 * kv_bytes + in.lse_bytes) / kGiB);
      continue;
    }
    if (row.spec.direction == Direction::backward && !in.bwd_error.empty()) {
      row.status = Status::skipped;
      row.reason = in.bwd_error;
      continue;
    }
    if (!run_row(ctx, c, row, in)) break;
  }
  compare_with_peers(c);
  ctx.checkpoint();
  return !g_interrupted;
}

}  // namespace

RunResult execute(RunResult r, const Options& o, const RunHooks& hooks) {
  if (r.settings.model_only) return r;
  FA_CUDA_CHECK(cudaSetDevice(r.device->index));
  RunContext ctx{o,       hooks,   r,       std::nullopt, "--no-counters",
                 nullptr, nullptr, nullptr, "--no-energy"};
  start_energy(ctx);
  use_measured_ceilings(r, o, ctx.power.get());
  start_counters(ctx);
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  // Flushes before cold timing samples and before every counter pass.
  ctx.flusher = std::make_unique<L2Flusher>(static_cast<std::size_t>(r.device->l2_bytes));
  std::size_t total_rows = 0, done_rows = 0;
  for (const auto& c : r.configs) total_rows += c.results.size();
  for (auto& c : r.configs) {
    if (!run_config(ctx, c, &done_rows, total_rows)) break;
  }
  set_crash_context("releasing the run's buffers");
  cudaStreamDestroy(ctx.stream);
  r.complete = !g_interrupted;
  return r;
}

}  // namespace fa::bench
