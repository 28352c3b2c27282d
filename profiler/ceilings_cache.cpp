// The ceilings cache: one small JSON file per (device UUID, driver, tool version).
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiler/atomic_file.hpp"
#include "profiler/ceilings.hpp"
#include "profiler/energy_json.hpp"

namespace fa {

// Bumped when the way a ceiling is measured changes, so no cached figure outlives its method.
// 2: DRAM roof = fastest of three copies; 3: energy model; 4: DRAM roof = the copies or a read.
constexpr int kCeilingsMethod = 4;

std::string ceilings_cache_key(const DeviceInfo& d, const std::string& tool_version) {
  return d.uuid + "|driver " + d.driver_version + "|cuda " + std::to_string(d.cuda_driver_version) +
         "|fa-bench " + tool_version + "|method " + std::to_string(kCeilingsMethod);
}

std::string ceilings_cache_path(const DeviceInfo& d, const std::string& tool_version) {
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    base = x;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    base = std::string(h) + "/.cache";
  } else {
    base = "/tmp";
  }
  // The key has characters a file name should not: hash it into the name, keep it inside.
  const std::size_t h = std::hash<std::string>{}(ceilings_cache_key(d, tool_version));
  std::ostringstream name;
  name << base << "/fa-bench/ceilings-" << std::hex << h << ".json";
  return name.str();
}

std::optional<MeasuredCeilings> load_ceilings(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.at("key").get<std::string>() != key) return std::nullopt;
    MeasuredCeilings c;
    c.key = key;
    c.measured_utc = j.at("measured_utc").get<std::string>();
    c.dram_bytes_per_s = j.at("dram_bytes_per_s").get<double>();
    c.l2_bytes_per_s = j.at("l2_bytes_per_s").get<double>();
    c.fp32_flops_per_s = j.at("fp32_flops_per_s").get<double>();
    c.bf16_flops_per_s = j.at("bf16_flops_per_s").get<double>();
    c.fp16_flops_per_s = j.at("fp16_flops_per_s").get<double>();
    c.fp8_flops_per_s = j.at("fp8_flops_per_s").get<double>();
    if (j.contains("energy_model"))
      c.energy_model = energy::energy_fit_from_json(j["energy_model"]);
    // A fit of an older model (before the mma.sync kernels and the fitted clock exponent) is
    // missing, not used: the run measures the calibration again and caches it with the roofs.
    if (c.energy_model && c.energy_model->version < 5) c.energy_model.reset();
    return c;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged cache is remeasured, not trusted
  }
}

void save_ceilings(const std::string& path, const MeasuredCeilings& c) {
  const nlohmann::json j{{"key", c.key},
                         {"measured_utc", c.measured_utc},
                         {"dram_bytes_per_s", c.dram_bytes_per_s},
                         {"l2_bytes_per_s", c.l2_bytes_per_s},
                         {"fp32_flops_per_s", c.fp32_flops_per_s},
                         {"bf16_flops_per_s", c.bf16_flops_per_s},
                         {"fp16_flops_per_s", c.fp16_flops_per_s},
                         {"fp8_flops_per_s", c.fp8_flops_per_s}};
  nlohmann::json out = j;
  if (c.energy_model) out["energy_model"] = energy::energy_fit_to_json(*c.energy_model);
  write_file_atomically(path, out.dump(1) + "\n");
}

Ceilings to_ceilings(const MeasuredCeilings& m, const Ceilings& datasheet,
                     const std::string& origin) {
  Ceilings c = datasheet;
  c.source = "measured " + m.measured_utc + " (" + origin + ")";
  c.dram_bytes_per_s = m.dram_bytes_per_s;
  c.tensor_flops_per_s_bf16 = m.bf16_flops_per_s;
  c.tensor_flops_per_s_fp16 = m.fp16_flops_per_s;
  c.tensor_flops_per_s_fp8 = m.fp8_flops_per_s;
  c.l2_bytes_per_s = m.l2_bytes_per_s;
  c.fp32_flops_per_s = m.fp32_flops_per_s;
  c.energy_model = m.energy_model;
  return c;
}

}  // namespace fa
