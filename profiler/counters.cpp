#include "profiler/counters.hpp"

#include <algorithm>

namespace fa::counters {
namespace {
double get(const std::map<std::string, double>& v, const char* name) {
  const auto it = v.find(name);
  return it == v.end() ? 0.0 : it->second;
}
}  // namespace

const std::vector<std::string>& default_metrics() {
  static const std::vector<std::string> metrics{
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      kSmFromL2Sectors,
      kSmToL2Sectors,
      "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
      "sm__ops_path_tensor_src_fp16.sum",
      "sm__ops_path_tensor_src_fp8.sum",
      "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
      "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
      "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
      "sm__inst_executed.sum",
      "gpu__time_duration.sum",
      "sm__cycles_elapsed.avg.per_second",
  };
  return metrics;
}

bool l2_counted_at_sm(const std::map<std::string, double>& v) {
  return v.count(kSmFromL2Sectors) > 0 || v.count(kSmToL2Sectors) > 0;
}

Measured interpret(const std::map<std::string, double>& v) {
  Measured m;
  m.dram_read_bytes = get(v, "dram__bytes_read.sum");
  m.dram_write_bytes = get(v, "dram__bytes_write.sum");
  if (l2_counted_at_sm(v)) {
    m.l2_read_bytes = 32.0 * get(v, kSmFromL2Sectors);
    m.l2_write_bytes = 32.0 * get(v, kSmToL2Sectors);
  } else {  // a file written before 2026-11-22: counted at the L2's tag stage
    m.l2_read_bytes = 32.0 * get(v, kL2SideReadSectors);
    m.l2_write_bytes = 32.0 * get(v, kL2SideWriteSectors);
  }
  m.tensor_flops = get(v, "sm__ops_path_tensor_src_bf16_dst_fp32.sum") +
                   get(v, "sm__ops_path_tensor_src_fp16.sum") +
                   get(v, "sm__ops_path_tensor_src_fp8.sum");
  m.fp32_flops = get(v, "sm__sass_thread_inst_executed_op_fadd_pred_on.sum") +
                 get(v, "sm__sass_thread_inst_executed_op_fmul_pred_on.sum") +
                 2.0 * get(v, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum");
  m.instructions = get(v, "sm__inst_executed.sum");
  m.seconds = get(v, "gpu__time_duration.sum") * 1e-9;
  m.sm_clock_hz = get(v, "sm__cycles_elapsed.avg.per_second");
  return m;
}

const std::vector<StallReason>& stall_reasons() {
  static const std::vector<StallReason> reasons = [] {
    std::vector<StallReason> r;
    for (const char* name : {"barrier", "branch_resolving", "dispatch_stall", "drain", "gmma",
                             "imc_miss", "lg_throttle", "long_scoreboard", "math_pipe_throttle",
                             "membar", "mio_throttle", "misc", "no_instruction", "not_selected",
                             "short_scoreboard", "sleeping", "tex_throttle", "wait"}) {
      r.push_back({name, std::string("smsp__average_warps_issue_stalled_") + name +
                             "_per_issue_active.ratio"});
    }
    return r;
  }();
  return reasons;
}

std::vector<std::pair<std::string, double>> top_stalls(const std::map<std::string, double>& v,
                                                       std::size_t n) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& s : stall_reasons()) {
    const auto it = v.find(s.metric);
    if (it != v.end()) out.emplace_back(s.reason, it->second);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > n) out.resize(n);
  return out;
}

}  // namespace fa::counters
