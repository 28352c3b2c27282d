// The energy window's launches on a CUDA stream: batches of one row's (or one calibration
// kernel's) launch, an event after each, so the host knows how far the GPU has got.
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <functional>
#include <string>

#include "profiler/energy.hpp"

namespace fa::energy {

class StreamLaunchQueue final : public LaunchQueue {
 public:
  // `launch` enqueues one launch on `stream` and returns "" or its error.
  StreamLaunchQueue(cudaStream_t stream, std::function<std::string()> launch);
  ~StreamLaunchQueue() override;
  StreamLaunchQueue(const StreamLaunchQueue&) = delete;
  StreamLaunchQueue& operator=(const StreamLaunchQueue&) = delete;

  std::string enqueue(int launches) override;
  int in_flight() override;
  double finish() override;

 private:
  cudaStream_t stream_;
  std::function<std::string()> launch_;
  cudaEvent_t first_ = nullptr, last_ = nullptr;
  bool started_ = false;
  std::deque<cudaEvent_t> pending_;  // one per unfinished batch
  std::deque<cudaEvent_t> spare_;
};

}  // namespace fa::energy
