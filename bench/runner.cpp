#include "bench/runner.hpp"

#include <benchmark/benchmark.h>
#include <cuda_profiler_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>

#include "bench/plan.hpp"
#include "bench/verify.hpp"
#include "bench/version.hpp"
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/device_buffer.hpp"
#include "kernels/common/fill.hpp"
#include "profiler/ceilings.hpp"
#include "profiler/counters.hpp"
#include "profiler/cupti_range.hpp"
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
  return fmt::format("{}/B={}/H={}/N={}/d={}/causal={}/{}", variant, s.B, s.H, s.N, s.d,
                     s.causal ? 1 : 0, to_string(s.dtype));
}

// Times `launch` as one Google Benchmark benchmark with manual (CUDA event) time. Every timed
// launch is one iteration; the samples of the final run are returned. Returns an error string.
std::string time_variant(const std::string& name, const Options& o, L2Flusher* flusher,
                         cudaStream_t stream, const std::function<std::string()>& launch,
                         std::vector<double>* samples) {
  std::string error;
  EventTimer timer;
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
  if (error.empty() && samples->empty()) {
    error = "not timed (excluded by --benchmark_filter?)";
  }
  return error;
}

}  // namespace

RunResult plan_run(const Options& o, const std::optional<DeviceInfo>& device,
                   const std::string& no_gpu_reason, const std::function<void(const std::string&)>& progress) {
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
  r.settings.inputs = o.inputs;
  r.settings.fp8_prequantized = o.fp8_prequantized;
  r.settings.model_only = o.model_only || !device;
  const std::int64_t smem = o.model_smem_per_sm > 0 ? o.model_smem_per_sm
                            : device                ? device->smem_per_sm_bytes
                                                    : kDefaultSmemPerSm;
  r.settings.model_smem_per_sm_bytes = smem;
  r.ceilings = device ? datasheet_ceilings(device->name, device->bus_bandwidth_bytes_per_s())
                      : Ceilings{"none (no GPU)", 0, 0, 0, 0};
  const auto plan = make_plan(o);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (g_interrupted) break;  // Ctrl-C while planning: the record keeps what was planned
    if (progress) progress(fmt::format("planning [{}/{}] {}", i + 1, plan.size(), benchmark_name("", plan[i]).substr(1)));
    ConfigResult c;
    c.shape = plan[i];
    c.seed = o.seed + 1000003ULL * i;  // fresh inputs for every configuration
    std::vector<PlannedVariant> rows;
    plan_variants(o, static_cast<int>(c.shape.d), &rows);  // validated by the CLI
    for (const auto& pv : rows) {
      VariantResult v;
      v.variant = pv.row_name;
      v.algorithm = pv.info->algorithm;
      v.tiles = pv.tiles;
      v.peer = pv.info->peer;
      if (pv.info->algorithm == Algorithm::fa2)
        v.block_order = pv.heads_interleaved ? "heads" : "blocks";
      model::ModelOptions mo;
      // The cudnn-fp8 peer always quantises outside the timed region (kernels/cudnn/cudnn.cpp).
      mo.fp8_quantisation_timed = !o.fp8_prequantized && !pv.info->peer;
      const Tiles model_tiles = v.tiles.block_q > 0 ? v.tiles : pv.info->model_tiles;
      v.reason = pv.info->unsupported_reason(c.shape);
      // No model for a shape the variant does not support: it has no tiles there (d=256).
      if (v.reason.empty()) v.model = model::io_model(pv.info->algorithm, c.shape, model_tiles, smem, mo);
      if (v.reason.empty() && device) v.reason = pv.info->unsupported_on_device(device->cc_major, device->cc_minor);
      if (!v.reason.empty()) {
        v.status = Status::unsupported;
      } else if (r.settings.model_only) {
        v.status = Status::model_only;
        v.reason = device ? "--model-only" : "no GPU";
      } else {
        v.status = Status::interrupted;  // until it runs
        v.reason = "not run";
      }
      c.results.push_back(std::move(v));
    }
    r.configs.push_back(std::move(c));
  }
  r.complete = r.settings.model_only && !g_interrupted;
  return r;
}

namespace {

// Measured ceilings from the cache, or measured now (and cached). Datasheet roofs on failure.
void use_measured_ceilings(RunResult& r, const Options& o) {
  if (o.datasheet_roofs) return;
  const std::string key = ceilings_cache_key(*r.device, kVersion);
  const std::string path = ceilings_cache_path(*r.device, kVersion);
  std::optional<MeasuredCeilings> m;
  std::string origin = "cached in " + path;
  if (!o.remeasure_ceilings) m = load_ceilings(path, key);
  if (!m) {
    try {
      std::fprintf(
          stderr,
          "measuring the roofline ceilings (copy, L2 read, FFMA, bf16/fp16/fp8 GEMMs)...\n");
      m = measure_ceilings(*r.device);
      m->key = key;
      origin = "this run";
      // A run under a sanitizer or a busy GPU measures roofs far below the hardware's: use them
      // for this run if asked, but never cache figures under a fifth of the datasheet's.
      const double ds_bw = r.ceilings.datasheet_dram_bytes_per_s,
                   ds_tc = r.ceilings.datasheet_tensor_flops_per_s_bf16;
      const bool implausible = (ds_bw > 0 && m->dram_bytes_per_s < 0.2 * ds_bw) ||
                               (ds_tc > 0 && m->bf16_flops_per_s < 0.2 * ds_tc);
      if (implausible) {
        std::fprintf(
            stderr,
            "warning: measured ceilings are under a fifth of the datasheet's (DRAM %.0f GB/s, bf16 "
            "%.0f TFLOP/s): not cached; is a profiler or sanitizer attached? (--datasheet-roofs)\n",
            m->dram_bytes_per_s * 1e-9, m->bf16_flops_per_s * 1e-12);
        origin = "this run, implausibly low, not cached";
      } else {
        try {
          save_ceilings(path, *m);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "warning: ceilings not cached: %s\n", e.what());
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "warning: ceilings not measured (%s); the roofline uses datasheet roofs\n",
                   e.what());
      return;
    }
  }
  r.ceilings = to_ceilings(*m, r.ceilings, origin);
}

bool profiler_ranges_requested() {
  const char* v = std::getenv("FA_BENCH_PROFILER_RANGES");
  return v != nullptr && std::string(v) == "1";
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
    v.derived->best_peer = best->variant;
    v.derived->speed_vs_best_peer = best->timing->stats.median / v.timing->stats.median;
  }
}

RunResult execute(RunResult r, const Options& o, const RunHooks& hooks) {
  if (r.settings.model_only) return r;
  FA_CUDA_CHECK(cudaSetDevice(r.device->index));
  use_measured_ceilings(r, o);
  // Counters: one CUPTI session for the whole run; if it cannot start, every row says why.
  std::optional<CounterSession> session;
  std::string counters_off_reason = "--no-counters";
  if (o.counters) {
    std::vector<std::string> metrics = counters::default_metrics();
    metrics.insert(metrics.end(), o.extra_metrics.begin(), o.extra_metrics.end());
    session.emplace(CounterSession::create(r.device->index, metrics));
    if (!session->ok()) {
      counters_off_reason = session->error().message;
      std::fprintf(stderr, "warning: hardware counters unavailable: %s; timing only\n",
                   counters_off_reason.c_str());
      session.reset();
    }
  }
  cudaStream_t stream = nullptr;
  FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Flushes before cold timing samples and before every counter pass.
  auto flusher = std::make_unique<L2Flusher>(static_cast<std::size_t>(r.device->l2_bytes));

  std::size_t total_rows = 0, done_rows = 0;
  for (const auto& c : r.configs) total_rows += c.results.size();

  for (auto& c : r.configs) {
    const Shape& s = c.shape;
    const std::size_t qkv_bytes =
        static_cast<std::size_t>(s.qkv_elements()) * element_bytes(s.dtype);
    const std::size_t lse_bytes = static_cast<std::size_t>(s.heads_total() * s.N) * sizeof(float);
    DeviceAllocation q, k, v, out, lse;
    const bool have_inputs = q.allocate(qkv_bytes) && k.allocate(qkv_bytes) &&
                             v.allocate(qkv_bytes) && out.allocate(qkv_bytes) &&
                             lse.allocate(lse_bytes);
    std::optional<ReferenceSample> reference;
    DeviceBuffers buffers{q.ptr, k.ptr, v.ptr, out.ptr, static_cast<float*>(lse.ptr), nullptr, 0};
    if (have_inputs) {
      const Inputs dist = o.inputs == "outliers" ? Inputs::outliers : Inputs::normal;
      FA_CUDA_CHECK(fill_normal(q.ptr, s.qkv_elements(), s.dtype, c.seed * 3 + 0, stream, dist));
      FA_CUDA_CHECK(fill_normal(k.ptr, s.qkv_elements(), s.dtype, c.seed * 3 + 1, stream, dist));
      FA_CUDA_CHECK(fill_normal(v.ptr, s.qkv_elements(), s.dtype, c.seed * 3 + 2, stream, dist));
      FA_CUDA_CHECK(cudaStreamSynchronize(stream));
      const bool fp8_rows =
          std::any_of(c.results.begin(), c.results.end(), [](const VariantResult& v) {
            return v.algorithm == Algorithm::fp8 && v.status != Status::unsupported;
          });
      reference.emplace(s, buffers, c.seed, fp8_rows);
    }

    for (auto& row : c.results) {
      ++done_rows;
      if (g_interrupted) break;
      if (row.status == Status::unsupported) continue;
      if (hooks.progress) {
        hooks.progress(fmt::format("[{}/{}] {} {}", done_rows, total_rows, row.variant,
                                   benchmark_name("", s).substr(1)));
      }
      if (!have_inputs) {
        row.status = Status::skipped;
        row.reason = fmt::format("inputs need {:.2f} GiB, allocation failed",
                                 (4 * qkv_bytes + lse_bytes) / kGiB);
        continue;
      }
      const VariantInfo* info = variant_of_row(row.variant);
      LaunchOptions lo;
      lo.fp8_prequantized = o.fp8_prequantized;
      lo.fa2_heads_interleaved = row.block_order == "heads";
      auto launcher = info->make_launcher(lo);
      const std::size_t ws_bytes = launcher->workspace_bytes(s, row.tiles);
      DeviceAllocation ws;
      if (ws_bytes > 0) {
        std::size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        if (ws_bytes > free_b || !ws.allocate(ws_bytes)) {
          row.status = Status::skipped;
          row.reason =
              fmt::format("needs {:.2f} GiB, {:.2f} GiB free", ws_bytes / kGiB, free_b / kGiB);
          if (hooks.checkpoint) hooks.checkpoint(r);
          continue;
        }
      }
      DeviceBuffers b = buffers;
      b.workspace = ws.ptr;
      b.workspace_bytes = ws_bytes;
      // The workspace poisoned too (0xff bytes: NaN in fp32, bf16, fp16 and E4M3), so a variant
      // that reads scratch it never wrote shows in its output.
      if (ws_bytes > 0) FA_CUDA_CHECK(cudaMemsetAsync(ws.ptr, 0xff, ws_bytes, stream));
      auto launch = [&] { return launcher->run(s, row.tiles, b, stream); };

      // Verify: poisoned outputs, one run, every element finite, sampled rows against fp64.
      FA_CUDA_CHECK(poison_nan16(out.ptr, s.qkv_elements(), stream));
      FA_CUDA_CHECK(poison_nan32(static_cast<float*>(lse.ptr), s.heads_total() * s.N, stream));
      std::string err = launcher->prepare(s, row.tiles, b, stream);
      // For Nsight Compute's range replay (scripts/ncu_compare.py --mode range): the verification
      // launch alone between cudaProfilerStart and cudaProfilerStop, so ncu counts the variant's
      // kernels as one range, as fa-bench's CUPTI range does. Off unless asked: with ncu's default
      // kernel replay a stop would hide everything after it.
      // Not for peers: cuDNN sets kernel attributes on every call, which ncu cannot capture.
      const bool profiler_range = profiler_ranges_requested() && !row.peer;
      if (profiler_range && err.empty()) {
        // One launch first, outside the range: first-call set-up (kernel attributes, library
        // handles) is not allowed inside an ncu capture. Then poison again.
        err = launch();
        FA_CUDA_CHECK(cudaStreamSynchronize(stream));
        FA_CUDA_CHECK(poison_nan16(out.ptr, s.qkv_elements(), stream));
        FA_CUDA_CHECK(poison_nan32(static_cast<float*>(lse.ptr), s.heads_total() * s.N, stream));
        FA_CUDA_CHECK(cudaStreamSynchronize(stream));
        FA_CUDA_CHECK(cudaProfilerStart());
      }
      if (err.empty()) err = launch();
      if (profiler_range) {
        cudaStreamSynchronize(stream);
        cudaProfilerStop();
      }
      if (err.empty()) {
        if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
          err = std::string("kernel failed: ") + cudaGetErrorName(e) + " " + cudaGetErrorString(e);
        }
      }
      if (!err.empty()) {
        row.status = Status::error;
        row.reason = err;
        if (hooks.checkpoint) hooks.checkpoint(r);
        // A sticky error (e.g. an illegal address) poisons the context: nothing after can run.
        if (cudaGetLastError() != cudaSuccess && cudaDeviceSynchronize() != cudaSuccess) break;
        continue;
      }
      row.verification = reference->check(b, {info->accuracy, info->writes_lse});
      if (!row.verification->passed) {
        row.status = Status::failed;
        row.reason = verification_failure_reason(*row.verification);
        if (hooks.checkpoint) hooks.checkpoint(r);
        continue;
      }

      // Time: warm-up launches, then Google Benchmark with CUDA-event manual time.
      for (int i = 0; i < o.warmup && err.empty(); ++i) err = launch();
      FA_CUDA_CHECK(cudaStreamSynchronize(stream));
      Timing t;
      t.l2 = o.cold_l2 ? "cold" : "warm";
      t.warmup = o.warmup;
      t.sm_clock_before_mhz = current_sm_clock_mhz(*r.device);
      if (err.empty()) {
        err = time_variant(benchmark_name(row.variant, s), o, o.cold_l2 ? flusher.get() : nullptr,
                           stream, launch, &t.samples_ms);
      }
      t.sm_clock_after_mhz = current_sm_clock_mhz(*r.device);
      if (!err.empty()) {
        row.status = err == "interrupted" ? Status::interrupted : Status::error;
        row.reason = err;
        if (hooks.checkpoint) hooks.checkpoint(r);
        continue;
      }
      t.stats = summarize(t.samples_ms);
      const double peak = tensor_peak_for(r.ceilings, row.algorithm, s.dtype);
      row.derived = derive(row.model, t, r.ceilings, peak);
      row.timing = std::move(t);
      row.status = Status::ok;
      row.reason.clear();

      // Counters: a separate, untimed run, replayed once per pass; L2 flushed before each pass.
      CounterResult cr;
      if (!session) {
        cr.status = o.counters ? "unavailable" : "skipped";
        cr.reason = counters_off_reason;
      } else {
        const auto start = std::chrono::steady_clock::now();
        try {
          cr.values = session->measure(
              row.variant,
              [&] {
                if (std::string e = launch(); !e.empty()) throw std::runtime_error(e);
                FA_CUDA_CHECK(cudaStreamSynchronize(stream));
              },
              [&] {
                flusher->flush(stream);
                FA_CUDA_CHECK(cudaStreamSynchronize(stream));
              });
        } catch (const std::exception& e) {
          cr.status = "error";
          cr.reason = e.what();
        }
        cr.collect_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      if (cr.status == "ok" && o.kernel_breakdown) {
        const auto start = std::chrono::steady_clock::now();
        count_kernels(*session, *launcher, launch, stream, *flusher, &cr);
        cr.collect_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      row.counters = cr;
      if (cr.status == "ok") row.measured = derive_measured(row, r.ceilings, peak);
      row.placement = placement_of(row, r.ceilings, peak);
      if (hooks.checkpoint) hooks.checkpoint(r);
    }
    compare_with_peers(c);
    if (hooks.checkpoint) hooks.checkpoint(r);
    if (g_interrupted) break;
  }
  cudaStreamDestroy(stream);
  r.complete = !g_interrupted;
  return r;
}

}  // namespace fa::bench
