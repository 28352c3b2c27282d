// fa-bench: CLI -> plan -> variant runs on device buffers -> measurements and model -> one
// result record -> writers (table, JSON, CSV, Markdown).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

#include "bench/crash_report.hpp"
#include "bench/devices.hpp"
#include "bench/explain.hpp"
#include "bench/gate.hpp"
#include "bench/merge.hpp"
#include "bench/options.hpp"
#include "bench/plan.hpp"
#include "bench/result_json.hpp"
#include "bench/runner.hpp"
#include "bench/writers.hpp"
#include "profiler/counters.hpp"
#include "profiler/cupti_range.hpp"

namespace {

using namespace fa::bench;

// --stall-reasons: the stall reasons' metrics join --metrics' where this GPU offers them; the
// others are named in one warning line (the reasons are a view, not a verdict: a missing one does
// not stop the run, unlike a metric the user named).
void add_stall_metrics(const fa::DeviceInfo& device, Options& o) {
  std::vector<std::string> wanted;
  for (const auto& s : fa::counters::stall_reasons()) wanted.push_back(s.metric);
  std::vector<std::string> refused;
  try {
    refused = fa::CounterSession::unsupported(device.index, wanted);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "warning: --stall-reasons: not counted (the metrics could not be checked: %s)\n",
                 e.what());
    return;
  }
  const std::set<std::string> missing(refused.begin(), refused.end());
  for (const auto& m : wanted) {  // once each, also when --metrics names it
    if (!missing.count(m) &&
        std::find(o.extra_metrics.begin(), o.extra_metrics.end(), m) == o.extra_metrics.end())
      o.extra_metrics.push_back(m);
  }
  if (!refused.empty()) {
    std::fprintf(stderr, "warning: --stall-reasons: not available on this GPU (%s): %s\n",
                 device.name.c_str(), fmt::format("{}", fmt::join(refused, ", ")).c_str());
  }
}

extern "C" void on_sigint(int) {
  if (g_interrupted.exchange(true)) {  // second Ctrl-C: leave now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

std::string default_result_path() {
  return utc_time("results/fa-bench-%Y%m%d-%H%M%S.json");
}

// The output files, each with its flag. Checkpoints (after every row) rewrite only those written
// atomically: a FIFO, a terminal or /dev/stdout gets the record once, at the end.
void write_outputs(const RunResult& r, const Options& o, const std::string& json_path,
                   bool final_write) {
  const std::pair<const std::string*, std::string (*)(const RunResult&)> outputs[] = {
      {&json_path, &to_json_text}, {&o.csv_path, &to_csv}, {&o.markdown_path, &to_markdown}};
  for (const auto& [path, render] : outputs) {
    if (path->empty()) continue;
    if (!final_write && !fa::resolve_output(*path).atomic) continue;
    write_file_atomically(*path, render(r));
  }
}

// Every output path must be writable before anything runs; two flags may not name one file.
std::string output_paths_problem(const Options& o, const std::string& json_path) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--json", &json_path}, {"--csv", &o.csv_path}, {"--markdown", &o.markdown_path}};
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path->empty()) continue;
    if (std::string why = fa::output_problem(*path); !why.empty()) {
      return fmt::format("{}: {}: {} (accepted: a file path that can be written)", flag, *path,
                         why);
    }
    for (std::size_t k = 0; k < i; ++k) {
      const auto& [other_flag, other] = outputs[k];
      const fa::OutputTarget a = fa::resolve_output(*path), b = fa::resolve_output(*other);
      std::error_code ec;
      const bool same = a.path == b.path || std::filesystem::equivalent(a.path, b.path, ec);
      if (!other->empty() && same && a.atomic) {
        return fmt::format("{}: {} is also the {} file (accepted: a different file)", flag, *path,
                           other_flag);
      }
    }
  }
  return "";
}

// Google Benchmark's own flags. It prints its complaint about a value (e.g. "abc is expected to
// be a double") itself and leaves the flag unconsumed; that text is captured so the error is one
// line that says what was wrong. Returns "" or the error line.
std::string initialize_google_benchmark(const Options& o) {
  std::vector<std::string> gb_args{"fa-bench"};
  gb_args.insert(gb_args.end(), o.benchmark_args.begin(), o.benchmark_args.end());
  std::vector<char*> gb_argv;
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  const int saved = capture ? ::dup(STDERR_FILENO) : -1;
  if (saved >= 0) ::dup2(::fileno(capture), STDERR_FILENO);
  benchmark::Initialize(&gb_argc, gb_argv.data());
  std::string said;
  if (saved >= 0) {
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::rewind(capture);
    char buf[512];
    while (std::fgets(buf, sizeof buf, capture)) said += buf;
  }
  if (capture) std::fclose(capture);
  if (gb_argc <= 1) {
    std::fputs(said.c_str(), stderr);
    return "";
  }
  const std::string arg = gb_argv[1];
  if (said.empty()) {
    return fmt::format(
        "{}: not a Google Benchmark flag (its flags: --benchmark_filter, "
        "--benchmark_min_time, --benchmark_format, --benchmark_out, ...)",
        arg);
  }
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  if (auto nl = said.find('\n'); nl != std::string::npos) said = said.substr(0, nl);
  return fmt::format("{}: Google Benchmark does not accept this value ({})", arg, said);
}

int run(int argc, char** argv) {
  install_crash_report();
  ParseOutcome parsed = parse_cli(argc, argv);
  if (parsed.action == ParseOutcome::Action::exit) {
    std::fputs(parsed.output.c_str(), parsed.exit_code == kExitOk ? stdout : stderr);
    return parsed.exit_code;
  }
  Options& o = parsed.options;

  // Google Benchmark takes its own flags; anything it does not know is bad input.
  if (std::string err = initialize_google_benchmark(o); !err.empty()) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return kExitBadInput;
  }
  // Relative paths are the user's: scripts/run.sh runs fa-bench where it was called from.
  const std::string json_path = o.json_path.empty() ? default_result_path() : o.json_path;
  if (std::string err = output_paths_problem(o, json_path); !err.empty()) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return kExitBadInput;
  }
  // From here on Ctrl-C stops at the next safe point (planning included) and keeps what finished.
  std::signal(SIGINT, on_sigint);
  const bool tty = isatty(STDERR_FILENO);

  // --devices: the GPUs the workers will run on; the plan is made with the first one's figures.
  const bool worker = !o.worker_configs.empty();
  std::vector<fa::DeviceInfo> gpus;
  std::string why_not;
  std::optional<fa::DeviceInfo> device;
  if (!o.devices.empty()) {
    bool bad_input = false;
    why_not = resolve_devices(o, &gpus, &bad_input);
    if (bad_input) {
      std::fprintf(stderr, "error: %s\n", why_not.c_str());
      return kExitBadInput;
    }
    if (!gpus.empty()) device = gpus.front();
  } else if (o.test_fake_devices > 0) {  // a worker of a --test-fake-devices parent
    device = fake_device(o.device);
  } else {
    device = fa::query_device(o.device, &why_not);
  }
  if (!device) {
    if (o.require_gpu) {
      std::fprintf(stderr, "error: %s (--require-gpu)\n", why_not.c_str());
      return kExitNoGpu;
    }
    std::fprintf(stderr, "notice: %s; showing the IO model only (nothing is launched)\n",
                 why_not.c_str());
  } else if (!worker) {  // a worker's parent said it
    for (const auto& g : gpus.empty() ? std::vector<fa::DeviceInfo>{*device} : gpus) {
      std::fprintf(stderr,
                   "device %d: %s, %d SMs, %.0f GiB, L2 %.0f MiB, CUDA driver %d, driver %s\n",
                   g.index, g.name.c_str(), g.sm_count, g.memory_bytes / 1073741824.0,
                   g.l2_bytes / 1048576.0, g.cuda_driver_version, g.driver_version.c_str());
    }
  }

  if (device && o.counters && !o.extra_metrics.empty() && o.test_fake_devices == 0) {
    try {
      const auto bad = fa::CounterSession::unsupported(device->index, o.extra_metrics);
      if (!bad.empty()) {
        std::fprintf(stderr, "error: --metrics: not available on this GPU (%s): %s\n",
                     device->name.c_str(), fmt::format("{}", fmt::join(bad, ", ")).c_str());
        return kExitBadInput;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: --metrics not checked (%s)\n", e.what());
    }
  }
  if (device && o.counters && o.stall_reasons && o.test_fake_devices == 0) {
    add_stall_metrics(*device, o);
  }
  // Planning is quick unless the sweep is huge (the IO model walks the blocks): a progress line
  // after the first second, then every half second on a terminal, every 10 s otherwise.
  const auto plan_start = std::chrono::steady_clock::now();
  auto last_shown = plan_start;
  bool plan_line_shown = false;
  auto plan_progress = [&](const std::string& line) {
    const auto now = std::chrono::steady_clock::now();
    if (now - plan_start < std::chrono::seconds(1)) return;
    if (plan_line_shown &&
        now - last_shown < (tty ? std::chrono::milliseconds(500) : std::chrono::seconds(10)))
      return;
    last_shown = now;
    plan_line_shown = true;
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s (Ctrl-C stops, keeping what is planned)", line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  RunResult record = plan_run(o, device, why_not, plan_progress);
  if (tty && plan_line_shown) std::fputs("\r\033[K", stderr);
  if (o.shard_count > 1) {
    std::fprintf(stderr, "shard %d/%d%s: %zu of %zu configurations\n", o.shard_index, o.shard_count,
                 o.shard_source.empty() ? "" : (" (from " + o.shard_source + ")").c_str(),
                 record.configs.size(), make_plan(o).size());
  }
  // (N, N_kv, d) already printed
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shown;
  for (const auto& c : record.configs) {
    if (worker) break;  // the parent said it
    const fa::Shape& s = c.shape;
    if (!shown.insert({s.N, s.kv_len(), s.d}).second) continue;
    std::string kv = s.square() ? "" : fmt::format(" N_kv={}", s.kv_len());
    std::string heads_kv = s.grouped() ? fmt::format(" heads_kv={}", s.kv_heads()) : "";
    std::fprintf(stderr, "N=%lld%s d=%lld: batch=%lld%s heads=%lld%s%s\n",
                 static_cast<long long>(s.N), kv.c_str(), static_cast<long long>(s.d),
                 static_cast<long long>(s.B),
                 o.batch                      ? ""
                 : !o.kv_lengths_list.empty() ? " (--kv-lengths)"
                 : o.kv_len.empty()           ? " (16384/N)"
                                              : " (16384/N_kv)",
                 static_cast<long long>(s.H), o.heads ? "" : " (2048/d)", heads_kv.c_str());
  }

  RunHooks hooks;
  bool checkpoint_warned = false;
  hooks.checkpoint = [&](const RunResult& partial) {
    try {
      write_outputs(partial, o, json_path, /*final_write=*/false);
    } catch (const std::exception& e) {  // e.g. disk full: keep running, try again at the end
      if (!checkpoint_warned)
        std::fprintf(stderr, "%swarning: %s\n", tty ? "\r\033[K" : "", e.what());
      checkpoint_warned = true;
    }
  };
  if (worker) {  // one line per row, named by its GPU: several workers share the terminal
    const int index = o.device;
    hooks.progress = [index](const std::string& line) {
      std::fprintf(stderr, "gpu %d: %s\n", index, line.c_str());
    };
  } else if (tty) {
    hooks.progress = [](const std::string& line) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    };
  }
  if (g_interrupted) {
    record.complete = false;  // interrupted while planning: nothing runs
  } else if (!gpus.empty()) {
    std::vector<std::string> args(argv + 1, argv + argc);
    record = run_on_devices(std::move(record), o, gpus, args, hooks.checkpoint);
  } else if (worker && o.test_fake_devices > 0) {
    fake_execute(record, o, hooks.checkpoint);
  } else {
    record = execute(std::move(record), o, hooks);
  }
  if (tty) std::fputs("\r\033[K", stderr);
  std::fflush(stdout);  // an output that is /dev/stdout follows what was printed
  std::string write_error;
  try {
    write_outputs(record, o, json_path, /*final_write=*/true);
  } catch (const std::exception& e) {
    write_error = e.what();
  }

  int code = kExitOk;
  const bool several_gpus = !record.devices.empty();
  for (const auto& c : record.configs) {
    if (several_gpus && c.gpu)
      std::printf("on %s (%s)\n", c.gpu->name.c_str(), c.gpu->uuid.c_str());
    std::fputs(format_table(c).c_str(), stdout);
    std::fputs(explain_counters(c).c_str(), stdout);
    std::fputs("\n", stdout);
    for (const auto& v : c.results) {
      if (v.status == Status::failed || v.status == Status::error) code = kExitVariantFailed;
    }
  }
  if (!device) std::fputs("(no GPU: model columns only)\n", stdout);
  if (record.settings.model_only) {
    const std::int64_t smem = record.settings.model_smem_per_sm_bytes;
    std::printf(
        "IO model: shared memory per SM M = %lld B (%s; --model-smem-per-sm sets another), used by "
        "the asymptotic bound; HBM model: the variant's own tiles.\n",
        static_cast<long long>(smem),
        o.model_smem_per_sm > 0 ? "--model-smem-per-sm"
        : device                ? device->name.c_str()
                                : "no GPU: Hopper's, H100/H200");
  }
  const bool kv_apart = std::any_of(record.configs.begin(), record.configs.end(),
                                    [](const ConfigResult& c) { return !c.shape.square(); });
  const bool ragged = std::any_of(record.configs.begin(), record.configs.end(),
                                  [](const ConfigResult& c) { return c.shape.ragged(); });
  std::printf(
      "TFLOP/s: %s per second (the field's convention; H: query heads); "
      "model: FLOPs as the kernel issues them.\nHBM model and FLOP/B: the IO model's bytes. "
      "DRAM meas: DRAM bytes counted by CUPTI (separate untimed run, L2 flushed first); /mod: "
      "that over the model; L2/m: SM<->L2 bytes (counted at the SM) over the model; TC/m: tensor "
      "FLOPs counted over the model's.\nroofline: attained over the lowest of the tensor peak, "
      "DRAM intensity x DRAM bandwidth and L2 intensity x L2 bandwidth (counted bytes; without "
      "counters, the compulsory bytes and no L2 roof); the roof named is that lowest one; "
      "roofs: %s.\n",
      ragged     ? "4*H*d*sum_b N*L_b over each sequence's K/V length L_b (N_kv without "
                   "--kv-lengths), causal's N x N part halved (N^2/2)"
      : kv_apart ? "4*B*H*N*N_kv*d, causal's N x N part halved (N^2/2)"
                 : "4*B*H*N^2*d, halved for causal",
      record.ceilings.source.c_str());
  if (!record.settings.model_only) std::printf("%s\n", energy_legend(record).c_str());
  if (write_error.empty()) std::printf("results: %s\n", json_path.c_str());
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: stdout: write failed: %s\n", std::strerror(errno));
    return kExitOutputFailed;
  }
  if (!write_error.empty()) {
    std::fprintf(stderr, "error: %s (the table above shows the run)\n", write_error.c_str());
    return kExitOutputFailed;
  }
  if (!record.complete) {
    std::fputs("interrupted: the results file holds what finished\n", stderr);
    return kExitInterrupted;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // `fa-bench gate ...`: compare two result files (bench/gate.hpp); no GPU, no Google Benchmark.
  if (argc > 1 && std::string(argv[1]) == "gate") return fa::bench::gate_main(argc - 1, argv + 1);
  // `fa-bench merge FILE... -o OUT`: one file from shards or workers (bench/merge.hpp).
  if (argc > 1 && std::string(argv[1]) == "merge") {
    try {
      return fa::bench::merge_main(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: merge: %s\n", e.what());
      return fa::bench::kMergeBadInput;
    }
  }
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitVariantFailed;
  }
}
