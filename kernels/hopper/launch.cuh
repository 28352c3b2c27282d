// The host's launch step of the sm_90a forwards (kernels/hopper/forward.cuh; fa3's and fp8's
// prepare_launch): checks of the encoded TMA descriptors, the shared-memory attribute, the grid
// of a plan (Plan: grid and epilogue), the dynamic grid's tile counter, and the enqueue closure
// that then launches with no host work.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/fault.hpp"
#include "kernels/common/launch.hpp"
#include "kernels/hopper/forward.cuh"
#include "kernels/hopper/persistent_grid.hpp"
#include "kernels/hopper/plan.hpp"
#include "kernels/hopper/prepared_launch.hpp"
#include "kernels/hopper/sm90_common.cuh"
#include "kernels/problem.hpp"

namespace fa::hopper {

// Whether CuTe's make_tma_copy encoded a descriptor. With NDEBUG it only prints when
// cuTensorMapEncodeTiled fails (its assert is compiled out) and leaves the descriptor zeroed: a
// kernel launched with it would wait on its full barriers forever.
template <typename Tma>
bool tma_encoded(const Tma& tma) {
  const auto* desc = tma.get_tma_descriptor();
  const auto* bytes = reinterpret_cast<const unsigned char*>(desc);
  for (std::size_t i = 0; i < sizeof(*desc); ++i) {
    if (bytes[i] != 0) return true;
  }
  return false;
}

// "" or why Q's, K's or V's descriptor in p was not encoded.
template <typename Params>
std::string check_inputs_encoded(const char* who, const Params& p) {
  if (tma_encoded(p.tma_q) && tma_encoded(p.tma_k) && tma_encoded(p.tma_v)) return "";
  return std::string(who) + ": TMA descriptor encoding failed (cuTensorMapEncodeTiled: see stderr)";
}

// A forward with no query block to compute (N = 0, or the fault that skips the last one of a
// single block): a launch that does nothing.
inline std::string no_launch(Enqueue* out) {
  *out = [](cudaStream_t) { return std::string(); };
  return "";
}

// The dynamic grid's tile counter (kTileCounterBytes) at `offset` in b's workspace; nullptr where
// the workspace has no room for it.
inline unsigned* tile_counter_at(const DeviceBuffers& b, std::size_t offset) {
  if (b.workspace == nullptr || b.workspace_bytes < offset + kTileCounterBytes) return nullptr;
  return reinterpret_cast<unsigned*>(static_cast<unsigned char*>(b.workspace) + offset);
}

// The parameters every forward takes (ForwardParams, forward.cuh) for a launch of q_blocks query
// blocks per head on b, from the encoded Q, K, V descriptors; the launch step sets the rest.
template <typename Traits>
ForwardParams<Traits> forward_params(const typename Traits::TmaQ& tma_q,
                                     const typename Traits::TmaK& tma_k,
                                     const typename Traits::TmaV& tma_v, const Shape& s,
                                     const DeviceBuffers& b, const FaultInjection& fault,
                                     std::int64_t q_blocks) {
  return ForwardParams<Traits>{tma_q,
                               tma_k,
                               tma_v,
                               b.o,
                               b.lse,
                               static_cast<int>(s.N),
                               static_cast<int>(s.heads_total()),
                               static_cast<int>(s.group()),
                               softmax_scale_log2(s, fault),
                               static_cast<int>(q_blocks),
                               1,
                               fault,
                               {},
                               nullptr};
}

// What the launch step takes besides the kernel and its parameters.
struct ForwardLaunch {
  const char* who;                 // the variant, for messages ("fa3", "fp8")
  std::int64_t kv_bytes_per_head;  // K and V of one head: the persistent grids' sections ...
  std::int64_t l2_share;           // ... take 1/l2_share of the L2 (persistent_shape)
  void* o;                         // O: the TMA-store epilogue's descriptor
  unsigned* tile_counter;          // the dynamic grid's (tile_counter_at), or nullptr
};

// Readies a launch of `kernel` (a forward on Traits) with parameters p on `plan`: the dynamic
// shared memory attribute, O's TMA descriptor (TMA-store epilogue), the grid (a block per tile of
// p.num_q_blocks x p.heads; persistent: one per SM, p.section_heads from the L2), the dynamic
// grid's counter; *out enqueues the launch alone. "" or a one-line reason.
template <typename Traits, typename Kernel, typename Params>
std::string prepare_forward(Kernel kernel, Plan plan, Params p, const ForwardLaunch& l,
                            Enqueue* out) {
  const std::string who = l.who;
  const bool tma_store = plan.epilogue == Epilogue::tma_store;
  const int smem_bytes = tma_store ? Traits::kSmemBytesO : Traits::kSmemBytes;
  // Per device and per kernel: the attribute belongs to one kernel in one context. (A static in
  // the launcher would be shared by every schedule's kernel, which all have one type: only the
  // first kernel launched got its attribute: "invalid argument" on the others.)
  const cudaError_t st = smem_attribute_once(kernel, smem_bytes);
  if (st != cudaSuccess) return who + ": cudaFuncSetAttribute: " + cudaGetErrorString(st);
  if (tma_store) {
    p.tma_o = Traits::tma_o(l.o, p.N, p.heads);
    if (!tma_encoded(p.tma_o))
      return who + ": TMA descriptor encoding failed for O (cuTensorMapEncodeTiled: see stderr)";
  }
  dim3 grid(static_cast<unsigned>(p.num_q_blocks), static_cast<unsigned>(p.heads));
  if (plan.grid != Grid::tiles) {
    PersistentShape shape;
    const std::string e =
        persistent_shape(l.who, static_cast<std::int64_t>(p.num_q_blocks) * p.heads, p.heads,
                         l.kv_bytes_per_head, l.l2_share, shape);
    if (!e.empty()) return e;
    grid = dim3(shape.blocks);
    p.section_heads = shape.section_heads;
  }
  if (plan.grid == Grid::dynamic) {
    if (l.tile_counter == nullptr)
      return who + ": the dynamic grid needs its tile counter (workspace)";
    p.tile_counter = l.tile_counter;
  }
  const char* name = l.who;
  *out = [kernel, grid, smem_bytes, p, name](cudaStream_t stream) {
    kernel<<<grid, Traits::kThreads, smem_bytes, stream>>>(p);
    return launch_status(name);
  };
  return "";
}

}  // namespace fa::hopper
