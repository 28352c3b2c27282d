#include "bench/result_json.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <variant>

#include "profiler/energy_json.hpp"

namespace fa::bench {
namespace {

using json = nlohmann::json;

// NaN/inf are not JSON: they are written as null and read back as NaN.
json num(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

json device_json(const DeviceInfo& d) {
  return json{{"index", d.index},
              {"name", d.name},
              {"uuid", d.uuid},
              {"pci_bus_id", d.pci_bus_id},
              {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
              {"sm_count", d.sm_count},
              {"memory_bytes", d.memory_bytes},
              {"l2_bytes", d.l2_bytes},
              {"smem_per_sm_bytes", d.smem_per_sm_bytes},
              {"smem_per_block_optin_bytes", d.smem_per_block_optin_bytes},
              {"memory_bus_bits", d.memory_bus_bits},
              {"sm_clock_max_mhz", d.sm_clock_max_mhz},
              {"mem_clock_max_mhz", d.mem_clock_max_mhz},
              {"driver_version", d.driver_version},
              {"cuda_driver_version", d.cuda_driver_version},
              {"cuda_runtime_version", d.cuda_runtime_version}};
}

json ceilings_json(const Ceilings& c) {
  json j{{"source", c.source},
         {"dram_bytes_per_s", c.dram_bytes_per_s},
         {"l2_bytes_per_s", c.l2_bytes_per_s},
         {"fp32_flops_per_s", c.fp32_flops_per_s},
         {"datasheet",
          {{"dram_bytes_per_s", c.datasheet_dram_bytes_per_s},
           {"tensor_flops_per_s_bf16", c.datasheet_tensor_flops_per_s_bf16},
           {"tensor_flops_per_s_fp8", c.datasheet_tensor_flops_per_s_fp8}}},
         {"tensor_flops_per_s",
          {{"bf16", c.tensor_flops_per_s_bf16},
           {"fp16", c.tensor_flops_per_s_fp16},
           {"fp8", c.tensor_flops_per_s_fp8}}}};
  if (c.energy_model) j["energy_model"] = energy::energy_fit_to_json(*c.energy_model);
  return j;
}

json model_json(const model::IoModel& m) {
  json terms = json::array();
  for (const auto& t : m.terms)
    terms.push_back({{"name", t.name}, {"write", t.is_write}, {"bytes", t.bytes}});
  json out{{"flops_matrix", m.flops_matrix},
           {"flops_convention", m.flops_convention},
           {"flops_nonmatrix", m.flops_nonmatrix},
           {"bytes_read", m.bytes_read},
           {"bytes_written", m.bytes_written},
           {"bytes_compulsory", m.bytes_compulsory},
           {"bytes_asymptotic", m.bytes_asymptotic},
           {"onchip_budget_bytes", m.onchip_budget_bytes},
           {"terms", terms}};
  if (m.bytes_l2_view > 0) out["bytes_l2_view"] = m.bytes_l2_view;  // fa2 backward rows
  return out;
}

// Why a timing cannot be written as one, or "": every sample is a time in ms, finite and > 0
// (schema/fa-bench-result.schema.json; the readers refuse anything else, and NaN/inf would be
// written as null).
std::string unwritable_timing(const Timing& t) {
  if (t.samples_ms.empty()) return "timing: no samples";
  for (std::size_t i = 0; i < t.samples_ms.size(); ++i) {
    const double s = t.samples_ms[i];
    if (!std::isfinite(s) || s <= 0) {
      const std::string shown = std::isnan(s) ? "NaN" : std::isinf(s) ? "inf" : json(s).dump();
      return "timing: sample " + std::to_string(i) + " is " + shown + ", not a time > 0";
    }
  }
  return "";
}

json kernel_config_json(const std::optional<KernelConfig>& c) {
  if (!c) return nullptr;
  return json{{"block_q", c->block_q},
              {"block_kv", c->block_kv},
              {"stages", c->stages},
              {"warpgroups", c->warpgroups},
              {"cluster", c->cluster}};
}

json options_json(const OptionValues& values) {
  json j = json::object();
  for (const auto& [name, v] : values) {
    std::visit([&, name = name](const auto& x) { j[name] = x; }, v);
  }
  return j;
}

json result_json(const VariantResult& r) {
  // A timed row with an impossible sample is written untimed, as an error with the reason (its
  // timing, derived figures and placement left out): a file stays readable, and nothing is
  // compared against a time that is not one.
  const std::string bad_timing = r.timing ? unwritable_timing(*r.timing) : "";
  const bool timed = r.timing && bad_timing.empty();
  const Status status = !bad_timing.empty() && r.status == Status::ok ? Status::error : r.status;
  const std::string reason =
      bad_timing.empty() ? r.reason : (r.reason.empty() ? "" : r.reason + "; ") + bad_timing;
  const Tiles tiles = r.spec.tiles();
  json j{{"variant", r.spec.variant},
         {"direction", to_string(r.spec.direction)},
         {"kernel_config", kernel_config_json(r.spec.kernel_config)},
         {"options", options_json(r.spec.options)},
         {"algorithm", to_string(r.algorithm)},
         {"peer", r.peer},
         {"status", to_string(status)},
         {"reason", reason},
         // fa-bench/1's fields, kept for one version: kernel_config and options say it all.
         {"tiles", {{"block_q", tiles.block_q}, {"block_kv", tiles.block_kv}}},
         {"block_order", r.block_order()},
         {"model", model_json(r.model)}};
  if (r.default_config) j["default_config"] = *r.default_config;
  if (r.default_options) j["default_options"] = *r.default_options;
  if (r.verification) {
    const auto& v = *r.verification;
    j["verification"] = {{"metric", v.metric},
                         {"passed", v.passed},
                         {"all_finite", v.all_finite},
                         {"nonfinite_count", v.nonfinite_count},
                         {"max_abs_error", num(v.max_abs_error)},
                         {"rmse", num(v.rmse)},
                         {"baseline_max_abs_error", num(v.baseline_max_abs_error)},
                         {"baseline_rmse", num(v.baseline_rmse)},
                         {"tolerance", num(v.tolerance)},
                         {"rows_checked", v.rows_checked},
                         {"heads_checked", v.heads_checked},
                         {"worst_row_ratio", num(v.worst_row_ratio)},
                         {"worst_head", v.worst_head},
                         {"worst_row", v.worst_row},
                         {"inputs_unchanged", v.inputs_unchanged}};
    if (v.lse_max_abs_error) j["verification"]["lse_max_abs_error"] = num(*v.lse_max_abs_error);
    if (v.lse_worst_row_ratio)
      j["verification"]["lse_worst_row_ratio"] = num(*v.lse_worst_row_ratio);
    if (v.relative_rmse) j["verification"]["relative_rmse"] = num(*v.relative_rmse);
    if (v.baseline_relative_rmse)
      j["verification"]["baseline_relative_rmse"] = num(*v.baseline_relative_rmse);
  } else {
    j["verification"] = nullptr;
  }
  if (timed) {
    const auto& t = *r.timing;
    json samples = json::array();
    for (double s : t.samples_ms) samples.push_back(s);
    j["timing"] = {
        {"l2", t.l2},
        {"launch", t.launch},
        {"warmup", t.warmup},
        {"samples_ms", samples},
        {"median_ms", t.stats.median},
        {"q1_ms", t.stats.q1},
        {"q3_ms", t.stats.q3},
        {"min_ms", t.stats.min},
        {"max_ms", t.stats.max},
        {"mean_ms", t.stats.mean},
        {"stddev_ms", t.stats.stddev},
        {"relative_iqr", t.stats.relative_iqr()},
        {"sm_clock_mhz", {{"before", t.sm_clock_before_mhz}, {"after", t.sm_clock_after_mhz}}}};
  } else {
    j["timing"] = nullptr;
  }
  if (r.counters) {
    json values = json::object();
    // A metric without a finite value is left out (null would make the file unreadable).
    for (const auto& [k, v] : r.counters->values)
      if (std::isfinite(v)) values[k] = v;
    j["counters"] = {{"status", r.counters->status},
                     {"reason", r.counters->reason},
                     {"collect_seconds", r.counters->collect_seconds},
                     {"values", values}};
    if (!r.counters->kernels.empty() || !r.counters->kernels_reason.empty()) {
      json kernels = json::array();
      for (const auto& k : r.counters->kernels) {
        json kv = json::object();
        for (const auto& [name, v] : k.values)
          if (std::isfinite(v)) kv[name] = v;
        kernels.push_back({{"name", k.name}, {"values", kv}});
      }
      j["counters"]["kernels"] = kernels;
      if (!r.counters->kernels_reason.empty())
        j["counters"]["kernels_reason"] = r.counters->kernels_reason;
    }
  } else {
    j["counters"] = nullptr;
  }
  if (r.measured) {
    const auto& m = *r.measured;
    j["measured"] = {{"dram_bytes", m.dram_bytes},
                     {"dram_over_model", m.dram_over_model},
                     {"dram_over_compulsory", m.dram_over_compulsory},
                     {"l2_bytes", m.l2_bytes},
                     {"l2_over_model", m.l2_over_model},
                     {"tensor_flops", m.tensor_flops},
                     {"tensor_over_model", m.tensor_over_model},
                     {"fp32_flops", m.fp32_flops},
                     {"intensity_dram", m.intensity_dram},
                     {"intensity_l2", m.intensity_l2}};
  } else {
    j["measured"] = nullptr;
  }
  if (r.derived && timed) {
    const auto& d = *r.derived;
    j["derived"] = {{"tflops_convention", d.tflops_convention},
                    {"tflops_model", d.tflops_model},
                    {"effective_gbps", d.effective_gbps},
                    {"arithmetic_intensity", d.arithmetic_intensity}};
    if (!d.best_peer.empty()) {
      j["derived"]["best_peer"] = d.best_peer;
      j["derived"]["speed_vs_best_peer"] = d.speed_vs_best_peer;
    }
  } else {
    j["derived"] = nullptr;
  }
  // Written only for a row placed under known roofs (placement_of leaves bound "" and zeros when a
  // roof or the byte count is unknown), with finite figures: the schema's placement.
  if (r.placement && timed && !r.placement->bound.empty() && r.placement->intensity_dram > 0 &&
      r.placement->attainable_flops_per_s > 0 && std::isfinite(r.placement->intensity_dram) &&
      std::isfinite(r.placement->attainable_flops_per_s) && std::isfinite(r.placement->fraction)) {
    const auto& pl = *r.placement;
    j["placement"] = {{"basis", pl.basis},
                      {"intensity_dram", num(pl.intensity_dram)},
                      {"intensity_l2", pl.intensity_l2 > 0 ? num(pl.intensity_l2) : json(nullptr)},
                      {"attainable_tflops", num(pl.attainable_flops_per_s * 1e-12)},
                      {"fraction", num(pl.fraction)},
                      {"bound", pl.bound}};
  }
  if (r.energy)
    j["energy"] = energy::row_energy_to_json(*r.energy, r.energy_model, r.energy_model_reason);
  return j;
}

// ---- reading -------------------------------------------------------------------------------

struct Reader {
  std::string source;

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw ResultFileError(source + ": " + path + ": " + problem);
  }

  const json& at(const json& j, const std::string& path, const char* key) const {
    if (!j.is_object()) fail(path, "expected an object");
    auto it = j.find(key);
    if (it == j.end()) fail(path + "." + key, "missing");
    return *it;
  }
  std::string str(const json& j, const std::string& path, const char* key) const {
    const json& v = at(j, path, key);
    if (!v.is_string()) fail(path + "." + key, "expected a string");
    return v.get<std::string>();
  }
  double number(const json& j, const std::string& path, const char* key) const {
    const json& v = at(j, path, key);
    if (v.is_null()) return NAN;
    if (!v.is_number()) fail(path + "." + key, "expected a number");
    return v.get<double>();
  }
  // Counts, bytes, FLOPs, rates, ratios: a finite number >= 0 (null, i.e. NaN, is refused).
  double nonnegative(const json& j, const std::string& path, const char* key) const {
    const double x = number(j, path, key);
    if (!std::isfinite(x) || x < 0)
      fail(path + "." + key, impossible(at(j, path, key), "a finite number >= 0"));
    return x;
  }
  // Errors, ratios and tolerances: a number >= 0, or null where the value was not finite.
  double error_figure(const json& j, const std::string& path, const char* key) const {
    const double x = number(j, path, key);
    if (!std::isnan(x) && (!std::isfinite(x) || x < 0))
      fail(path + "." + key, impossible(at(j, path, key), "a number >= 0, or null"));
    return x;
  }
  std::int64_t count(const json& j, const std::string& path, const char* key) const {
    const std::int64_t n = integer(j, path, key);
    if (n < 0) fail(path + "." + key, impossible(at(j, path, key), "a count >= 0"));
    return n;
  }
  std::string impossible(const json& v, const char* accepted) const {
    return "impossible value " + v.dump() + " (accepted: " + accepted + ")";
  }
  std::int64_t integer(const json& j, const std::string& path, const char* key) const {
    const json& v = at(j, path, key);
    if (!v.is_number_integer()) fail(path + "." + key, "expected an integer");
    return v.get<std::int64_t>();
  }
  // An optional integer key: `fallback` when absent; never converted from a float (a value such
  // as 1e30 read as int is undefined behaviour; the fuzzer found it).
  std::int64_t optional_integer(const json& j, const std::string& path, const char* key,
                                std::int64_t fallback) const {
    if (!j.is_object() || !j.contains(key)) return fallback;
    return integer(j, path, key);
  }
  bool boolean(const json& j, const std::string& path, const char* key) const {
    const json& v = at(j, path, key);
    if (!v.is_boolean()) fail(path + "." + key, "expected true or false");
    return v.get<bool>();
  }
};

Algorithm parse_algorithm(const Reader& rd, const std::string& s, const std::string& path) {
  if (s == "standard") return Algorithm::standard;
  if (s == "fa1") return Algorithm::fa1;
  if (s == "fa2") return Algorithm::fa2;
  if (s == "fp8") return Algorithm::fp8;
  if (s == "split_kv") return Algorithm::split_kv;
  rd.fail(path, "unknown algorithm '" + s + "' (accepted: standard, fa1, fa2, fp8, split_kv)");
}

// A hardware counter: a count, finite and >= 0.
double counter_value(const Reader& rd, const json& v, const std::string& path) {
  if (!v.is_number()) rd.fail(path, "expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) rd.fail(path, rd.impossible(v, "a count >= 0"));
  return x;
}

// kernel_config: null, or an object of positive tiles, stages >= 1, warpgroups >= 0 and a
// cluster of three integers >= 1.
std::optional<KernelConfig> read_kernel_config(const Reader& rd, const json& j,
                                               const std::string& p) {
  const json& v = rd.at(j, p, "kernel_config");
  if (v.is_null()) return std::nullopt;
  const std::string kp = p + ".kernel_config";
  KernelConfig c;
  auto bounded = [&](const char* key, std::int64_t lo) {
    const std::int64_t x = rd.integer(v, kp, key);
    if (x < lo || x > 1 << 20) {
      rd.fail(kp + "." + key,
              rd.impossible(v[key], lo == 1 ? "an integer >= 1" : "an integer >= 0"));
    }
    return static_cast<int>(x);
  };
  c.block_q = bounded("block_q", 1);
  c.block_kv = bounded("block_kv", 1);
  c.stages = bounded("stages", 1);
  c.warpgroups = bounded("warpgroups", 0);
  const json& cl = rd.at(v, kp, "cluster");
  if (!cl.is_array() || cl.size() != 3) rd.fail(kp + ".cluster", "expected an array of 3 integers");
  for (std::size_t i = 0; i < 3; ++i) {
    if (!cl[i].is_number_integer() || cl[i].get<std::int64_t>() < 1 ||
        cl[i].get<std::int64_t>() > 1 << 20) {
      rd.fail(kp + ".cluster", rd.impossible(cl, "3 integers >= 1"));
    }
    c.cluster[i] = static_cast<int>(cl[i].get<std::int64_t>());
  }
  return c;
}

// options: an object of strings, numbers and bools.
OptionValues read_options(const Reader& rd, const json& j, const std::string& p) {
  const json& v = rd.at(j, p, "options");
  if (!v.is_object()) rd.fail(p + ".options", "expected an object");
  OptionValues out;
  for (const auto& [name, x] : v.items()) {
    if (x.is_boolean()) {
      out[name] = x.get<bool>();
    } else if (x.is_string()) {
      out[name] = x.get<std::string>();
    } else if (x.is_number() && std::isfinite(x.get<double>())) {
      out[name] = x.get<double>();
    } else {
      rd.fail(p + ".options." + name, "expected a string, a finite number or a bool");
    }
  }
  return out;
}

// A fa-bench/1 row as a spec, from the fields /1 wrote. /1 named rows with their tiles and block
// order appended ("fa2@64x64~heads"); the name up to the first '@' or '~' is the variant. Every
// tiled kernel of the /1 era (fa1, fa2, fp8) kept two tile buffers in flight; /1 recorded fa2's
// block order (and, wrongly, the cudnn peer's; not at all before --fa2-order), and fp8's
// prequantisation in the settings.
RowSpec spec_from_v1(const std::string& name, const Tiles& tiles, const std::string& block_order,
                     Algorithm algorithm, bool peer, bool fp8_prequantized) {
  RowSpec s;
  s.variant = name.substr(0, name.find_first_of("@~"));
  s.direction = Direction::forward;
  if (tiles.block_q > 0 && tiles.block_kv > 0)
    s.kernel_config = KernelConfig{tiles.block_q, tiles.block_kv, 2, 0, {1, 1, 1}};
  // fa2, the one /1 variant of the fa2 algorithm that was not a peer, declared the block order;
  // files from before --fa2-order have none: the only order then was "blocks".
  if (!peer && algorithm == Algorithm::fa2) {
    s.options[kOptionBlockOrder] = block_order.empty() ? "blocks" : block_order;
  }
  if (!peer && algorithm == Algorithm::fp8) s.options[kOptionPrequantized] = fp8_prequantized;
  if (peer && s.variant == "cudnn") s.options[kOptionStats] = true;  // its only forward then
  return s;
}

VariantResult read_result(const Reader& rd, const json& j, const std::string& p, bool v1,
                          bool fp8_prequantized) {
  VariantResult r;
  r.spec.variant = rd.str(j, p, "variant");
  r.algorithm = parse_algorithm(rd, rd.str(j, p, "algorithm"), p + ".algorithm");
  r.peer = rd.boolean(j, p, "peer");
  const std::string status = rd.str(j, p, "status");
  if (!parse_status(status, &r.status)) {
    rd.fail(p + ".status", "unknown status '" + status +
                               "' (accepted: ok, failed, skipped, unsupported, error, model_only, "
                               "interrupted)");
  }
  r.reason = rd.str(j, p, "reason");
  if (v1) {
    const json& tiles = rd.at(j, p, "tiles");
    const Tiles t{static_cast<int>(rd.integer(tiles, p + ".tiles", "block_q")),
                  static_cast<int>(rd.integer(tiles, p + ".tiles", "block_kv"))};
    r.spec = spec_from_v1(r.spec.variant, t, j.value("block_order", ""), r.algorithm, r.peer,
                          fp8_prequantized);
  } else {
    const std::string dir = rd.str(j, p, "direction");
    if (!parse_direction(dir, &r.spec.direction)) {
      rd.fail(p + ".direction", "unknown direction '" + dir + "' (accepted: forward, backward)");
    }
    r.spec.kernel_config = read_kernel_config(rd, j, p);
    r.spec.options = read_options(rd, j, p);
    // The cudnn peer declares "stats" since issue 17; its rows from before wrote the lse: the
    // default, so an older baseline's row matches a new run's.
    if (r.peer && r.spec.variant == "cudnn" && r.spec.options.empty())
      r.spec.options[kOptionStats] = true;
    if (j.contains("default_config")) r.default_config = rd.boolean(j, p, "default_config");
    if (j.contains("default_options")) r.default_options = rd.boolean(j, p, "default_options");
  }
  const json& m = rd.at(j, p, "model");
  const std::string mp = p + ".model";
  r.model.flops_matrix = rd.nonnegative(m, mp, "flops_matrix");
  r.model.flops_convention = rd.nonnegative(m, mp, "flops_convention");
  r.model.flops_nonmatrix = rd.nonnegative(m, mp, "flops_nonmatrix");
  r.model.bytes_read = rd.nonnegative(m, mp, "bytes_read");
  r.model.bytes_written = rd.nonnegative(m, mp, "bytes_written");
  r.model.bytes_compulsory = rd.nonnegative(m, mp, "bytes_compulsory");
  r.model.bytes_asymptotic = rd.nonnegative(m, mp, "bytes_asymptotic");
  if (m.contains("onchip_budget_bytes"))
    r.model.onchip_budget_bytes = rd.nonnegative(m, mp, "onchip_budget_bytes");
  if (m.contains("bytes_l2_view")) r.model.bytes_l2_view = rd.nonnegative(m, mp, "bytes_l2_view");
  if (m.contains("terms")) {
    const json& terms = m["terms"];
    if (!terms.is_array()) rd.fail(mp + ".terms", "expected an array");
    for (std::size_t i = 0; i < terms.size(); ++i) {
      const std::string tp = mp + ".terms[" + std::to_string(i) + "]";
      r.model.terms.push_back({rd.str(terms[i], tp, "name"), rd.boolean(terms[i], tp, "write"),
                               rd.nonnegative(terms[i], tp, "bytes")});
    }
  }
  const json& v = rd.at(j, p, "verification");
  if (!v.is_null()) {
    const std::string vp = p + ".verification";
    Verification ver;
    ver.metric = v.value("metric", "max_abs_error");
    ver.passed = rd.boolean(v, vp, "passed");
    ver.all_finite = rd.boolean(v, vp, "all_finite");
    ver.nonfinite_count = rd.count(v, vp, "nonfinite_count");
    ver.max_abs_error = rd.error_figure(v, vp, "max_abs_error");
    ver.rmse = rd.error_figure(v, vp, "rmse");
    ver.baseline_max_abs_error = rd.error_figure(v, vp, "baseline_max_abs_error");
    ver.tolerance = rd.error_figure(v, vp, "tolerance");
    ver.baseline_rmse = v.contains("baseline_rmse") ? rd.error_figure(v, vp, "baseline_rmse") : 0.0;
    ver.rows_checked = rd.count(v, vp, "rows_checked");
    ver.heads_checked = rd.count(v, vp, "heads_checked");
    if (v.contains("lse_max_abs_error"))
      ver.lse_max_abs_error = rd.error_figure(v, vp, "lse_max_abs_error");
    // The per-row rule's fields (files written since the rule; absent from older ones). A row
    // whose output held NaN has an infinite ratio, written as null (like the errors above).
    if (v.contains("worst_row_ratio"))
      ver.worst_row_ratio = rd.error_figure(v, vp, "worst_row_ratio");
    if (v.contains("worst_head")) ver.worst_head = rd.integer(v, vp, "worst_head");
    if (v.contains("worst_row")) ver.worst_row = rd.integer(v, vp, "worst_row");
    if (v.contains("inputs_unchanged"))
      ver.inputs_unchanged = rd.boolean(v, vp, "inputs_unchanged");
    if (v.contains("lse_worst_row_ratio"))
      ver.lse_worst_row_ratio = rd.error_figure(v, vp, "lse_worst_row_ratio");
    if (v.contains("relative_rmse")) ver.relative_rmse = rd.error_figure(v, vp, "relative_rmse");
    if (v.contains("baseline_relative_rmse"))
      ver.baseline_relative_rmse = rd.error_figure(v, vp, "baseline_relative_rmse");
    r.verification = ver;
  }
  const json& t = rd.at(j, p, "timing");
  if (!t.is_null()) {
    const std::string tp = p + ".timing";
    Timing tm;
    tm.l2 = rd.str(t, tp, "l2");
    tm.launch =
        t.contains("launch") ? rd.str(t, tp, "launch") : "stream";  // before --launch: stream
    if (tm.launch != "stream" && tm.launch != "graph")
      rd.fail(tp + ".launch", "must be stream or graph");
    tm.warmup = static_cast<int>(rd.integer(t, tp, "warmup"));
    const json& samples = rd.at(t, tp, "samples_ms");
    if (!samples.is_array()) rd.fail(tp + ".samples_ms", "expected an array");
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const json& s = samples[i];
      const std::string sp = tp + ".samples_ms[" + std::to_string(i) + "]";
      if (!s.is_number()) rd.fail(sp, "expected a number");
      const double ms = s.get<double>();
      if (!std::isfinite(ms) || ms <= 0) rd.fail(sp, rd.impossible(s, "a time in ms > 0"));
      tm.samples_ms.push_back(ms);
    }
    if (tm.samples_ms.empty())
      rd.fail(tp + ".samples_ms", "empty (a timed row has at least one sample)");
    tm.stats = summarize(tm.samples_ms);
    // The stored statistics are required (reports/ reads them) and checked, though the figures
    // used here are recomputed from the samples.
    for (const char* key : {"median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "mean_ms"}) {
      const json& x = rd.at(t, tp, key);
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() <= 0)
        rd.fail(tp + "." + key, rd.impossible(x, "a time in ms > 0"));
    }
    rd.nonnegative(t, tp, "stddev_ms");
    rd.nonnegative(t, tp, "relative_iqr");
    const json& clk = rd.at(t, tp, "sm_clock_mhz");
    tm.sm_clock_before_mhz = static_cast<int>(rd.integer(clk, tp + ".sm_clock_mhz", "before"));
    tm.sm_clock_after_mhz = static_cast<int>(rd.integer(clk, tp + ".sm_clock_mhz", "after"));
    r.timing = tm;
  }
  const json& d = rd.at(j, p, "derived");
  if (!d.is_null()) {
    const std::string dp = p + ".derived";
    Derived dv;
    dv.tflops_convention = rd.nonnegative(d, dp, "tflops_convention");
    dv.tflops_model = rd.nonnegative(d, dp, "tflops_model");
    dv.effective_gbps = rd.nonnegative(d, dp, "effective_gbps");
    dv.arithmetic_intensity = rd.nonnegative(d, dp, "arithmetic_intensity");
    // Older files (before `placement`) placed rows here and in `measured`; kept readable.
    if (d.contains("roofline_attainable_tflops"))
      dv.roofline_attainable_tflops = rd.nonnegative(d, dp, "roofline_attainable_tflops");
    if (d.contains("roofline_fraction"))
      dv.roofline_fraction = rd.nonnegative(d, dp, "roofline_fraction");
    if (d.contains("bound")) dv.bound = rd.str(d, dp, "bound");
    if (d.contains("best_peer")) {
      dv.best_peer = rd.str(d, dp, "best_peer");
      dv.speed_vs_best_peer = rd.nonnegative(d, dp, "speed_vs_best_peer");
    }
    r.derived = dv;
  }
  if (j.contains("counters") && !j["counters"].is_null()) {
    const json& cj = j["counters"];
    const std::string cp = p + ".counters";
    CounterResult c;
    c.status = rd.str(cj, cp, "status");
    c.reason = rd.str(cj, cp, "reason");
    c.collect_seconds = cj.value("collect_seconds", 0.0);
    const json& vals = rd.at(cj, cp, "values");
    if (!vals.is_object()) rd.fail(cp + ".values", "expected an object");
    for (auto it = vals.begin(); it != vals.end(); ++it)
      c.values[it.key()] = counter_value(rd, it.value(), cp + ".values." + it.key());
    if (cj.contains("kernels")) {
      const json& ks = cj["kernels"];
      if (!ks.is_array()) rd.fail(cp + ".kernels", "expected an array");
      for (std::size_t i = 0; i < ks.size(); ++i) {
        const std::string kp = cp + ".kernels[" + std::to_string(i) + "]";
        if (!ks[i].is_object()) rd.fail(kp, "expected an object");
        CounterResult::Kernel k;
        k.name = rd.str(ks[i], kp, "name");
        const json& kv = rd.at(ks[i], kp, "values");
        if (!kv.is_object()) rd.fail(kp + ".values", "expected an object");
        for (auto it = kv.begin(); it != kv.end(); ++it)
          k.values[it.key()] = counter_value(rd, it.value(), kp + ".values." + it.key());
        c.kernels.push_back(std::move(k));
      }
    }
    if (cj.contains("kernels_reason")) c.kernels_reason = rd.str(cj, cp, "kernels_reason");
    r.counters = c;
  }
  if (j.contains("measured") && !j["measured"].is_null()) {
    const json& mj = j["measured"];
    const std::string mp = p + ".measured";
    MeasuredDerived m;
    m.dram_bytes = rd.nonnegative(mj, mp, "dram_bytes");
    m.dram_over_model = rd.nonnegative(mj, mp, "dram_over_model");
    m.dram_over_compulsory = rd.nonnegative(mj, mp, "dram_over_compulsory");
    m.l2_bytes = rd.nonnegative(mj, mp, "l2_bytes");
    m.l2_over_model = rd.nonnegative(mj, mp, "l2_over_model");
    m.tensor_flops = rd.nonnegative(mj, mp, "tensor_flops");
    m.tensor_over_model = rd.nonnegative(mj, mp, "tensor_over_model");
    m.fp32_flops = rd.nonnegative(mj, mp, "fp32_flops");
    m.intensity_dram = rd.nonnegative(mj, mp, "intensity_dram");
    m.intensity_l2 = rd.nonnegative(mj, mp, "intensity_l2");
    if (mj.contains("roofline_fraction"))
      m.roofline_fraction = rd.nonnegative(mj, mp, "roofline_fraction");
    if (mj.contains("bound")) m.bound = rd.str(mj, mp, "bound");
    r.measured = m;
  }
  if (j.contains("placement") && !j["placement"].is_null()) {
    const json& pj = j["placement"];
    const std::string pp = p + ".placement";
    Placement pl;
    pl.basis = rd.str(pj, pp, "basis");
    if (pl.basis != "counters" && pl.basis != "compulsory")
      rd.fail(pp + ".basis", "expected counters or compulsory");
    pl.intensity_dram = rd.nonnegative(pj, pp, "intensity_dram");
    pl.intensity_l2 = pj.contains("intensity_l2") && !pj["intensity_l2"].is_null()
                          ? rd.nonnegative(pj, pp, "intensity_l2")
                          : 0;
    pl.attainable_flops_per_s = rd.nonnegative(pj, pp, "attainable_tflops") * 1e12;
    pl.fraction = rd.nonnegative(pj, pp, "fraction");
    pl.bound = rd.str(pj, pp, "bound");
    r.placement = pl;
  }
  if (j.contains("energy") && !j["energy"].is_null()) {
    energy::Measurement m;
    try {
      energy::row_energy_from_json(j["energy"], &m, &r.energy_model, &r.energy_model_reason);
    } catch (const std::invalid_argument& e) {
      rd.fail(p + ".energy", e.what());
    }
    r.energy = std::move(m);
  }
  if ((r.status == Status::ok) != r.timing.has_value()) {
    rd.fail(p + ".timing", "must be present exactly when status is ok");
  }
  if (r.verification && (r.status == Status::failed) == r.verification->passed) {
    rd.fail(p + ".verification.passed", "must be false exactly when status is failed");
  }
  return r;
}

DeviceInfo read_device(const Reader& rd, const json& dev, const std::string& p) {
  DeviceInfo d;
  d.index = static_cast<int>(rd.integer(dev, p, "index"));
  d.name = rd.str(dev, p, "name");
  d.uuid = rd.str(dev, p, "uuid");
  d.pci_bus_id = dev.value("pci_bus_id", "");
  const std::string cc = rd.str(dev, p, "compute_capability");
  if (std::sscanf(cc.c_str(), "%d.%d", &d.cc_major, &d.cc_minor) != 2) {
    rd.fail(p + ".compute_capability", "expected \"major.minor\", got '" + cc + "'");
  }
  d.sm_count = static_cast<int>(rd.integer(dev, p, "sm_count"));
  d.memory_bytes = rd.integer(dev, p, "memory_bytes");
  d.l2_bytes = rd.integer(dev, p, "l2_bytes");
  // Required as the schema requires them; the rest are optional (scripts/peers_torch.py, through
  // reports/schema.py, writes what torch knows of the device).
  d.smem_per_sm_bytes = rd.optional_integer(dev, p, "smem_per_sm_bytes", 0);
  d.smem_per_block_optin_bytes = rd.optional_integer(dev, p, "smem_per_block_optin_bytes", 0);
  d.memory_bus_bits = static_cast<int>(rd.optional_integer(dev, p, "memory_bus_bits", 0));
  d.sm_clock_max_mhz = static_cast<int>(rd.optional_integer(dev, p, "sm_clock_max_mhz", 0));
  d.mem_clock_max_mhz = static_cast<int>(rd.optional_integer(dev, p, "mem_clock_max_mhz", 0));
  if (dev.contains("driver_version")) d.driver_version = rd.str(dev, p, "driver_version");
  d.cuda_driver_version = static_cast<int>(rd.optional_integer(dev, p, "cuda_driver_version", 0));
  d.cuda_runtime_version = static_cast<int>(rd.optional_integer(dev, p, "cuda_runtime_version", 0));
  return d;
}

Ceilings read_ceilings(const Reader& rd, const json& c, const std::string& p) {
  Ceilings out;
  out.source = rd.str(c, p, "source");
  out.dram_bytes_per_s = rd.number(c, p, "dram_bytes_per_s");
  const json& peaks = rd.at(c, p, "tensor_flops_per_s");
  out.tensor_flops_per_s_bf16 = peaks.value("bf16", 0.0);
  out.tensor_flops_per_s_fp16 = peaks.value("fp16", 0.0);
  out.tensor_flops_per_s_fp8 = peaks.value("fp8", 0.0);
  out.l2_bytes_per_s = c.value("l2_bytes_per_s", 0.0);
  out.fp32_flops_per_s = c.value("fp32_flops_per_s", 0.0);
  if (c.contains("datasheet") && c["datasheet"].is_object()) {
    const json& ds = c["datasheet"];
    out.datasheet_dram_bytes_per_s = ds.value("dram_bytes_per_s", 0.0);
    out.datasheet_tensor_flops_per_s_bf16 = ds.value("tensor_flops_per_s_bf16", 0.0);
    out.datasheet_tensor_flops_per_s_fp8 = ds.value("tensor_flops_per_s_fp8", 0.0);
  }
  if (c.contains("energy_model") && !c["energy_model"].is_null()) {
    try {
      out.energy_model = energy::energy_fit_from_json(c["energy_model"]);
    } catch (const std::invalid_argument& e) {
      rd.fail(p + ".energy_model", e.what());
    }
  }
  return out;
}

}  // namespace

std::string to_json_text(const RunResult& r) {
  json configs = json::array();
  for (const auto& c : r.configs) {
    json results = json::array();
    for (const auto& v : c.results) results.push_back(result_json(v));
    configs.push_back(
        {{"B", c.shape.B},
         {"H", c.shape.H},
         {"H_kv", c.shape.kv_heads()},
         {"N", c.shape.N},
         {"N_kv", c.shape.kv_len()},
         {"page_size", c.shape.page_size},
         {"kv_lengths", c.shape.ragged() ? json(c.shape.kv_lengths) : json(nullptr)},
         {"d", c.shape.d},
         {"causal", c.shape.causal},
         {"dtype", std::string(to_string(c.shape.dtype))},
         {"seed", c.seed},
         {"gpu", c.gpu ? json{{"uuid", c.gpu->uuid}, {"name", c.gpu->name}} : json(nullptr)},
         {"results", results}});
  }
  json doc{{"schema", kSchema},
           {"tool",
            {{"name", "fa-bench"}, {"version", r.tool_version}, {"git_revision", r.git_revision}}},
           {"created_utc", r.created_utc},
           {"command_line", r.command_line},
           {"complete", r.complete},
           {"device", r.device ? device_json(*r.device) : json(nullptr)},
           {"no_gpu_reason", r.no_gpu_reason},
           {"settings",
            {{"seed", r.settings.seed},
             {"warmup", r.settings.warmup},
             {"repetitions", r.settings.repetitions},
             {"min_time_s", r.settings.min_time_s},
             {"l2", r.settings.l2},
             {"model_only", r.settings.model_only},
             {"inputs", r.settings.inputs},
             {"fp8_prequantized", r.settings.fp8_prequantized},
             {"timing_engine", r.settings.timing_engine},
             {"launch", r.settings.launch},
             {"model_smem_per_sm_bytes", r.settings.model_smem_per_sm_bytes},
             {"energy_window_s", r.settings.energy_window_s}}},
           {"ceilings", ceilings_json(r.ceilings)},
           {"configs", configs}};
  if (!r.devices.empty()) {
    json devices = json::array();
    for (const auto& d : r.devices) {
      json dj = device_json(d.info);
      dj["ceilings"] = ceilings_json(d.ceilings);
      devices.push_back(std::move(dj));
    }
    doc["devices"] = std::move(devices);
  }
  if (r.shard) doc["shard"] = {{"index", r.shard->index}, {"count", r.shard->count}};
  return doc.dump(1) + "\n";
}

namespace {

// A configuration's page_size (0 or a power of two) and kv_lengths (null, or B lengths from 1 to
// N_kv).
void read_kv_cache(const Reader& rd, const json& cj, const std::string& cp, Shape* s) {
  s->page_size = rd.integer(cj, cp, "page_size");
  if (s->page_size < 0 || (s->page_size & (s->page_size - 1)) != 0)
    rd.fail(cp + ".page_size", "must be 0 or a power of two");
  const json& lengths = rd.at(cj, cp, "kv_lengths");
  if (lengths.is_null()) return;
  if (!lengths.is_array() || static_cast<std::int64_t>(lengths.size()) != s->B)
    rd.fail(cp + ".kv_lengths", "expected null or an array of B lengths");
  for (const json& l : lengths) {
    if (!l.is_number_integer() || l.get<std::int64_t>() < 1 || l.get<std::int64_t>() > s->kv_len())
      rd.fail(cp + ".kv_lengths", "each length must be an integer from 1 to N_kv");
    s->kv_lengths.push_back(l.get<std::int64_t>());
  }
}

RunResult read_document(const std::string& text, const std::string& source) {
  Reader rd{source};
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw ResultFileError(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) rd.fail("(document)", "expected a JSON object");
  if (!doc.contains("schema"))
    rd.fail("schema", std::string("missing (expected \"") + kSchema + "\")");
  const json& schema = doc["schema"];
  if (!schema.is_string() || (schema != kSchema && schema != kSchemaV4 && schema != kSchemaV3 &&
                              schema != kSchemaV2 && schema != kSchemaV1)) {
    rd.fail("schema", "unknown version " + schema.dump() + " (this reader understands \"" +
                          kSchema + "\", \"" + kSchemaV4 + "\", \"" + kSchemaV3 + "\", \"" +
                          kSchemaV2 + "\" and \"" + kSchemaV1 + "\")");
  }
  const bool v1 = schema == kSchemaV1, v2 = schema == kSchemaV2, v3 = schema == kSchemaV3;
  const bool v4 = schema == kSchemaV4;
  RunResult r;
  r.schema = schema.get<std::string>();
  const json& tool = rd.at(doc, "", "tool");
  r.tool_version = rd.str(tool, "tool", "version");
  r.git_revision = rd.str(tool, "tool", "git_revision");
  r.created_utc = rd.str(doc, "", "created_utc");
  r.command_line = rd.str(doc, "", "command_line");
  r.complete = rd.boolean(doc, "", "complete");
  if (const json& dev = rd.at(doc, "", "device"); !dev.is_null())
    r.device = read_device(rd, dev, "device");
  r.no_gpu_reason = doc.value("no_gpu_reason", "");
  const json& s = rd.at(doc, "", "settings");
  r.settings.seed = static_cast<std::uint64_t>(rd.integer(s, "settings", "seed"));
  r.settings.warmup = static_cast<int>(rd.integer(s, "settings", "warmup"));
  r.settings.repetitions = static_cast<int>(rd.integer(s, "settings", "repetitions"));
  r.settings.min_time_s = rd.number(s, "settings", "min_time_s");
  r.settings.l2 = rd.str(s, "settings", "l2");
  r.settings.model_only = rd.boolean(s, "settings", "model_only");
  r.settings.inputs = s.value("inputs", "normal");
  r.settings.fp8_prequantized = s.value("fp8_prequantized", false);
  r.settings.timing_engine = s.value("timing_engine", "");
  r.settings.launch = s.contains("launch") ? rd.str(s, "settings", "launch") : "stream";
  if (r.settings.launch != "stream" && r.settings.launch != "graph")
    rd.fail("settings.launch", "must be stream or graph");
  r.settings.model_smem_per_sm_bytes =
      rd.optional_integer(s, "settings", "model_smem_per_sm_bytes", 0);
  if (s.contains("energy_window_s"))
    r.settings.energy_window_s = rd.nonnegative(s, "settings", "energy_window_s");
  r.ceilings = read_ceilings(rd, rd.at(doc, "", "ceilings"), "ceilings");
  if (!v1 && !v2 && doc.contains("devices")) {
    const json& devices = doc["devices"];
    if (!devices.is_array()) rd.fail("devices", "expected an array");
    for (std::size_t k = 0; k < devices.size(); ++k) {
      const std::string dp = "devices[" + std::to_string(k) + "]";
      DeviceRecord rec;
      rec.info = read_device(rd, devices[k], dp);
      rec.ceilings = read_ceilings(rd, rd.at(devices[k], dp, "ceilings"), dp + ".ceilings");
      for (const auto& other : r.devices) {
        if (other.info.uuid == rec.info.uuid) rd.fail(dp + ".uuid", "appears twice");
      }
      r.devices.push_back(std::move(rec));
    }
  }
  if (!v1 && !v2 && doc.contains("shard")) {
    const json& sh = doc["shard"];
    Shard shard;
    shard.index = static_cast<int>(rd.integer(sh, "shard", "index"));
    shard.count = static_cast<int>(rd.integer(sh, "shard", "count"));
    if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
      rd.fail("shard", "expected 0 <= index < count");
    r.shard = shard;
  }
  const json& configs = rd.at(doc, "", "configs");
  if (!configs.is_array()) rd.fail("configs", "expected an array");
  std::map<std::pair<decltype(Shape{}.key()), std::string>, std::size_t> seen;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const json& cj = configs[i];
    const std::string cp = "configs[" + std::to_string(i) + "]";
    ConfigResult cr;
    cr.shape.B = rd.integer(cj, cp, "B");
    cr.shape.H = rd.integer(cj, cp, "H");
    cr.shape.N = rd.integer(cj, cp, "N");
    cr.shape.d = rd.integer(cj, cp, "d");
    if (cr.shape.B <= 0 || cr.shape.H <= 0 || cr.shape.N <= 0 || cr.shape.d <= 0) {
      rd.fail(cp, "B, H, N and d must be positive");
    }
    // fa-bench/4: the K/V heads and length (older files: square multi-head attention).
    if (!v1 && !v2 && !v3) {
      const std::int64_t h_kv = rd.integer(cj, cp, "H_kv"), n_kv = rd.integer(cj, cp, "N_kv");
      if (h_kv <= 0 || cr.shape.H % h_kv != 0)
        rd.fail(cp + ".H_kv", "must be a positive divisor of H");
      if (n_kv <= 0) rd.fail(cp + ".N_kv", "must be positive");
      cr.shape.H_kv = h_kv == cr.shape.H ? 0 : h_kv;
      cr.shape.N_kv = n_kv == cr.shape.N ? 0 : n_kv;
    }
    // fa-bench/5: the cache's pages and each sequence's length.
    if (!v1 && !v2 && !v3 && !v4) read_kv_cache(rd, cj, cp, &cr.shape);
    cr.shape.causal = rd.boolean(cj, cp, "causal");
    const std::string dt = rd.str(cj, cp, "dtype");
    if (!parse_dtype(dt, &cr.shape.dtype)) rd.fail(cp + ".dtype", "unknown dtype '" + dt + "'");
    cr.seed = static_cast<std::uint64_t>(rd.integer(cj, cp, "seed"));
    // fa-bench/3: the GPU it ran on (null: none); older files ran on the file's one device.
    if (v1 || v2) {
      if (r.device) cr.gpu = GpuId{r.device->uuid, r.device->name};
    } else if (const json& g = rd.at(cj, cp, "gpu"); !g.is_null()) {
      cr.gpu = GpuId{rd.str(g, cp + ".gpu", "uuid"), rd.str(g, cp + ".gpu", "name")};
    }
    // A configuration appears once per GPU: with two, which one a comparison uses would depend
    // on order.
    const auto key = std::pair{cr.shape.key(), cr.gpu ? cr.gpu->uuid : std::string()};
    if (auto [it, fresh] = seen.emplace(key, i); !fresh) {
      rd.fail(cp, "the same configuration as configs[" + std::to_string(it->second) +
                      "] (B, H, H_kv, N, N_kv, d, causal, dtype, page_size, kv_lengths, gpu)");
    }
    const json& results = rd.at(cj, cp, "results");
    if (!results.is_array()) rd.fail(cp + ".results", "expected an array");
    for (std::size_t k = 0; k < results.size(); ++k) {
      VariantResult vr = read_result(rd, results[k], cp + ".results[" + std::to_string(k) + "]", v1,
                                     r.settings.fp8_prequantized);
      for (const auto& prev : cr.results) {
        if (prev.spec == vr.spec) rd.fail(cp, "row '" + to_string(vr.spec) + "' appears twice");
      }
      cr.results.push_back(std::move(vr));
    }
    r.configs.push_back(std::move(cr));
  }
  return r;
}

}  // namespace

RunResult from_json_text(const std::string& text, const std::string& source) {
  try {
    return read_document(text, source);
  } catch (const json::exception& e) {  // e.g. an optional key of the wrong type (json::value)
    throw ResultFileError(source + ": " + e.what());
  }
}

RunResult read_result_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ResultFileError(path + ": cannot open for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

}  // namespace fa::bench
