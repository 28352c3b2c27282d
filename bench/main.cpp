// fa-bench: CLI -> plan -> variant runs on device buffers -> measurements and model -> one
// result record -> writers (table, JSON, CSV, Markdown).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <cstdio>
#include <exception>
#include <set>
#include <utility>

#include "bench/explain.hpp"
#include "bench/gate.hpp"
#include "bench/options.hpp"
#include "bench/result_json.hpp"
#include "bench/runner.hpp"
#include "bench/writers.hpp"
#include "profiler/cupti_range.hpp"

namespace {

using namespace fa::bench;

extern "C" void on_sigint(int) {
  if (g_interrupted.exchange(true)) {  // second Ctrl-C: leave now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

std::string default_result_path() { return utc_time("results/fa-bench-%Y%m%d-%H%M%S.json"); }

void write_outputs(const RunResult& r, const Options& o, const std::string& json_path) {
  write_file_atomically(json_path, to_json_text(r));
  if (!o.csv_path.empty()) write_file_atomically(o.csv_path, to_csv(r));
  if (!o.markdown_path.empty()) write_file_atomically(o.markdown_path, to_markdown(r));
}

int run(int argc, char** argv) {
  ParseOutcome parsed = parse_cli(argc, argv);
  if (parsed.action == ParseOutcome::Action::exit) {
    std::fputs(parsed.output.c_str(), parsed.exit_code == kExitOk ? stdout : stderr);
    return parsed.exit_code;
  }
  Options& o = parsed.options;

  // Google Benchmark takes its own flags; anything it does not know is bad input.
  std::vector<std::string> gb_args{"fa-bench"};
  gb_args.insert(gb_args.end(), o.benchmark_args.begin(), o.benchmark_args.end());
  std::vector<char*> gb_argv;
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (gb_argc > 1) {
    std::fprintf(stderr, "error: %s: not a Google Benchmark flag (see --benchmark_help... in its docs)\n",
                 gb_argv[1]);
    return kExitBadInput;
  }

  std::string why_not;
  std::optional<fa::DeviceInfo> device = fa::query_device(o.device, &why_not);
  if (!device) {
    if (o.require_gpu) {
      std::fprintf(stderr, "error: %s (--require-gpu)\n", why_not.c_str());
      return kExitNoGpu;
    }
    std::fprintf(stderr, "notice: %s; showing the IO model only (nothing is launched)\n",
                 why_not.c_str());
  } else {
    std::fprintf(stderr, "device %d: %s, %d SMs, %.0f GiB, L2 %.0f MiB, CUDA driver %d, driver %s\n",
                 device->index, device->name.c_str(), device->sm_count,
                 device->memory_bytes / 1073741824.0, device->l2_bytes / 1048576.0,
                 device->cuda_driver_version, device->driver_version.c_str());
  }

  if (device && o.counters && !o.extra_metrics.empty()) {
    try {
      const auto bad = fa::CounterSession::unsupported(device->index, o.extra_metrics);
      if (!bad.empty()) {
        std::string list;
        for (const auto& m : bad) list += (list.empty() ? "" : ", ") + m;
        std::fprintf(stderr, "error: --metrics: not available on this GPU (%s): %s\n", device->name.c_str(),
                     list.c_str());
        return kExitBadInput;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: --metrics not checked (%s)\n", e.what());
    }
  }
  RunResult record = plan_run(o, device, why_not);
  std::set<std::pair<std::int64_t, std::int64_t>> shown;  // (N, d) already printed
  for (const auto& c : record.configs) {
    if (!shown.insert({c.shape.N, c.shape.d}).second) continue;
    std::fprintf(stderr, "N=%lld d=%lld: batch=%lld%s heads=%lld%s\n", static_cast<long long>(c.shape.N),
                 static_cast<long long>(c.shape.d), static_cast<long long>(c.shape.B),
                 o.batch ? "" : " (16384/N)", static_cast<long long>(c.shape.H), o.heads ? "" : " (2048/d)");
  }
  const std::string json_path = o.json_path.empty() ? default_result_path() : o.json_path;

  std::signal(SIGINT, on_sigint);
  const bool tty = isatty(STDERR_FILENO);
  RunHooks hooks;
  hooks.checkpoint = [&](const RunResult& partial) { write_outputs(partial, o, json_path); };
  if (tty) {
    hooks.progress = [](const std::string& line) { std::fprintf(stderr, "\r\033[K%s", line.c_str()); };
  }
  record = execute(std::move(record), o, hooks);
  if (tty) std::fputs("\r\033[K", stderr);
  write_outputs(record, o, json_path);

  int code = kExitOk;
  for (const auto& c : record.configs) {
    std::fputs(format_table(c).c_str(), stdout);
    std::fputs(explain_counters(c).c_str(), stdout);
    std::fputs("\n", stdout);
    for (const auto& v : c.results) {
      if (v.status == Status::failed || v.status == Status::error) code = kExitVariantFailed;
    }
  }
  if (!device) std::fputs("(no GPU: model columns only)\n", stdout);
  std::printf("TFLOP/s: 4*B*H*N^2*d per second, halved for causal (the field's convention); "
              "model: FLOPs as the kernel issues them.\nHBM model and FLOP/B: the IO model's bytes. "
              "DRAM meas: DRAM bytes counted by CUPTI (separate untimed run, L2 flushed first); /mod: "
              "that over the model; L2/m: SM<->L2 bytes over the model; TC/m: tensor FLOPs counted over "
              "the model's.\nroofline: attained over min(peak, intensity x bandwidth), at the measured "
              "DRAM intensity when counted; roofs: %s.\n",
              record.ceilings.source.c_str());
  std::printf("results: %s\n", json_path.c_str());
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
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitVariantFailed;
  }
}
