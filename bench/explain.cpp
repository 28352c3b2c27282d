#include "bench/explain.hpp"

#include <fmt/format.h>

#include <cmath>

#include "profiler/counters.hpp"

namespace fa::bench {

std::string stall_summary(const std::map<std::string, double>& values) {
  const auto top = counters::top_stalls(values, 3);
  if (top.empty()) return "";
  std::string out = "; stalls per issued instruction:";
  for (std::size_t i = 0; i < top.size(); ++i)
    out += fmt::format("{} {} {:.2f}", i == 0 ? "" : ",", top[i].first, top[i].second);
  return out;
}

std::string explain_counters(const ConfigResult& c) {
  std::string out;
  for (const auto& r : c.results) {
    if (!r.measured) continue;
    const MeasuredDerived& m = *r.measured;
    std::string dram;
    if (m.dram_over_model >= 0.9 && m.dram_over_model <= 1.1) {
      dram = fmt::format("DRAM follows the model ({:.2f}x, {:.1f}x the compulsory minimum)",
                         m.dram_over_model, m.dram_over_compulsory);
    } else if (m.dram_over_model < 0.5 && m.dram_over_compulsory < 1.2) {
      dram = fmt::format(
          "DRAM at the compulsory minimum ({:.2f}x of it, {:.2f}x the model): the L2 serves the "
          "re-reads the "
          "model counts (SM<->L2 {:.2f}x the model)",
          m.dram_over_compulsory, m.dram_over_model, m.l2_over_model);
    } else {
      dram = fmt::format(
          "DRAM {:.2f}x the model, {:.1f}x the compulsory minimum (SM<->L2 {:.2f}x the model)",
          m.dram_over_model, m.dram_over_compulsory, m.l2_over_model);
    }
    const std::string tensor =
        std::abs(m.tensor_over_model - 1.0) < 1e-3
            ? "tensor FLOPs as modelled"
            : fmt::format("tensor FLOPs {:.3f}x the model", m.tensor_over_model);
    const std::string roof =
        r.placement && !r.placement->bound.empty()
            ? fmt::format("; {}-bound, {:.0f}% of the lowest roof at its measured intensities",
                          r.placement->bound, 100 * r.placement->fraction)
            : "";
    out += fmt::format("    {}: {}; {}{}{}\n", row_label(c, r), dram, tensor, roof,
                       r.counters ? stall_summary(r.counters->values) : "");
    // Several kernels: where the bytes and the time went, kernel by kernel.
    if (r.counters && r.counters->kernels.size() > 1) {
      const counters::Measured whole = counters::interpret(r.counters->values);
      for (const auto& k : r.counters->kernels) {
        const counters::Measured m = counters::interpret(k.values);
        out += fmt::format(
            "      {:<44} DRAM {:>9} ({:>3.0f}%)  SM<->L2 {:>9}  tensor {:>7.1f} GFLOP  {:>8.1f} "
            "us\n",
            k.name, fmt::format("{:.1f} MB", m.dram_bytes() * 1e-6),
            whole.dram_bytes() > 0 ? 100 * m.dram_bytes() / whole.dram_bytes() : 0.0,
            fmt::format("{:.1f} MB", m.l2_bytes() * 1e-6), m.tensor_flops * 1e-9, m.seconds * 1e6);
      }
    }
  }
  return out;
}

}  // namespace fa::bench
