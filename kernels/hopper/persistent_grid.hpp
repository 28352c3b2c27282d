// Host side of the sm_90a kernels' persistent grids (fa3, fp8; kernels/hopper/tile_scheduler.cuh's
// TileList): how many thread blocks, and how many heads a section of the tile list holds.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/per_device.hpp"

namespace fa::hopper {

// The device facts the persistent grids need, read once per device, not on every launch.
struct DeviceFacts {
  cudaError_t status = cudaErrorInvalidDevice;
  int sms = 0;
  int l2_bytes = 0;
};
inline DeviceFacts device_facts() {
  static PerDevice<DeviceFacts> facts;
  return facts.get([] {
    DeviceFacts f;
    int device = 0;
    f.status = cudaGetDevice(&device);
    if (f.status == cudaSuccess)
      f.status = cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device);
    if (f.status == cudaSuccess)
      f.status = cudaDeviceGetAttribute(&f.l2_bytes, cudaDevAttrL2CacheSize, device);
    return f;
  });
}

// A persistent grid's shape: one thread block per SM (fewer when there are fewer tiles), and the
// heads per section of the tile list: as many as have their K and V (kv_bytes_per_head each) in
// 1/l2_share of the L2, at least one. "" or a one-line reason (prefixed with `who`).
struct PersistentShape {
  unsigned blocks = 0;
  int section_heads = 1;
};
inline std::string persistent_shape(const char* who, std::int64_t tiles, int heads,
                                    std::int64_t kv_bytes_per_head, std::int64_t l2_share,
                                    PersistentShape& out) {
  const DeviceFacts facts = device_facts();
  if (facts.status != cudaSuccess)
    return std::string(who) +
           ": cannot read the SM count and L2 size: " + cudaGetErrorString(facts.status);
  if (tiles > INT_MAX) return std::string(who) + ": too many tiles for the persistent grid";
  out.blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, facts.sms));
  out.section_heads = static_cast<int>(std::clamp<std::int64_t>(
      facts.l2_bytes / l2_share / std::max<std::int64_t>(kv_bytes_per_head, 1), 1, heads));
  return "";
}

}  // namespace fa::hopper
