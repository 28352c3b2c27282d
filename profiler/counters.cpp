#include "profiler/counters.hpp"

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
      "lts__t_sectors_srcunit_tex_op_read.sum",
      "lts__t_sectors_srcunit_tex_op_write.sum",
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

Measured interpret(const std::map<std::string, double>& v) {
  Measured m;
  m.dram_read_bytes = get(v, "dram__bytes_read.sum");
  m.dram_write_bytes = get(v, "dram__bytes_write.sum");
  m.l2_read_bytes = 32.0 * get(v, "lts__t_sectors_srcunit_tex_op_read.sum");
  m.l2_write_bytes = 32.0 * get(v, "lts__t_sectors_srcunit_tex_op_write.sum");
  m.tensor_flops = get(v, "sm__ops_path_tensor_src_bf16_dst_fp32.sum") +
                   get(v, "sm__ops_path_tensor_src_fp16.sum") + get(v, "sm__ops_path_tensor_src_fp8.sum");
  m.fp32_flops = get(v, "sm__sass_thread_inst_executed_op_fadd_pred_on.sum") +
                 get(v, "sm__sass_thread_inst_executed_op_fmul_pred_on.sum") +
                 2.0 * get(v, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum");
  m.instructions = get(v, "sm__inst_executed.sum");
  m.seconds = get(v, "gpu__time_duration.sum") * 1e-9;
  m.sm_clock_hz = get(v, "sm__cycles_elapsed.avg.per_second");
  return m;
}

}  // namespace fa::counters
