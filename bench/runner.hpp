// Runs the plan: for each configuration, fresh inputs on the device, every variant verified,
// then timed through Google Benchmark; the result record grows one row at a time.
#pragma once

#include <atomic>
#include <functional>
#include <optional>

#include "bench/options.hpp"
#include "bench/result.hpp"
#include "profiler/device_info.hpp"

namespace fa::bench {

// Set by the SIGINT handler; the runner stops at the next safe point and keeps what finished.
extern std::atomic<bool> g_interrupted;

struct RunHooks {
  // Called after every finished row with the record so far (the caller writes it atomically).
  std::function<void(const RunResult&)> checkpoint;
  // Progress line ("[3/12] fa2 N=4096 ..."), for a terminal.
  std::function<void(const std::string&)> progress;
};

// The record's skeleton: tool, settings, device, ceilings, and each configuration's model rows.
// Stops early when g_interrupted is set (the record is then incomplete); `progress` gets a line
// per configuration.
RunResult plan_run(const Options& options, const std::optional<DeviceInfo>& device,
                   const std::string& no_gpu_reason,
                   const std::function<void(const std::string&)>& progress = {});

// Fills in verification and timing on the GPU. Returns the finished record.
RunResult execute(RunResult record, const Options& options, const RunHooks& hooks);

// "" when the variant implements pass `d` (VariantInfo::directions), else the row's reason.
std::string direction_unsupported_reason(const VariantInfo& info, Direction d);

// The forward whose O and lse every backward row of a shape starts from: fa2's (verified by its
// own forward rows and tests), or standard's at head dims fa2 has no kernel for (d=256). The
// backward GPU tests start from the same one.
const VariantInfo& backward_forward_variant(const Shape& s);
// Runs that forward from q, k, v into o and lse (its workspace allocated here) and waits for it;
// "" or why not. fa-bench's backward rows and the backward GPU tests both start from it.
std::string run_backward_forward(const Shape& s, const void* q, const void* k, const void* v,
                                 void* o, float* lse, StreamHandle stream);

// Sets each timed row's speed relative to the fastest timed peer of its configuration.
void compare_with_peers(ConfigResult& config);

}  // namespace fa::bench
