#include "profiler/energy_queue.hpp"

#include "kernels/common/cuda_check.hpp"

namespace fa::energy {

StreamLaunchQueue::StreamLaunchQueue(cudaStream_t stream, std::function<std::string()> launch)
    : stream_(stream), launch_(std::move(launch)) {
  FA_CUDA_CHECK(cudaEventCreate(&first_));
  FA_CUDA_CHECK(cudaEventCreate(&last_));
}

StreamLaunchQueue::~StreamLaunchQueue() {
  cudaStreamSynchronize(stream_);
  for (cudaEvent_t e : pending_) cudaEventDestroy(e);
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  cudaEventDestroy(first_);
  cudaEventDestroy(last_);
}

std::string StreamLaunchQueue::enqueue(int launches) {
  if (!started_) {
    FA_CUDA_CHECK(cudaEventRecord(first_, stream_));
    started_ = true;
  }
  for (int i = 0; i < launches; ++i) {
    if (std::string e = launch_(); !e.empty()) return e;
  }
  cudaEvent_t done = nullptr;
  if (spare_.empty()) {
    // Timing off: these events only say whether a batch has finished.
    FA_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = spare_.front();
    spare_.pop_front();
  }
  FA_CUDA_CHECK(cudaEventRecord(done, stream_));
  pending_.push_back(done);
  return "";
}

int StreamLaunchQueue::in_flight() {
  while (!pending_.empty()) {
    const cudaError_t e = cudaEventQuery(pending_.front());
    if (e == cudaErrorNotReady) break;
    FA_CUDA_CHECK(e);
    spare_.push_back(pending_.front());
    pending_.pop_front();
  }
  return static_cast<int>(pending_.size());
}

double StreamLaunchQueue::finish() {
  if (!started_) return 0;
  FA_CUDA_CHECK(cudaEventRecord(last_, stream_));
  FA_CUDA_CHECK(cudaEventSynchronize(last_));
  in_flight();
  float ms = 0;
  FA_CUDA_CHECK(cudaEventElapsedTime(&ms, first_, last_));
  return ms * 1e-3;
}

}  // namespace fa::energy
