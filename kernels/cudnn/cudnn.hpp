// cuDNN's fused scaled-dot-product attention, the vendor's best, as a peer variant, built with
// cudnn-frontend's graph API (the C++ API PyTorch's cuDNN attention uses).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/variant.hpp"

namespace fa {

// The cuDNN peer: the bf16/fp16 forward (option "stats": write the log-sum-exp, default, or not:
// the inference forward) and its backward (dQ, dK, dV from Q, K, V, O, dO and the lse), through
// cudnn-frontend's sdpa and sdpa_backward nodes. libcudnn.so.9 is loaded at run time; when it is
// missing, too old or refuses the graph, run() says so in one line.
// `fp8`: the E4M3 forward (sdpa_fp8 node; bf16 inputs quantised per tensor in prepare(), O
// dequantised to bf16).
std::unique_ptr<Launcher> make_cudnn_launcher(const LaunchOptions& options, bool fp8 = false);

// "cuDNN 9.14.0 (libcudnn.so.9), cudnn-frontend 1.16.0" or why cuDNN cannot be used; loads the
// library on first call.
std::string cudnn_library_status();

// Shapes the peer does not run: "" or the reason (the row says unsupported). Also every shape
// when fa-bench was built without the cudnn-frontend headers.
std::string cudnn_shape_rule(const Shape& s);

// How many cuDNN plans this process has built (each graph and shape once: the plan cache).
std::size_t cudnn_plans_built();

}  // namespace fa
