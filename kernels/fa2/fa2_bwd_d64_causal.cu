// The fa2 backward kernels at d=64, causal (kernels/fa2/fa2_bwd_kernels.cuh).
#define FA2_BWD_INSTANTIATE
#include "kernels/fa2/fa2_bwd_kernels.cuh"

namespace fa::fa2_bwd {
template std::string run<64, true>(const Shape&, const Tiles&, const BackwardBuffers&, cudaStream_t,
                                   const Fa2BwdOptions&, const FaultInjection&,
                                   const Fa2BwdPhaseHooks&);
}  // namespace fa::fa2_bwd
