// Host-side pieces every tiled kernel's launcher (fa1, fa2, fp8) repeats: the dispatch from
// run-time values (head dim, tiles, causal, dtype) to a template instantiation of a TileList
// (kernels/common/tile_list.hpp), the softmax scale with the fault hooks folded in, the launch
// check.
//
//   with_causal(s.causal, [&](auto causal) { ... decltype(causal)::value ... })
//   with_dtype(s.dtype, [&](auto type) { using T = typename decltype(type)::type; ... })
//   dispatch_tiles<Fa2Tiles>("fa2", s, t, [&](auto shape, auto causal, auto type) { ... })
//     Fa2Tiles::dispatch, with_causal and with_dtype in one: the lambda's string, or
//     "fa2: no kernel compiled ..."
//
// Only the shapes named in a list are instantiated, so a separate list (e.g. the default tiles
// only) keeps the FAULTS instantiations of the verification tests few.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "kernels/common/fault.hpp"
#include "kernels/common/tile_list.hpp"
#include "kernels/problem.hpp"
#include "kernels/registry.hpp"

namespace fa {

// f(std::true_type{}) or f(std::false_type{}): a run-time flag as a template argument.
template <typename F>
std::string with_causal(bool causal, F&& f) {
  return causal ? f(std::true_type{}) : f(std::false_type{});
}

template <typename T>
struct TypeTag {
  using type = T;
};

// f(TypeTag<__nv_bfloat16>{}) or f(TypeTag<__half>{}) for the 16-bit input types.
template <typename F>
std::string with_dtype(DType dtype, F&& f) {
  return dtype == DType::bf16 ? f(TypeTag<__nv_bfloat16>{}) : f(TypeTag<__half>{});
}

// f(shape, causal, type) for the listed tile shape matching (s.d, t), with s.causal and s.dtype
// (16-bit inputs) as template arguments: the whole run-time -> instantiation step of fa1 and fa2.
template <typename List, typename F>
std::string dispatch_tiles(const char* variant, const Shape& s, const Tiles& t, F&& f) {
  return List::dispatch(variant, s.d, t, [&](auto shape) {
    return with_causal(s.causal, [&](auto causal) {
      return with_dtype(s.dtype, [&](auto type) { return f(shape, causal, type); });
    });
  });
}

// The softmax scale times log2(e) (the kernels take exponentials as exp2), with the fault hooks
// scale_factor and natural_exp applied (kernels/common/fault.hpp).
inline float softmax_scale_log2(const Shape& s, const FaultInjection& fault) {
  return static_cast<float>(s.scale() * 1.4426950408889634 * fault.scale_multiplier());
}

// "" after a good launch, else "<variant> launch: <CUDA error>".
inline std::string launch_status(const char* variant) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return std::string(variant) + " launch: " + cudaGetErrorString(e);
  }
  return "";
}

}  // namespace fa
