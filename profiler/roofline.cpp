#include "profiler/roofline.hpp"

#include <algorithm>
#include <array>

namespace fa {

Ceilings datasheet_ceilings(const std::string& name, double bus_bw) {
  struct Known {
    const char* match;
    double bw, bf16, fp8;
  };
  // Vendor datasheets, dense (no sparsity) tensor rates. The H200 and H100 SXM share the GH100's
  // tensor rates; the H200 has 4.8 TB/s HBM3e against the H100's 3.35 TB/s.
  static constexpr std::array<Known, 4> kKnown{{
      {"H200", 4.8e12, 989.4e12, 1978.9e12},
      {"H100 80GB HBM3", 3.35e12, 989.4e12, 1978.9e12},
      {"H100 PCIe", 2.0e12, 756.0e12, 1513.0e12},
      {"A100-SXM4-80GB", 2.039e12, 312.0e12, 0},
  }};
  for (const auto& k : kKnown) {
    if (name.find(k.match) != std::string::npos) {
      Ceilings c{std::string("datasheet (") + k.match + ")", k.bw, k.bf16, k.bf16, k.fp8};
      c.datasheet_dram_bytes_per_s = k.bw;
      c.datasheet_tensor_flops_per_s_bf16 = k.bf16;
      c.datasheet_tensor_flops_per_s_fp8 = k.fp8;
      return c;
    }
  }
  return Ceilings{"memory bus width x clock; tensor peak unknown", bus_bw, 0, 0, 0};
}

RooflinePoint place(double flops, double bytes, double seconds, double peak, double bw) {
  RooflinePoint p;
  p.intensity = bytes > 0 ? flops / bytes : 0;
  p.attained = seconds > 0 ? flops / seconds : 0;
  if (peak > 0 && bw > 0) {
    const double memory_roof = p.intensity * bw;
    p.attainable = std::min(peak, memory_roof);
    p.bound = memory_roof < peak ? "memory" : "compute";
    p.fraction = p.attainable > 0 ? p.attained / p.attainable : 0;
  }
  return p;
}

Placement place_hierarchical(const std::string& basis, double flops, double seconds,
                             double dram_bytes, double l2_bytes, double peak, double dram_bw,
                             double l2_bw) {
  Placement p;
  p.basis = basis;
  p.intensity_dram = dram_bytes > 0 ? flops / dram_bytes : 0;
  p.intensity_l2 = l2_bytes > 0 ? flops / l2_bytes : 0;
  if (peak <= 0 || dram_bw <= 0 || seconds <= 0 || dram_bytes <= 0) return p;
  p.attainable_flops_per_s = peak;
  p.bound = "compute";
  if (p.intensity_dram * dram_bw < p.attainable_flops_per_s) {
    p.attainable_flops_per_s = p.intensity_dram * dram_bw;
    p.bound = "dram";
  }
  if (p.intensity_l2 > 0 && l2_bw > 0 && p.intensity_l2 * l2_bw < p.attainable_flops_per_s) {
    p.attainable_flops_per_s = p.intensity_l2 * l2_bw;
    p.bound = "l2";
  }
  p.fraction = flops / seconds / p.attainable_flops_per_s;
  return p;
}

}  // namespace fa
