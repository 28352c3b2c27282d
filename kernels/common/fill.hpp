// Device-side generation of fresh random inputs and of NaN poison.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/problem.hpp"

namespace fa {

// Input distributions (--inputs; the element formulas: kernels/common/fill_sample.hpp):
//   normal    N(0, 1)
//   outliers  N(0, 1) + N(0, 100) * Bernoulli(0.001), the FP8 stress test of the FlashAttention-3
//             paper (one element in a thousand gets a std-10 outlier added)
//   uniform   uniform(-3, 3)
//   heavy     N(0, 1) * exp(N(0, 1)), heavy-tailed (log-normal scale)
enum class Inputs { normal, outliers, uniform, heavy };
// "normal, outliers, uniform, heavy": the accepted names, for error lines and help.
const char* inputs_names();
// The family named `name`; false if there is none.
bool parse_inputs(const std::string& name, Inputs* out);

// Fills `count` elements of `dtype` from `inputs`; element i depends only on (seed, i), so the
// host can regenerate or spot-check any element. Stream-ordered.
cudaError_t fill_normal(void* dst, std::int64_t count, DType dtype, std::uint64_t seed,
                        cudaStream_t stream, Inputs inputs = Inputs::normal);

// Writes NaN into every element (16-bit types) so that an element a kernel fails to write is
// caught by the finite check after the run.
cudaError_t poison_nan16(void* dst, std::int64_t count, cudaStream_t stream);
cudaError_t poison_nan32(float* dst, std::int64_t count, cudaStream_t stream);

}  // namespace fa
