// Which hardware counters a run collects and what they mean (metric names checked on the H200,
// chip GH100; ../shared/facts/h200.md), and the figures derived from them.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace fa::counters {

// DRAM bytes; SM->L2 traffic (sectors x 32: lts__t_bytes would also count traffic between the
// two L2 partitions); tensor ops by source type (one op = one FLOP); FP32 instructions; the
// instruction count; time and SM clock.
const std::vector<std::string>& default_metrics();

struct Measured {
  double dram_read_bytes = 0, dram_write_bytes = 0;
  double l2_read_bytes = 0, l2_write_bytes = 0;  // SM <-> L2
  double tensor_flops = 0;                       // bf16 + fp16 + fp8 sources
  double fp32_flops = 0;                         // FADD + FMUL + 2 x FFMA
  double instructions = 0;
  double seconds = 0;
  double sm_clock_hz = 0;
  double dram_bytes() const { return dram_read_bytes + dram_write_bytes; }
  double l2_bytes() const { return l2_read_bytes + l2_write_bytes; }
};

Measured interpret(const std::map<std::string, double>& values);

}  // namespace fa::counters
