// Roofline placement: where a run sits against the memory and compute roofs of its device.
// In this slice the roofs are the vendor's datasheet figures (labelled so); measured ceilings
// replace them when the profiler measures them.
#pragma once

#include <optional>
#include <string>

#include "kernels/problem.hpp"
#include "profiler/energy_model.hpp"

namespace fa {

struct Ceilings {
  std::string source;                  // "datasheet: ..." or "measured: ..."
  double dram_bytes_per_s = 0;         // 0 = unknown
  double tensor_flops_per_s_bf16 = 0;  // dense, fp32 accumulate; 0 = unknown
  double tensor_flops_per_s_fp16 = 0;
  double tensor_flops_per_s_fp8 = 0;  // E4M3 dense, fp32 accumulate
  double l2_bytes_per_s = 0;          // measured only; 0 = unknown
  double fp32_flops_per_s = 0;        // measured only; 0 = unknown
  // The vendor's figures, shown beside measured roofs (equal to the above for datasheet roofs).
  double datasheet_dram_bytes_per_s = 0;
  double datasheet_tensor_flops_per_s_bf16 = 0;
  double datasheet_tensor_flops_per_s_fp8 = 0;
  // The energy model fitted on the device, measured and cached with the roofs; absent when not
  // measured (datasheet roofs, --no-energy, no GPU).
  std::optional<energy::Fit> energy_model = std::nullopt;

  double tensor_peak(DType t) const {
    return t == DType::bf16 ? tensor_flops_per_s_bf16 : tensor_flops_per_s_fp16;
  }
};

// Datasheet roofs for devices we know by name; bandwidth from the memory bus otherwise.
Ceilings datasheet_ceilings(const std::string& device_name, double bus_bandwidth_bytes_per_s);

struct RooflinePoint {
  double intensity = 0;   // FLOP per byte
  double attained = 0;    // FLOP/s
  double attainable = 0;  // min(peak, intensity * bandwidth); 0 if a roof is unknown
  double fraction = 0;    // attained / attainable
  std::string bound;      // "memory" | "compute" | "" (unknown)
};

RooflinePoint place(double flops, double bytes, double seconds, double peak_flops_per_s,
                    double bandwidth_bytes_per_s);

// A run placed on the hierarchical roofline: the attainable rate is the lowest of the tensor
// roof, DRAM bandwidth x DRAM intensity and (when L2 bytes are known) L2 bandwidth x L2
// intensity. Every output (console, CSV, Markdown, JSON, report) shows this one placement.
struct Placement {
  std::string basis;          // "counters" (measured bytes) | "compulsory" (no counters: each
                              // input read once, each output written once: the highest intensity
                              // the run could have, so the fraction is a lower bound)
  double intensity_dram = 0;  // FLOP per DRAM byte
  double intensity_l2 = 0;    // FLOP per SM<->L2 byte; 0 = not known
  double attainable_flops_per_s = 0;
  double fraction = 0;  // attained / attainable
  std::string bound;    // "compute" | "dram" | "l2" | "" (a roof unknown)
};

Placement place_hierarchical(const std::string& basis, double flops, double seconds,
                             double dram_bytes, double l2_bytes, double peak_flops_per_s,
                             double dram_bytes_per_s, double l2_bytes_per_s);

}  // namespace fa
