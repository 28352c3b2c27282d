// A kernel launch made ready ahead of its run. The sm_90a kernels (fa3, fp8) take TMA descriptors
// that the host encodes (CuTe's make_tma_copy: cuTensorMapEncodeTiled), which Nsight Compute's
// range replay refuses to capture and which costs host time before every launch. Their launchers
// encode in prepare(), once per key, and run() only enqueues the kernel; a run() whose key was not
// prepared (a changed buffer, a caller that skips prepare) prepares first.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa::hopper {

// Enqueues one prepared launch on a stream: "" or a one-line reason.
using Enqueue = std::function<std::string(cudaStream_t)>;

// What a prepared launch was made for. A descriptor holds a global address and the shape's
// extents, so any changed buffer or shape needs a new one; the grid and the shared-memory
// attribute belong to the device. The schedule and the fault injection are the launcher's own,
// fixed when it is made.
struct LaunchKey {
  Shape shape;
  Tiles tiles;
  DeviceBuffers buffers;
  int device = -1;
  BackwardBuffers backward{};  // a backward launch's buffers (buffers unset)

  bool operator==(const LaunchKey& o) const {
    const Shape &a = shape, &b = o.shape;
    const DeviceBuffers &x = buffers, &y = o.buffers;
    return a.B == b.B && a.H == b.H && a.N == b.N && a.d == b.d && a.causal == b.causal &&
           a.dtype == b.dtype && tiles == o.tiles && x.q == y.q && x.k == y.k && x.v == y.v &&
           x.o == y.o && x.lse == y.lse && x.workspace == y.workspace &&
           x.workspace_bytes == y.workspace_bytes && device == o.device &&
           same_backward(backward, o.backward);
  }
  static bool same_backward(const BackwardBuffers& x, const BackwardBuffers& y) {
    return x.q == y.q && x.k == y.k && x.v == y.v && x.o == y.o && x.d_o == y.d_o &&
           x.lse == y.lse && x.dq == y.dq && x.dk == y.dk && x.dv == y.dv &&
           x.workspace == y.workspace && x.workspace_bytes == y.workspace_bytes;
  }
  bool operator!=(const LaunchKey& o) const { return !(*this == o); }
};

// The key of a launch on the calling thread's current device.
inline LaunchKey launch_key(const Shape& s, const Tiles& t, const DeviceBuffers& b) {
  LaunchKey key{s, t, b, -1};
  if (cudaGetDevice(&key.device) != cudaSuccess) key.device = -1;
  return key;
}

// The key of a backward launch on the calling thread's current device.
inline LaunchKey backward_launch_key(const Shape& s, const Tiles& t, const BackwardBuffers& b) {
  LaunchKey key = launch_key(s, t, DeviceBuffers{});
  key.backward = b;
  return key;
}

// How many launches this process has prepared (descriptors encoded): the tests check that run()
// after prepare() prepares none.
inline std::atomic<std::int64_t>& launches_prepared() {
  static std::atomic<std::int64_t> count{0};
  return count;
}

// One launcher's prepared launch: the last key it was prepared for and its enqueue.
class PreparedLaunch {
 public:
  // make(Enqueue*) does the host work (descriptors, grid, attributes) and returns "" or why not;
  // called only when `key` differs from the prepared one.
  template <typename Make>
  std::string prepare(const LaunchKey& key, Make&& make) {
    if (key_ && *key_ == key) return "";
    key_.reset();
    Enqueue enqueue;
    launches_prepared().fetch_add(1, std::memory_order_relaxed);
    if (std::string e = make(&enqueue); !e.empty()) return e;
    if (!enqueue) return "no launch prepared";
    enqueue_ = std::move(enqueue);
    key_ = key;
    return "";
  }

  // Enqueues the launch prepared for `key`, preparing it first when it was not.
  template <typename Make>
  std::string run(const LaunchKey& key, Make&& make, cudaStream_t stream) {
    if (std::string e = prepare(key, std::forward<Make>(make)); !e.empty()) return e;
    return enqueue_(stream);
  }

 private:
  std::optional<LaunchKey> key_;
  Enqueue enqueue_;
};

}  // namespace fa::hopper
