#include "bench/plan.hpp"

namespace fa::bench {

std::vector<Shape> make_plan(const Options& o) {
  std::vector<bool> causal;
  if (o.causal != CausalMode::on) causal.push_back(false);
  if (o.causal != CausalMode::off) causal.push_back(true);
  std::vector<Shape> plan;
  for (auto N : o.N) {
    for (auto d : o.d) {
      for (bool c : causal) {
        Shape s;
        s.N = N;
        s.d = d;
        s.B = o.batch.value_or(default_batch(N));
        s.H = o.heads.value_or(default_heads(d));
        s.causal = c;
        s.dtype = o.dtype;
        plan.push_back(s);
      }
    }
  }
  return plan;
}

}  // namespace fa::bench
