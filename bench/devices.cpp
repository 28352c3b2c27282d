#include "bench/devices.hpp"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "bench/plan.hpp"
#include "bench/result_json.hpp"
#include "bench/runner.hpp"

extern char** environ;

namespace fa::bench {

DeviceInfo fake_device(int index) {
  DeviceInfo d;
  d.index = index;
  d.name = "fake GPU " + std::to_string(index);
  d.uuid = fmt::format("GPU-00000000-0000-0000-0000-fa4e{:08x}", index);
  d.pci_bus_id = fmt::format("00000000:{:02X}:00.0", index);
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.memory_bytes = 150ll << 30;
  d.l2_bytes = 60ll << 20;
  d.smem_per_sm_bytes = 233472;
  d.smem_per_block_optin_bytes = 232448;
  d.memory_bus_bits = 6144;
  d.sm_clock_max_mhz = 1980;
  d.mem_clock_max_mhz = 3201;
  return d;
}

std::string resolve_devices(const Options& o, std::vector<DeviceInfo>* out, bool* bad_input) {
  *bad_input = false;
  int count = o.test_fake_devices;
  if (count == 0) {
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      count = 0;
    }
  }
  if (count == 0) return "no CUDA GPU found";
  std::vector<int> wanted = o.device_list;
  if (wanted.empty()) {
    for (int i = 0; i < count; ++i) wanted.push_back(i);
  }
  for (int i : wanted) {
    if (i >= count) {
      *bad_input = true;
      return fmt::format("--devices: {} is not a GPU here (accepted: all, or indices 0 to {})", i,
                         count - 1);
    }
    if (o.test_fake_devices > 0) {
      out->push_back(fake_device(i));
      continue;
    }
    std::string why;
    auto d = query_device(i, &why);
    if (!d) return fmt::format("GPU {}: {}", i, why);
    out->push_back(*d);
  }
  return "";
}

double estimated_row_seconds(const VariantResult& row, const Shape& shape, const Ceilings& c,
                             const Options& o) {
  if (row.status != Status::interrupted) return 0;  // unsupported or model-only: nothing runs
  const double peak = tensor_peak_for(c, row.algorithm, shape.dtype);
  const double compute = peak > 0 ? row.model.flops_matrix / peak : 0;
  const double memory = c.dram_bytes_per_s > 0 ? row.model.bytes() / c.dram_bytes_per_s : 0;
  const double launch = std::max(compute, memory);
  // Verification (1) and warm-up; timing: --repetitions launches, or --min-time of them (Google
  // Benchmark sizes the run with a few shorter ones first: about 1.5x); counters: about a dozen
  // replayed passes, more per kernel for multi-kernel variants.
  const double timed =
      o.repetitions > 0 ? o.repetitions * launch : 1.5 * std::max(o.min_time_s, launch);
  const double counted = o.counters ? 12 * launch + 0.2 : 0;
  return 0.1 + (1 + o.warmup) * launch + timed + counted;
}

std::vector<std::string> worker_arguments(const std::vector<std::string>& parent_args, int device,
                                          const std::vector<std::size_t>& plan_indices,
                                          const std::string& json_path) {
  static const char* const kDropped[] = {"--devices", "--shard", "--json", "--csv", "--markdown"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < parent_args.size(); ++i) {
    const std::string& a = parent_args[i];
    bool dropped = false;
    for (const char* flag : kDropped) {
      if (a == flag) {
        ++i;  // and its value
        dropped = true;
      } else if (a.rfind(std::string(flag) + "=", 0) == 0) {
        dropped = true;
      }
    }
    if (!dropped) out.push_back(a);
  }
  std::string list;
  for (std::size_t k : plan_indices) list += (list.empty() ? "" : ",") + std::to_string(k);
  out.insert(out.end(),
             {"--device", std::to_string(device), "--json", json_path, "--worker-configs", list});
  return out;
}

void fake_execute(RunResult& r, const Options& o,
                  const std::function<void(const RunResult&)>& checkpoint) {
  const bool dies = o.test_fake_worker_fail >= 0 && o.test_fake_worker_fail == o.device;
  for (auto& c : r.configs) {
    for (auto& v : c.results) {
      if (v.status != Status::interrupted) continue;
      v.status = Status::model_only;
      v.reason = "--test-fake-devices: nothing launched";
    }
    if (dies) {  // one configuration written, then gone, as a worker that crashed
      if (checkpoint) checkpoint(r);
      std::fprintf(stderr, "gpu %d: --test-fake-worker-fail: exiting with code 86\n", o.device);
      std::_Exit(86);
    }
  }
  r.settings.model_only = true;
  r.complete = true;
}

namespace {

std::string describe(const DeviceInfo& d) {
  return fmt::format("GPU {} ({}, {})", d.index, d.name, d.uuid);
}

std::string how_it_ended(const WorkerOutcome& w) {
  if (!w.problem.empty()) return w.problem;
  if (w.signal) return fmt::format("was killed by signal {} ({})", w.signal, strsignal(w.signal));
  return fmt::format("exited with code {}", w.exit_code);
}

bool same_config(const ConfigResult& a, const ConfigResult& b) {
  return a.shape.key() == b.shape.key() && a.seed == b.seed;
}

}  // namespace

RunResult merge_worker_records(RunResult planned, const std::vector<DeviceInfo>& gpus,
                               const std::vector<WorkerOutcome>& outcomes,
                               const std::vector<const RunResult*>& records, bool interrupted) {
  RunResult& r = planned;
  bool complete = !interrupted;
  std::map<std::size_t, std::size_t> worker_of;  // plan index -> worker
  for (std::size_t w = 0; w < outcomes.size(); ++w) {
    for (std::size_t i : outcomes[w].plan_indices) worker_of[i] = w;
  }
  r.devices.clear();
  for (std::size_t w = 0; w < outcomes.size(); ++w) {
    const RunResult* rec = records[w];
    const WorkerOutcome& out = outcomes[w];
    // Exit 0 and 1 (a row failed or errored: it says so) are a worker's normal ends; 130 is
    // Ctrl-C. Anything else (a crash, bad input, an output it could not write) fails its rows.
    const bool normal = out.problem.empty() && out.signal == 0 &&
                        (out.exit_code == 0 || out.exit_code == 1 || out.exit_code == 130);
    // Incomplete only when interrupted: a worker that failed leaves error rows saying so.
    if (out.exit_code == 130 || (normal && rec && !rec->complete)) complete = false;
    DeviceRecord dev{gpus[w], rec ? rec->ceilings : r.ceilings};
    if (rec && rec->device) dev.info = *rec->device;
    r.devices.push_back(dev);
    if (rec) r.settings = rec->settings;
    for (auto& c : r.configs) {
      if (auto it = worker_of.find(c.plan_index); it == worker_of.end() || it->second != w)
        continue;
      const std::size_t plan_index = c.plan_index;
      if (rec) {
        for (const auto& wc : rec->configs) {
          if (same_config(wc, c)) {
            c = wc;
            break;
          }
        }
      }
      c.plan_index = plan_index;
      c.gpu = GpuId{dev.info.uuid, dev.info.name};
      if (normal) continue;
      for (auto& v : c.results) {
        if (v.status != Status::interrupted) continue;
        if (out.exit_code == 130 || (interrupted && out.signal == SIGINT)) continue;
        v.status = Status::error;
        v.reason = fmt::format("the worker for {} {} before this row finished", describe(dev.info),
                               how_it_ended(out));
      }
    }
  }
  if (r.devices.size() == 1) {
    r.device = r.devices.front().info;
    r.ceilings = r.devices.front().ceilings;
    r.devices.clear();
  } else if (!r.devices.empty()) {
    r.device = r.devices.front().info;
    r.ceilings = r.devices.front().ceilings;
  }
  r.complete = complete;
  return r;
}

RunResult run_on_devices(RunResult planned, const Options& o, const std::vector<DeviceInfo>& gpus,
                         const std::vector<std::string>& parent_args,
                         const std::function<void(const RunResult&)>& checkpoint) {
  // Deal: each configuration's estimate is the sum of its rows'.
  std::vector<double> cost;
  for (const auto& c : planned.configs) {
    double s = 0.5;  // inputs and the fp64 reference
    for (const auto& v : c.results) s += estimated_row_seconds(v, c.shape, planned.ceilings, o);
    cost.push_back(s);
  }
  const auto dealt = deal_longest_first(cost, static_cast<int>(gpus.size()));

  char tmpl[] = "/tmp/fa-bench-workers-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (!dir) throw std::runtime_error("cannot make a folder for the workers' files in /tmp");
  const std::string folder = dir;

  std::vector<WorkerOutcome> outcomes(gpus.size());
  std::vector<std::string> json_paths(gpus.size());
  std::vector<pid_t> pids(gpus.size(), -1);
  for (std::size_t w = 0; w < gpus.size(); ++w) {
    WorkerOutcome& out = outcomes[w];
    out.device = gpus[w].index;
    double est = 0;
    std::vector<std::size_t> items = dealt[w];
    std::sort(items.begin(), items.end());  // the worker runs them in plan order
    for (std::size_t k : items) {
      out.plan_indices.push_back(planned.configs[k].plan_index);
      est += cost[k];
    }
    json_paths[w] = fmt::format("{}/gpu{}.json", folder, gpus[w].index);
    std::fprintf(stderr, "gpu %d: %s: %zu configuration(s), about %.0f s by the IO model\n",
                 gpus[w].index, gpus[w].name.c_str(), items.size(), est);
    if (items.empty()) {
      out.exit_code = 0;
      continue;
    }
    std::vector<std::string> args{"/proc/self/exe"};
    const auto rest = worker_arguments(parent_args, gpus[w].index, out.plan_indices, json_paths[w]);
    args.insert(args.end(), rest.begin(), rest.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The worker's table goes to its log; its progress lines (stderr) come through.
    const std::string log = fmt::format("{}/gpu{}.log", folder, gpus[w].index);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    pid_t pid = -1;
    if (int e = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ); e != 0) {
      out.problem = fmt::format("could not be started ({})", std::strerror(e));
    } else {
      pids[w] = pid;
    }
    posix_spawn_file_actions_destroy(&fa);
  }

  std::vector<std::optional<RunResult>> records(gpus.size());
  auto read_records = [&] {
    for (std::size_t w = 0; w < gpus.size(); ++w) {
      if (!std::filesystem::exists(json_paths[w])) continue;
      try {
        records[w] = read_result_file(json_paths[w]);
      } catch (const std::exception& e) {
        if (pids[w] < 0)
          outcomes[w].problem = fmt::format("left an unreadable file ({})", e.what());
      }
    }
  };
  auto merged = [&] {
    std::vector<const RunResult*> recs;
    for (auto& rec : records) recs.push_back(rec ? &*rec : nullptr);
    return merge_worker_records(planned, gpus, outcomes, recs, g_interrupted);
  };
  const auto start = std::chrono::steady_clock::now();
  auto last_checkpoint = start;
  bool forwarded = false;
  for (;;) {
    bool running = false;
    for (std::size_t w = 0; w < gpus.size(); ++w) {
      if (pids[w] < 0) continue;
      int status = 0;
      const pid_t got = ::waitpid(pids[w], &status, WNOHANG);
      if (got == 0) {
        running = true;
        continue;
      }
      pids[w] = -1;
      if (got < 0) {
        outcomes[w].problem = "could not be waited for";
      } else if (WIFSIGNALED(status)) {
        outcomes[w].signal = WTERMSIG(status);
      } else {
        outcomes[w].exit_code = WEXITSTATUS(status);
      }
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "gpu %d: finished after %.1f s (%s)\n", gpus[w].index, s,
                   how_it_ended(outcomes[w]).c_str());
    }
    if (!running) break;
    // Ctrl-C in a terminal reaches every worker (one process group); a SIGINT sent to the
    // parent alone is passed on.
    if (g_interrupted && !forwarded) {
      for (pid_t p : pids) {
        if (p > 0) ::kill(p, SIGINT);
      }
      forwarded = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (checkpoint && now - last_checkpoint > std::chrono::seconds(2)) {
      read_records();
      checkpoint(merged());
      last_checkpoint = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  read_records();
  RunResult out = merged();
  bool all_normal = out.complete;
  for (const auto& w : outcomes) all_normal = all_normal && w.problem.empty() && w.signal == 0;
  std::error_code ec;
  if (all_normal) {
    std::filesystem::remove_all(folder, ec);
  } else {
    std::fprintf(stderr, "note: the workers' files and logs are kept in %s\n", folder.c_str());
  }
  return out;
}

}  // namespace fa::bench
