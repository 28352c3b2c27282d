#include "profiler/timer.hpp"

#include "kernels/common/cuda_check.hpp"

namespace fa {

L2Flusher::L2Flusher(std::size_t l2_bytes) : bytes_(2 * l2_bytes) {
  if (bytes_ > 0) FA_CUDA_CHECK(cudaMalloc(&buffer_, bytes_));
}

L2Flusher::~L2Flusher() {
  if (buffer_) cudaFree(buffer_);
}

void L2Flusher::flush(cudaStream_t stream) {
  if (!buffer_) return;
  value_ ^= 1;  // a different value each time, so no write can be elided
  FA_CUDA_CHECK(cudaMemsetAsync(buffer_, value_, bytes_, stream));
}

EventTimer::EventTimer() {
  FA_CUDA_CHECK(cudaEventCreate(&start_));
  FA_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void EventTimer::start(cudaStream_t stream) { FA_CUDA_CHECK(cudaEventRecord(start_, stream)); }
void EventTimer::stop(cudaStream_t stream) { FA_CUDA_CHECK(cudaEventRecord(stop_, stream)); }

float EventTimer::elapsed_ms() {
  FA_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  FA_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace fa
