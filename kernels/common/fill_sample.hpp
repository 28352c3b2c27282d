// One element of an input family (kernels/common/fill.hpp: Inputs), from (seed, index) alone: the
// device fill and the CPU emulation of FP8 accuracy (tests/test_fp8_accuracy.cpp) draw the same
// distributions. (Host and device differ in the last bits of cos/sin.)
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/fill.hpp"

#if defined(__CUDACC__)
#define FA_FILL_HD __host__ __device__
#else
#define FA_FILL_HD
#endif

namespace fa {

// splitmix64: a counter-based generator, so any element can be produced independently.
FA_FILL_HD inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// cos(pi x) or sin(pi x): the device's cospif / sinpif, the host's libm at pi x.
enum class TrigPi { cos, sin };
FA_FILL_HD inline float fill_trig_pi(TrigPi f, float x) {
#if defined(__CUDA_ARCH__)
  return f == TrigPi::cos ? cospif(x) : sinpif(x);
#else
  const double a = 3.14159265358979323846 * x;
  return static_cast<float>(f == TrigPi::cos ? std::cos(a) : std::sin(a));
#endif
}

FA_FILL_HD inline float sample_input(std::uint64_t seed, std::uint64_t i, Inputs inputs) {
  const std::uint64_t r = splitmix64(seed ^ splitmix64(i));
  if (inputs == Inputs::uniform) {  // 24 bits -> [0, 1) -> [-3, 3)
    return static_cast<float>(r >> 40) * (6.0f / 16777216.0f) - 3.0f;
  }
  // Box-Muller on two 24-bit uniforms, u1 in (0, 1].
  const float u1 = (static_cast<float>(r >> 40) + 1.0f) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>((r >> 8) & 0xFFFFFFu) * (1.0f / 16777216.0f);
  const float radius = sqrtf(-2.0f * logf(u1));
  float z = radius * fill_trig_pi(TrigPi::cos, 2.0f * u2);
  if (inputs == Inputs::heavy) {  // the pair's second normal, independent of the first
    z *= expf(radius * fill_trig_pi(TrigPi::sin, 2.0f * u2));
  } else if (inputs == Inputs::outliers) {
    const std::uint64_t r2 = splitmix64(r ^ 0xA5A5A5A5A5A5A5A5ull);
    if ((r2 >> 40) < 16777u) {  // probability 16777 / 2^24 = 0.001
      const float v1 = (static_cast<float>((r2 >> 16) & 0xFFFFFFu) + 1.0f) * (1.0f / 16777216.0f);
      const float v2 = static_cast<float>(r2 & 0xFFFFu) * (1.0f / 65536.0f);
      z += 10.0f * sqrtf(-2.0f * logf(v1)) *
           fill_trig_pi(TrigPi::cos, 2.0f * v2);  // N(0, 100): std 10
    }
  }
  return z;
}

}  // namespace fa
