// --devices: one sweep over several GPUs of a host. The parent plans the whole run, deals the
// configurations to one worker process per GPU (the same binary, re-executed with --device K and
// the hidden --worker-configs; a CUPTI profiling session and every per-device state belong to one
// process), longest first by the IO model's time estimate, and merges what the workers write into
// one record. docs/multi-gpu.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "bench/result.hpp"
#include "profiler/device_info.hpp"

namespace fa::bench {

// The GPUs --devices names: every GPU the CUDA runtime sees ("all") or the listed indices;
// with --test-fake-devices K, K made-up ones (no CUDA call). Returns "" or why not: an index
// that is not a GPU here is bad input (`*bad_input` set), no GPU at all is not.
std::string resolve_devices(const Options& o, std::vector<DeviceInfo>* out, bool* bad_input);

// The made-up GPU k of --test-fake-devices (an H200's figures, name "fake GPU k").
DeviceInfo fake_device(int index);

// The IO model's estimate of a row's wall time in seconds (what dealing sorts by): the launch
// time the roofs allow (model FLOPs over the tensor peak, model bytes over the DRAM bandwidth,
// the larger), times the launches a row makes (verification, warm-up, timing, counter passes),
// plus a fixed cost per row. 0 for a row that will not run.
double estimated_row_seconds(const VariantResult& row, const Shape& shape, const Ceilings& c,
                             const Options& o);

// A worker's command line: the parent's arguments without --devices, --shard and the output
// flags, then --device K, --json FILE and --worker-configs LIST.
std::vector<std::string> worker_arguments(const std::vector<std::string>& parent_args, int device,
                                          const std::vector<std::size_t>& plan_indices,
                                          const std::string& json_path);

// A worker under --test-fake-devices: every row that would run is marked model_only (nothing is
// launched); the worker named by --test-fake-worker-fail writes its first configuration and
// dies (exit 86), as a crashed worker would.
void fake_execute(RunResult& r, const Options& o,
                  const std::function<void(const RunResult&)>& checkpoint);

struct WorkerOutcome {
  int device = 0;
  std::vector<std::size_t> plan_indices;
  int exit_code = -1;  // -1: killed by a signal (signal set), or never started
  int signal = 0;
  std::string problem;    // why it could not start, or its result file could not be read
  bool complete = false;  // its record says complete
};

// Runs the workers and merges their records into `planned` (the parent's plan, in plan order):
// each configuration replaced by its worker's, rows a failed worker left unfinished marked error
// with why. `checkpoint` gets the merged record every few seconds. Returns the merged record.
RunResult run_on_devices(RunResult planned, const Options& o, const std::vector<DeviceInfo>& gpus,
                         const std::vector<std::string>& parent_args,
                         const std::function<void(const RunResult&)>& checkpoint);

// The merge step alone (tested without processes): `planned` with each worker's record (nullptr:
// no readable file) folded in.
RunResult merge_worker_records(RunResult planned, const std::vector<DeviceInfo>& gpus,
                               const std::vector<WorkerOutcome>& outcomes,
                               const std::vector<const RunResult*>& records, bool interrupted);

}  // namespace fa::bench
