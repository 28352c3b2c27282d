// fa3 backward: the dispatch to the kernels (kernels/fa3/fa3_bwd_kernel.cuh; one head dim per
// file: fa3_bwd_d64.cu, fa3_bwd_d128.cu) and the prepared launches fa3's launcher runs.
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "kernels/common/launch.hpp"
#include "kernels/fa3/fa3_bwd.hpp"
#include "kernels/hopper/prepared_launch.hpp"

namespace fa {
namespace fa3_bwd {

template <int D, int BR, bool CAUSAL, typename T, bool FAULTS>
std::string prepare_launch(const Shape& s, const BackwardBuffers& b, const FaultInjection& fault,
                           hopper::Enqueue* out);

}  // namespace fa3_bwd

struct Fa3Backward::Prepared {
  hopper::PreparedLaunch launch;
};

Fa3Backward::Fa3Backward(const FaultInjection& fault)
    : fault_(fault), prepared_(std::make_unique<Prepared>()) {}
Fa3Backward::~Fa3Backward() = default;

std::size_t Fa3Backward::workspace_bytes(const Shape& s, const Tiles& t) const {
  return t.block_q > 0 ? fa3_bwd::workspace_layout(s, t.block_q).bytes : 0;
}

namespace {

// The launch prepared by the instantiation for (d, tiles, causal, dtype, faults).
std::string encode(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                   const FaultInjection& fault, hopper::Enqueue* out) {
  auto launch = [&](auto d) -> std::string {
    return with_causal(s.causal, [&](auto causal) {
      return with_dtype(s.dtype, [&](auto type) -> std::string {
        constexpr int kD = decltype(d)::value, kBr = fa3_bwd::kBlockQ;
        constexpr bool kCausal = decltype(causal)::value;
        using T = typename decltype(type)::type;
        if (!fault.any())
          return fa3_bwd::prepare_launch<kD, kBr, kCausal, T, false>(s, b, fault, out);
        if constexpr (std::is_same_v<T, __nv_bfloat16>)
          return fa3_bwd::prepare_launch<kD, kBr, kCausal, T, true>(s, b, fault, out);
        return "fa3 backward: fault injection is compiled for bf16 only";
      });
    });
  };
  if (t.block_q == fa3_bwd::kBlockQ && t.block_kv == fa3_bwd::kBlockKv) {
    if (s.d == 64) return launch(std::integral_constant<int, 64>{});
    if (s.d == 128) return launch(std::integral_constant<int, 128>{});
  }
  return "fa3 backward: no kernel compiled for d=" + std::to_string(s.d) + " tiles " +
         std::to_string(t.block_q) + "x" + std::to_string(t.block_kv);
}

}  // namespace

std::string Fa3Backward::prepare(const Shape& s, const Tiles& t, const BackwardBuffers& b) {
  return prepared_->launch.prepare(hopper::backward_launch_key(s, t, b), [&](hopper::Enqueue* out) {
    return encode(s, t, b, fault_, out);
  });
}

std::string Fa3Backward::run(const Shape& s, const Tiles& t, const BackwardBuffers& b,
                             cudaStream_t stream) {
  return prepared_->launch.run(
      hopper::backward_launch_key(s, t, b),
      [&](hopper::Enqueue* out) { return encode(s, t, b, fault_, out); }, stream);
}

}  // namespace fa
