// cuDNN's fused scaled-dot-product attention, the vendor's best, as a peer variant.
#pragma once

#include <memory>
#include <string>

#include "kernels/variant.hpp"

namespace fa {

// bf16/fp16 forward through the cuDNN graph (backend) API. libcudnn.so.9 is loaded at run time;
// when it is missing, too old or rejects the graph, run() says so in one line.
// `fp8`: the E4M3 graph (bf16 inputs quantised per tensor in prepare(), O dequantised to bf16).
std::unique_ptr<Launcher> make_cudnn_launcher(bool fp8 = false);

// "cuDNN 9.14.0 (libcudnn.so.9)" or why cuDNN cannot be used; loads the library on first call.
std::string cudnn_library_status();

// Shapes cuDNN's fused attention rejects: "" or the reason.
std::string cudnn_shape_rule(const Shape& s);

}  // namespace fa
