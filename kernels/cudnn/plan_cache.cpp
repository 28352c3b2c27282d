#include "kernels/cudnn/plan_cache.hpp"

#include <variant>

namespace fa::cudnn {

const char* to_string(GraphKind k) {
  switch (k) {
    case GraphKind::forward:
      return "forward";
    case GraphKind::forward_fp8:
      return "forward-fp8";
    case GraphKind::backward:
      return "backward";
  }
  return "?";
}

std::string to_string(const PlanKey& k) {
  return std::string(to_string(k.kind)) + " " +
         (k.kind == GraphKind::forward_fp8 ? std::string("e4m3")
                                           : std::string(fa::to_string(k.dtype))) +
         " B=" + std::to_string(k.B) + " H=" + std::to_string(k.H) +
         (k.H_kv != k.H ? " H_kv=" + std::to_string(k.H_kv) : "") + " N=" + std::to_string(k.N) +
         (k.N_kv != k.N ? " N_kv=" + std::to_string(k.N_kv) : "") +
         (k.page_size > 0 ? " page=" + std::to_string(k.page_size) : "") +
         (k.ragged ? " ragged" : "") + " d=" + std::to_string(k.d) + (k.causal ? " causal" : "") +
         (k.kind == GraphKind::forward ? (k.stats ? " stats" : " no-stats") : "") + " device " +
         std::to_string(k.device);
}

PlanKey plan_key(GraphKind kind, const Shape& s, bool stats, int device) {
  PlanKey k;
  k.kind = kind;
  k.device = device;
  k.B = s.B;
  k.H = s.H;
  k.N = s.N;
  k.d = s.d;
  k.H_kv = s.kv_heads();
  k.N_kv = s.kv_len();
  k.page_size = s.page_size;
  k.ragged = s.ragged();
  k.causal = s.causal;
  k.dtype = kind == GraphKind::forward_fp8 ? DType::bf16 : s.dtype;  // FP8: E4M3 in any case
  k.stats = kind == GraphKind::forward ? stats : kind == GraphKind::backward;
  return k;
}

bool stats_option(const OptionValues& options) {
  auto it = options.find(kOptionStats);
  if (it == options.end()) return true;
  const bool* b = std::get_if<bool>(&it->second);
  return b ? *b : true;
}

}  // namespace fa::cudnn
