// fa3's backward pass (kernels/fa3/fa3_bwd_kernel.cuh: the algorithm and the schedule): its
// tuning numbers, its tiles, and the launches fa3's launcher makes for backward rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/fault.hpp"
#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa {
namespace fa3_bwd {

// Keys per thread block: two consumer warpgroups of 64 keys, whose dK and dV (64 x d fp32 each)
// fill most of their 240 registers at d = 128.
inline constexpr int kBlockKv = 128;
// Query blocks (Q with lse, dO with D) in flight.
inline constexpr int kQueryStages = 2;
// setmaxnreg: the producer's registers pay for the consumers' (24 * 128 + 240 * 256 <= 65536).
inline constexpr int kProducerRegs = 24;
inline constexpr int kConsumerRegs = 240;
// Query rows per block: at d = 128, S^T and dP^T (32 registers each), dK, dV (64 each) and dQ's
// share (32) fill the consumers' 240 registers. At d = 64, 128 rows measured within 3% of 64
// (faster non-causal, slower causal): 64, one kernel for both head dims.
inline constexpr int kBlockQ = 64;
// Up to this head dim, block i+1's S^T and dP^T are issued while block i's dK still runs: +2%
// causal at d = 64 (H200). At d = 128 the accumulators in flight exceed 240 registers and ptxas
// serializes the wgmmas (C7512).
inline constexpr int kIssueAheadMaxHeadDim = 64;

// The workspace: lse log2(e) and D per row padded to whole query blocks, then the fp32 dQ
// accumulator; each part 256-byte aligned (TMA bulk copies need 16).
struct WorkspaceLayout {
  std::size_t delta_offset = 0, dq_offset = 0, bytes = 0;
};
inline WorkspaceLayout workspace_layout(const Shape& s, int block_q) {
  const std::size_t rows = static_cast<std::size_t>(s.heads_total()) *
                           static_cast<std::size_t>((s.N + block_q - 1) / block_q * block_q);
  auto up = [](std::size_t b) { return (b + 255) / 256 * 256; };
  WorkspaceLayout w;
  w.delta_offset = up(rows * sizeof(float));
  w.dq_offset = 2 * w.delta_offset;
  w.bytes = w.dq_offset + up(rows * static_cast<std::size_t>(s.d) * sizeof(float));
  return w;
}

}  // namespace fa3_bwd

// The compiled backward tiles at head dim d (block_q x kBlockKv); empty where none is compiled.
inline std::vector<Tiles> fa3_backward_tile_options(int d) {
  if (d != 64 && d != 128) return {};
  return {Tiles{fa3_bwd::kBlockQ, fa3_bwd::kBlockKv}};
}

// The backward launches of one fa3 launcher: the TMA descriptors are encoded once per (shape,
// tiles, buffers), as the forward's (kernels/hopper/prepared_launch.hpp).
class Fa3Backward {
 public:
  explicit Fa3Backward(const FaultInjection& fault);
  ~Fa3Backward();
  // lse log2(e) and D per padded row, and the fp32 dQ accumulator.
  std::size_t workspace_bytes(const Shape& s, const Tiles& t) const;
  std::string prepare(const Shape& s, const Tiles& t, const BackwardBuffers& b);
  std::string run(const Shape& s, const Tiles& t, const BackwardBuffers& b, cudaStream_t stream);

 private:
  struct Prepared;
  FaultInjection fault_;
  std::unique_ptr<Prepared> prepared_;
};

}  // namespace fa
