#include "kernels/variant.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fa {

std::string to_string(Algorithm a) {
  switch (a) {
    case Algorithm::standard:
      return "standard";
    case Algorithm::fa1:
      return "fa1";
    case Algorithm::fa2:
      return "fa2";
    case Algorithm::fp8:
      return "fp8";
    case Algorithm::split_kv:
      return "split_kv";
  }
  return "?";
}

bool parse_algorithm(const std::string& s, Algorithm* out) {
  for (Algorithm a :
       {Algorithm::standard, Algorithm::fa1, Algorithm::fa2, Algorithm::fp8, Algorithm::split_kv}) {
    if (s == to_string(a)) {
      *out = a;
      return true;
    }
  }
  return false;
}

const char* to_string(Direction d) {
  return d == Direction::forward ? "forward" : "backward";
}

bool parse_direction(const std::string& s, Direction* out) {
  if (s == "forward" || s == "backward") {
    *out = s == "forward" ? Direction::forward : Direction::backward;
    return true;
  }
  return false;
}

std::string to_string(const KernelConfig& c) {
  std::string s = std::to_string(c.block_q) + "x" + std::to_string(c.block_kv);
  if (c.stages != 1) s += " s" + std::to_string(c.stages);
  if (c.warpgroups != 0) s += " wg" + std::to_string(c.warpgroups);
  if (c.cluster != std::array<int, 3>{1, 1, 1}) {
    s += " c" + std::to_string(c.cluster[0]) + "x" + std::to_string(c.cluster[1]) + "x" +
         std::to_string(c.cluster[2]);
  }
  return s;
}

std::string to_string(const OptionValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  const double x = std::get<double>(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

const OptionValue* RowSpec::option(const std::string& name) const {
  auto it = options.find(name);
  return it == options.end() ? nullptr : &it->second;
}

std::string to_string(const RowSpec& s) {
  std::string r = s.variant + " " + to_string(s.direction);
  if (s.kernel_config) r += " " + to_string(*s.kernel_config);
  for (const auto& [k, v] : s.options) r += " " + k + "=" + to_string(v);
  return r;
}

bool LaunchOptions::is(const std::string& name, const OptionValue& value) const {
  auto it = options.find(name);
  return it != options.end() && it->second == value;
}

std::vector<KernelConfig> VariantInfo::kernel_configs(int d) const {
  std::vector<KernelConfig> out;
  for (const Tiles& t : tile_options(d)) {
    KernelConfig c = pipeline;
    c.block_q = t.block_q;
    c.block_kv = t.block_kv;
    if (warpgroup_rows > 0) c.warpgroups = 1 + t.block_q / warpgroup_rows;
    out.push_back(c);
  }
  return out;
}

Tiles VariantInfo::default_tiles(int d) const {
  const auto options = tile_options(d);
  return options.empty() ? Tiles{} : options.front();
}

Tiles VariantInfo::default_tiles(const Shape& s) const {
  if (shape_default_tiles) {
    const Tiles t = shape_default_tiles(s);
    if (t.block_q != 0) return t;
  }
  return default_tiles(static_cast<int>(s.d));
}

const OptionDecl* VariantInfo::declared(const std::string& option) const {
  for (const auto& o : options) {
    if (o.name == option) return &o;
  }
  return nullptr;
}

bool VariantInfo::quantisation_timed(const OptionValues& values) const {
  if (quantisation != Quantisation::timed) return false;
  auto it = values.find(kOptionPrequantized);
  return it == values.end() || it->second != OptionValue{true};
}

bool VariantInfo::row_writes_lse(const OptionValues& values) const {
  if (!writes_lse) return false;
  auto it = values.find(kOptionStats);
  return it == values.end() || it->second != OptionValue{false};
}

bool VariantInfo::supports_head_dim(int d) const {
  return std::find(head_dims.begin(), head_dims.end(), d) != head_dims.end();
}

bool VariantInfo::supports_dtype(DType t) const {
  return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end();
}

std::string VariantInfo::unsupported_reason(const Shape& s) const {
  if (!supports_head_dim(static_cast<int>(s.d))) {
    return "unsupported: d=" + std::to_string(s.d) + " (" + name + " has d in {" + [&] {
      std::string r;
      for (int d : head_dims) r += (r.empty() ? "" : ", ") + std::to_string(d);
      return r;
    }() + "})";
  }
  if (!supports_dtype(s.dtype)) {
    return "unsupported: dtype " + std::string(to_string(s.dtype));
  }
  if (s.grouped() && !grouped_heads)
    return "unsupported: " + name + " takes as many K/V heads as query heads (--heads-kv)";
  if (!s.square() && !kv_length_apart)
    return "unsupported: " + name + " takes a K/V length equal to the query length (--kv-len)";
  if (s.paged() && !paged_kv)
    return "unsupported: " + name + " reads contiguous K/V, not pages (--page-size)";
  if (s.ragged() && !kv_lengths_per_sequence)
    return "unsupported: " + name + " takes one K/V length for the batch (--kv-lengths)";
  return shape_rule ? shape_rule(s) : "";
}

std::string VariantInfo::unsupported_row(const Shape& s, const RowSpec& row) const {
  if (std::string r = unsupported_reason(s); !r.empty()) return r;
  if (row.direction == Direction::backward &&
      (s.grouped() || !s.square() || s.paged() || s.ragged()))
    return "unsupported: " + name +
           "'s backward takes square multi-head attention only (no --heads-kv, --kv-len, "
           "--page-size or --kv-lengths)";
  const auto& bwd = backward_dims();
  if (row.direction == Direction::backward &&
      std::find(bwd.begin(), bwd.end(), static_cast<int>(s.d)) == bwd.end()) {
    std::string dims;
    for (std::size_t i = 0; i < bwd.size(); ++i)
      dims += (i == 0 ? "" : i + 1 == bwd.size() ? " and " : ", ") + std::to_string(bwd[i]);
    return "unsupported: " + name + "'s backward is checked here at d " + dims + " only";
  }
  return row_rule ? row_rule(s, row) : "";
}

std::string VariantInfo::unsupported_on_device(int major, int minor) const {
  if (max_compute_capability > 0 && major * 10 + minor > max_compute_capability) {
    return "unsupported on this GPU (compute capability " + std::to_string(major) + "." +
           std::to_string(minor) + "; " + name + " is built for " +
           std::to_string(max_compute_capability / 10) + "." +
           std::to_string(max_compute_capability % 10) + " only)";
  }
  if (major * 10 + minor >= min_compute_capability) return "";
  return "unsupported on this GPU (compute capability " + std::to_string(major) + "." +
         std::to_string(minor) + "; " + name + " needs " +
         std::to_string(min_compute_capability / 10) + "." +
         std::to_string(min_compute_capability % 10) + "+)";
}

}  // namespace fa
