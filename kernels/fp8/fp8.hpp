#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/fp8/fp8_tuning.hpp"
#include "kernels/variant.hpp"

namespace fa {
// fp8: the sm_90a kernel (wgmma, TMA, warp specialisation: kernels/fp8/fp8_sm90_kernel.cuh);
// fp8-sm89: the portable mma.sync kernel (sm_89 and later: kernels/fp8/fp8.cu). Options of both:
// prequantized true: quantise once in prepare(), so run() times the attention kernel alone;
// fp8_scale block | head; o.fault: verification tests only.
// fp8 (sm_90a) also declares option kOptionFp8Schedule, one of kFp8Schedules: which grid and
// epilogue its kernel runs (kernels/fp8/fp8_sm90_launch.hpp, Schedule); its default depends on the
// shape (fp8_default_schedule).
inline constexpr const char* kFp8Schedules[] = {"tiles", "persistent-tma-store",
                                                "dynamic-tma-store"};
// fp8's default schedule for a shape: the fastest measured (fp8::tuning::sm90_default_schedule).
inline OptionValue fp8_default_schedule(const Shape& s) {
  return std::string(fp8::tuning::sm90_default_schedule(s));
}
std::vector<Tiles> fp8_tile_options(int d);  // default first
std::unique_ptr<Launcher> make_fp8_launcher(const LaunchOptions& o = {});
std::string fp8_build_status();
std::string fp8_shape_rule(const Shape& s);
// "" when the row's schedule is compiled for its tile (the causal 192-row tile has no persistent
// grid).
std::string fp8_row_rule(const Shape& s, const RowSpec& row);
std::vector<Tiles> fp8_sm89_tile_options(int d);  // default first
std::unique_ptr<Launcher> make_fp8_sm89_launcher(const LaunchOptions& o = {});
}  // namespace fa
