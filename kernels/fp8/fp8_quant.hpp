// The FP8 variants' quantisation pass (kernels/fp8/fp8_quant.cu) and the workspace it fills; read
// by both attention kernels (fp8.cu: mma.sync, sm_89; fp8_sm90_kernel.cuh: wgmma, sm_90a).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/fp8/fp8_layout.hpp"
#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa::fp8 {

// Granularity of the quantisation scales (option fp8_scale, --fp8-scale):
//   block  each block of rows has its own amax and scale (Q: 64 rows, K and V: 128 keys), found
//          and applied in one pass over the inputs;
//   head   one amax per (batch, head) and tensor: an amax pass, then the same quantise pass.
// The default is the one with the lower error in the CPU emulation (tests/test_fp8_accuracy.cpp
// asserts it; table in docs/accuracy.md).
enum class Scale { block, head };
constexpr Scale kDefaultScale = Scale::block;
const char* scale_name(Scale s);
// The granularity a row with these option values asks for.
Scale scale_option(const OptionValues& values);
// The quantisation of this pass as data (rotated Q and K; scale blocks of 64 Q rows and 128 keys,
// or one per head): what the verification models for the fp8 variants.
Fp8Scheme scheme(const OptionValues& values);

// The workspace: E4M3 copies and their amax per scale block (with Scale::head every block of a
// head holds the head's amax, so the attention kernels read one layout).
struct Workspace {
  std::uint8_t* q8;   // [B*H][N][d], rotated (H S), row-major (columns permuted: fp8_quant.cu)
  std::uint8_t* k8;   // [B*H][N][d], rotated
  std::uint8_t* vt8;  // [B*H][d][Npad], keys permuted inside groups of 16 (permuted_key)
  float* amax_q;      // [B*H][q_scale_blocks(N)]
  float* amax_k;      // [B*H][kv_scale_blocks(N)]
  float* amax_v;      // [B*H][kv_scale_blocks(N)]
  float* amax_head;   // [3][B*H] (Scale::head only)
};

std::size_t workspace_bytes(const Shape& s);
Workspace carve(const Shape& s, void* base);

// Enqueues the quantisation of b.q, b.k, b.v (bf16, d 64 or 128) into the workspace; "" or a
// one-line reason.
std::string quantise(const Shape& s, const DeviceBuffers& b, Scale scale, cudaStream_t stream);

// What both FP8 launchers share: the workspace, the options (prequantized: quantise once in
// prepare(), so run() times the attention alone; fp8_scale: block | head) and the timed step.
class QuantisingLauncher : public Launcher {
 public:
  explicit QuantisingLauncher(const LaunchOptions& o);
  std::size_t workspace_bytes(const Shape& s, const Tiles&) const override {
    return fp8::workspace_bytes(s);
  }
  std::string prepare(const Shape& s, const Tiles&, const DeviceBuffers& b,
                      cudaStream_t stream) override;

 protected:
  // run()'s first step: the quantisation (a phase of its own), unless prequantized.
  std::string quantise_step(const Shape& s, const DeviceBuffers& b, cudaStream_t stream);

  bool prequantized_ = false;
  Scale scale_ = kDefaultScale;
};

}  // namespace fa::fp8
