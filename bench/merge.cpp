#include "bench/merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "bench/result_json.hpp"
#include "bench/runner.hpp"

namespace fa::bench {
namespace {

std::string config_text(const ConfigResult& c) {
  return fmt::format("{} causal={} {}", shape_text(c.shape), c.shape.causal ? "on" : "off",
                     to_string(c.shape.dtype));
}

std::string gpu_text(const ConfigResult& c) {
  return c.gpu ? fmt::format("{} ({})", c.gpu->uuid, c.gpu->name) : std::string("no GPU");
}

using ConfigKey = std::pair<decltype(Shape{}.key()), std::string>;

ConfigKey key_of(const ConfigResult& c) {
  return {c.shape.key(), c.gpu ? c.gpu->uuid : std::string()};
}

// Everything two files of one sweep must share, as (what, value) pairs.
std::vector<std::pair<std::string, std::string>> shared_settings(const RunResult& r) {
  const Settings& s = r.settings;
  return {{"schema", r.schema},
          {"tool.version", r.tool_version},
          {"tool.git_revision", r.git_revision},
          {"settings.seed", std::to_string(s.seed)},
          {"settings.warmup", std::to_string(s.warmup)},
          {"settings.repetitions", std::to_string(s.repetitions)},
          {"settings.min_time_s", fmt::format("{}", s.min_time_s)},
          {"settings.l2", s.l2},
          {"settings.launch", s.launch},
          {"settings.model_only", s.model_only ? "true" : "false"},
          {"settings.inputs", s.inputs},
          {"settings.fp8_prequantized", s.fp8_prequantized ? "true" : "false"},
          {"settings.timing_engine", s.timing_engine},
          {"settings.energy_window_s", fmt::format("{}", s.energy_window_s)},
          {"shard.count", r.shard ? std::to_string(r.shard->count) : "(not sharded)"}};
}

// The GPUs of a file with their roofs: `devices` when it has several, else its one device.
std::vector<DeviceRecord> devices_of(const RunResult& r) {
  if (!r.devices.empty()) return r.devices;
  if (r.device) return {DeviceRecord{*r.device, r.ceilings}};
  return {};
}

}  // namespace

RunResult merge_results(const std::vector<RunResult>& inputs,
                        const std::vector<std::string>& sources,
                        std::vector<std::string>* warnings) {
  if (inputs.empty()) throw MergeConflict("no files to merge");
  RunResult out = inputs.front();
  out.configs.clear();
  out.devices.clear();
  out.shard.reset();
  out.schema = kSchema;
  const auto first = shared_settings(inputs.front());
  std::map<ConfigKey, std::size_t> config_at;
  std::map<ConfigKey, std::size_t> first_file;  // which file a configuration came from first
  std::set<ConfigKey> mixed;                    // configurations with rows from several files
  std::vector<DeviceRecord> devices;
  std::map<std::string, std::size_t> device_at;  // uuid -> devices index
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    const RunResult& in = inputs[f];
    const auto mine = shared_settings(in);
    for (std::size_t k = 0; k < mine.size(); ++k) {
      if (mine[k].second != first[k].second) {
        throw MergeConflict(fmt::format(
            "{}: {} is {}, but {} in {} (the files of one sweep share the build and the settings: "
            "run every part with the same fa-bench and flags)",
            sources[f], mine[k].first, mine[k].second, first[k].second, sources[0]));
      }
    }
    // The shared-memory figure the model records is the device's unless set: it may differ
    // between GPU models, not between files of one model.
    if (in.device && inputs.front().device && in.device->name == inputs.front().device->name &&
        in.settings.model_smem_per_sm_bytes != inputs.front().settings.model_smem_per_sm_bytes) {
      throw MergeConflict(fmt::format(
          "{}: settings.model_smem_per_sm_bytes is {}, but {} in {} on the same GPU model (run "
          "every part with the same --model-smem-per-sm)",
          sources[f], in.settings.model_smem_per_sm_bytes,
          inputs.front().settings.model_smem_per_sm_bytes, sources[0]));
    }
    for (const DeviceRecord& d : devices_of(in)) {
      if (device_at.emplace(d.info.uuid, devices.size()).second) devices.push_back(d);
    }
    out.complete = out.complete && in.complete;
    out.created_utc = std::max(out.created_utc, in.created_utc);
    for (const ConfigResult& c : in.configs) {
      const ConfigKey key = key_of(c);
      auto [it, fresh] = config_at.emplace(key, out.configs.size());
      if (fresh) {
        first_file[key] = f;
        out.configs.push_back(c);
        continue;
      }
      ConfigResult& into = out.configs[it->second];
      const std::string& other = sources[first_file[key]];
      if (into.seed != c.seed) {
        throw MergeConflict(fmt::format(
            "{}: {} on {} has seed {}, but {} in {} (the same configuration from different "
            "plans: run every part with the same --seed and sweep flags)",
            sources[f], config_text(c), gpu_text(c), c.seed, into.seed, other));
      }
      for (const VariantResult& v : c.results) {
        for (const VariantResult& have : into.results) {
          if (have.spec == v.spec) {
            throw MergeConflict(fmt::format(
                "{}: row {} at {} on {} is also in {} (a row appears once per GPU: was a file "
                "or a shard given twice?)",
                sources[f], row_label(c, v), config_text(c), gpu_text(c), other));
          }
        }
        into.results.push_back(v);
      }
      mixed.insert(key);
    }
  }
  // In plan order (N, then the K/V length, then d, then causal; bench/plan.hpp), whatever the
  // files' order; the same shape on several GPUs in the order the GPUs first appear.
  std::stable_sort(
      out.configs.begin(), out.configs.end(), [&](const ConfigResult& a, const ConfigResult& b) {
        auto gpu = [&](const ConfigResult& c) {
          return c.gpu ? device_at.at(c.gpu->uuid) : std::size_t{0};
        };
        return std::tuple{a.shape.N, a.shape.kv_len(), a.shape.d, a.shape.causal, gpu(a)} <
               std::tuple{b.shape.N, b.shape.kv_len(), b.shape.d, b.shape.causal, gpu(b)};
      });
  // Rows of one configuration from several files: the peer comparison over all of them.
  for (auto& c : out.configs) {
    if (!mixed.count(key_of(c))) continue;
    for (auto& v : c.results) {
      if (v.derived) {
        v.derived->best_peer.clear();
        v.derived->speed_vs_best_peer = 0;
      }
    }
    compare_with_peers(c);
  }
  // Shards: say which of a split are not here.
  if (inputs.front().shard) {
    std::set<int> have;
    for (const auto& in : inputs) have.insert(in.shard->index);
    std::string missing;
    for (int i = 0; i < inputs.front().shard->count; ++i) {
      if (!have.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    }
    if (!missing.empty() && warnings) {
      warnings->push_back(
          fmt::format("shard(s) {} of {} are not among the files: the merged "
                      "file holds part of the sweep",
                      missing, inputs.front().shard->count));
      out.complete = false;
    }
  }
  if (devices.size() == 1) {
    out.device = devices.front().info;
    out.ceilings = devices.front().ceilings;
  } else if (devices.size() > 1) {
    out.device = devices.front().info;
    out.ceilings = devices.front().ceilings;
    out.devices = devices;
  }
  return out;
}

int merge_main(int argc, char** argv) {
  const char* usage =
      "usage: fa-bench merge FILE... -o OUT\n"
      "One result file from shards (--shard i/n), --devices workers or runs of one sweep on\n"
      "several GPUs. A configuration is keyed by its shape and GPU UUID: the same shape on two\n"
      "GPUs stays twice, side by side. Refused (nothing written): the same row on the same GPU\n"
      "twice, or files whose schema, build or settings differ.\n"
      "Exit codes: 0 merged, 2 bad input (usage, a file that cannot be read or is not a valid\n"
      "result file), 3 refused (duplicates, conflicting settings), 4 OUT could not be written.\n";
  std::vector<std::string> files;
  std::string output;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      return kMergeOk;
    }
    if (a == "-o" || a == "--output") {
      if (i + 1 >= argc || !output.empty()) {
        std::fprintf(stderr, "error: merge: %s: %s (accepted: one output path, -o OUT)\n",
                     a.c_str(), i + 1 >= argc ? "missing value" : "given twice");
        return kMergeBadInput;
      }
      output = argv[++i];
    } else if (a.rfind("-", 0) == 0 && a != "-") {
      std::fprintf(stderr, "error: merge: unknown flag %s (accepted: FILE... -o OUT, --help)\n",
                   a.c_str());
      return kMergeBadInput;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty() || output.empty()) {
    std::fprintf(stderr, "error: merge: %s (usage: fa-bench merge FILE... -o OUT)\n",
                 files.empty() ? "no input files" : "no output: -o OUT");
    return kMergeBadInput;
  }
  if (std::string why = fa::output_problem(output); !why.empty()) {
    std::fprintf(stderr, "error: merge: -o: %s: %s (accepted: a file path that can be written)\n",
                 output.c_str(), why.c_str());
    return kMergeBadInput;
  }
  std::vector<RunResult> inputs;
  for (const auto& f : files) {
    try {
      inputs.push_back(read_result_file(f));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: merge: %s\n", e.what());
      return kMergeBadInput;
    }
  }
  std::vector<std::string> warnings;
  RunResult merged;
  try {
    merged = merge_results(inputs, files, &warnings);
  } catch (const MergeConflict& e) {
    std::fprintf(stderr, "error: merge: %s; nothing written\n", e.what());
    return kMergeRefused;
  }
  merged.command_line = "fa-bench merge";
  for (const auto& f : files) merged.command_line += " " + f;
  merged.command_line += " -o " + output;
  for (const auto& w : warnings) std::fprintf(stderr, "warning: merge: %s\n", w.c_str());
  try {
    write_file_atomically(output, to_json_text(merged));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: merge: %s\n", e.what());
    return kMergeOutputFailed;
  }
  std::size_t rows = 0;
  for (const auto& c : merged.configs) rows += c.results.size();
  const std::size_t gpus = merged.devices.empty() ? (merged.device ? 1 : 0) : merged.devices.size();
  std::printf("merged %zu file(s): %zu configuration(s), %zu row(s), %zu GPU(s)%s -> %s\n",
              files.size(), merged.configs.size(), rows, gpus,
              merged.complete ? "" : ", incomplete", output.c_str());
  return kMergeOk;
}

}  // namespace fa::bench
