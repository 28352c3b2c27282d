// GPU timing primitives: CUDA events around the region, and an L2 flush before cold samples.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace fa {

// Evicts the L2 by reading a buffer twice its size: afterwards the L2 holds only clean lines of
// that buffer, so nothing of the previous work is cached or waiting to be written back.
class L2Flusher {
 public:
  explicit L2Flusher(std::size_t l2_bytes);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(cudaStream_t stream);

 private:
  void* buffer_ = nullptr;
  std::size_t bytes_ = 0;
};

// One start/stop event pair. stop_ms() waits for the stop event.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t stream);
  void stop(cudaStream_t stream);
  float elapsed_ms();

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace fa
