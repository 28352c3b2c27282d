#include "bench/result.hpp"

#include <array>
#include <optional>
#include <utility>
#include <variant>

#include "profiler/counters.hpp"

namespace fa::bench {
namespace {
constexpr std::array<std::pair<Status, const char*>, 7> kStatusNames{{
    {Status::ok, "ok"},
    {Status::failed, "failed"},
    {Status::skipped, "skipped"},
    {Status::unsupported, "unsupported"},
    {Status::error, "error"},
    {Status::model_only, "model_only"},
    {Status::interrupted, "interrupted"},
}};
}  // namespace

std::string VariantResult::block_order() const {
  const OptionValue* v = spec.option(kOptionBlockOrder);
  const auto* s = v ? std::get_if<std::string>(v) : nullptr;
  return s ? *s : "";
}

std::string row_label(const ConfigResult& config, const VariantResult& row) {
  const RowSpec& me = row.spec;
  std::vector<const RowSpec*> same;  // the other rows of this variant and direction
  for (const auto& r : config.results) {
    if (&r != &row && r.spec.variant == me.variant && r.spec.direction == me.direction)
      same.push_back(&r.spec);
  }
  std::string label = me.variant;
  auto differs = [&](auto part) {
    for (const RowSpec* o : same) {
      if (part(*o) != part(me)) return true;
    }
    return false;
  };
  if (me.kernel_config) {
    const KernelConfig& k = *me.kernel_config;
    auto config = [](const RowSpec& s) { return s.kernel_config.value_or(KernelConfig{}); };
    if (differs([&](const RowSpec& s) { return std::pair(config(s).block_q, config(s).block_kv); }))
      label += "@" + std::to_string(k.block_q) + "x" + std::to_string(k.block_kv);
    if (differs([&](const RowSpec& s) { return config(s).stages; }))
      label += " s" + std::to_string(k.stages);
    if (differs([&](const RowSpec& s) { return config(s).warpgroups; }))
      label += " wg" + std::to_string(k.warpgroups);
    if (differs([&](const RowSpec& s) { return config(s).cluster; })) {
      label += " c" + std::to_string(k.cluster[0]) + "x" + std::to_string(k.cluster[1]) + "x" +
               std::to_string(k.cluster[2]);
    }
  }
  for (const auto& [key, value] : me.options) {
    auto value_of = [&name = key](const RowSpec& s) {
      const OptionValue* v = s.option(name);
      return v ? std::optional<OptionValue>(*v) : std::nullopt;
    };
    if (!differs(value_of)) continue;
    const bool is_string = std::holds_alternative<std::string>(value);
    label += "~" + (is_string ? "" : key + "=") + fa::to_string(value);
  }
  if (me.direction == Direction::backward) label += " bwd";
  return label;
}

std::string to_string(Status s) {
  for (const auto& [k, name] : kStatusNames) {
    if (k == s) return name;
  }
  return "?";
}

bool parse_status(const std::string& s, Status* out) {
  for (const auto& [k, name] : kStatusNames) {
    if (s == name) {
      *out = k;
      return true;
    }
  }
  return false;
}

Placement placement_of(const VariantResult& r, const Ceilings& c, double peak) {
  const double seconds = r.timing ? r.timing->stats.median * 1e-3 : 0;
  if (r.counters && r.counters->status == "ok") {
    const counters::Measured m = counters::interpret(r.counters->values);
    return place_hierarchical("counters", r.model.flops_matrix, seconds, m.dram_bytes(),
                              m.l2_bytes(), peak, c.dram_bytes_per_s, c.l2_bytes_per_s);
  }
  return place_hierarchical("compulsory", r.model.flops_matrix, seconds, r.model.bytes_compulsory,
                            0, peak, c.dram_bytes_per_s, c.l2_bytes_per_s);
}

double tensor_peak_for(const Ceilings& c, Algorithm a, DType dtype) {
  return a == Algorithm::fp8 ? c.tensor_flops_per_s_fp8 : c.tensor_peak(dtype);
}

Derived derive(const model::IoModel& m, const Timing& t, const Ceilings& c, double peak) {
  Derived d;
  const double seconds = t.stats.median * 1e-3;
  if (seconds <= 0) return d;
  d.tflops_convention = m.flops_convention / seconds * 1e-12;
  d.tflops_model = m.flops_matrix / seconds * 1e-12;
  d.effective_gbps = m.bytes() / seconds * 1e-9;
  // The row's place on the roofline is placement_of() (measured or compulsory bytes), not here.
  d.arithmetic_intensity = m.arithmetic_intensity();
  return d;
}

MeasuredDerived derive_measured(const VariantResult& r, const Ceilings& c, double peak) {
  MeasuredDerived d;
  const counters::Measured m = counters::interpret(r.counters->values);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  d.dram_bytes = m.dram_bytes();
  d.dram_over_model = ratio(d.dram_bytes, r.model.bytes());
  d.dram_over_compulsory = ratio(d.dram_bytes, r.model.bytes_compulsory);
  d.l2_bytes = m.l2_bytes();
  d.l2_over_model = ratio(d.l2_bytes, r.model.bytes());
  d.tensor_flops = m.tensor_flops;
  d.tensor_over_model = ratio(m.tensor_flops, r.model.flops_matrix);
  d.fp32_flops = m.fp32_flops;
  d.intensity_dram = ratio(r.model.flops_matrix, d.dram_bytes);
  d.intensity_l2 = ratio(r.model.flops_matrix, d.l2_bytes);
  return d;
}

std::optional<energy::Breakdown> energy_model_of(const VariantResult& row, const Ceilings& c,
                                                 bool mma_sync, std::string* why_not) {
  why_not->clear();
  if (!c.energy_model || c.energy_model->status != "ok" || !row.energy ||
      row.energy->seconds_per_launch <= 0) {
    return std::nullopt;
  }
  const std::string needs = "the energy model needs the counted instructions: ";
  if (!row.counters || row.counters->status == "skipped") {
    *why_not =
        needs + "counters off (" +
        (row.counters && !row.counters->reason.empty() ? row.counters->reason : "--no-counters") +
        ")";
    return std::nullopt;
  }
  if (row.counters->status != "ok") {
    *why_not = needs + "counters " + row.counters->status + ": " + row.counters->reason;
    return std::nullopt;
  }
  const auto& values = row.counters->values;
  if (values.find("sm__inst_executed.sum") == values.end()) {
    *why_not = needs + "sm__inst_executed.sum was not collected";
    return std::nullopt;
  }
  energy::Launch launch;
  launch.fp8 = row.algorithm == Algorithm::fp8;
  launch.mma_sync = mma_sync;
  launch.flops = row.model.flops_matrix;
  const bool counted = row.measured.has_value();
  launch.bytes = counted ? row.measured->dram_bytes : row.model.bytes();
  launch.bytes_basis = counted ? "counters" : "model";
  const counters::Measured counted_values = counters::interpret(values);
  launch.instructions = counted_values.instructions;
  launch.l2_bytes = counted_values.l2_bytes();
  launch.seconds = row.energy->seconds_per_launch;
  launch.sm_clock_mhz = row.energy->sm_clock_mean_mhz;
  return energy::predict(*c.energy_model, launch, why_not);
}

}  // namespace fa::bench
