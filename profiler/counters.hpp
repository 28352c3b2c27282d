// Which hardware counters a run collects and what they mean (metric names checked on the H200,
// chip GH100, against CUPTI's metric list), and the figures derived from them.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fa::counters {

// SM <-> L2 traffic is counted at the SM, as the 32-byte sectors the crossbar carries between the
// L1TEX unit (which also serves cp.async and TMA) and the L2. Counted at the L2's tag stage
// instead (lts__t_sectors_srcunit_tex_op_{read,write}, fa-bench before 2026-11-22), the same
// launch read 2-12% apart over five collections and below the bytes the SMs received (H200,
// fa2 B=2 H=7 N=2048 d=128: 4.02-4.58e6 sectors at the L2 against 7.56941e6 at the SMs, the
// latter identical in all five and equal to the IO model's Q + per-block K/V re-reads).
inline constexpr const char* kSmFromL2Sectors = "l1tex__m_xbar2l1tex_read_sectors.sum";
inline constexpr const char* kSmToL2Sectors = "l1tex__m_l1tex2xbar_write_sectors.sum";
inline constexpr const char* kL2SideReadSectors = "lts__t_sectors_srcunit_tex_op_read.sum";
inline constexpr const char* kL2SideWriteSectors = "lts__t_sectors_srcunit_tex_op_write.sum";

// DRAM bytes; SM <-> L2 sectors (above); tensor ops by source type (one op = one FLOP); FP32
// instructions; the instruction count; time and SM clock.
const std::vector<std::string>& default_metrics();

// Whether these values count SM <-> L2 traffic at the SM (files from 2026-11-22 on) or at the L2.
bool l2_counted_at_sm(const std::map<std::string, double>& values);

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

// Warp stall reasons (--stall-reasons): for each reason, the cycles a warp spent stalled on it per
// instruction it issued, as Nsight Compute's WarpStateStats section reports them
// (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio). "selected" (1 per issued
// instruction by definition) is left out; "gmma" (waiting on warpgroup MMA) exists on Hopper only.
struct StallReason {
  std::string reason;  // e.g. "long_scoreboard"
  std::string metric;  // its CUPTI metric name
};
const std::vector<StallReason>& stall_reasons();

// The stall reasons present in a row's counter values, largest first, at most `n` of them.
std::vector<std::pair<std::string, double>> top_stalls(const std::map<std::string, double>& values,
                                                       std::size_t n);

}  // namespace fa::counters
