// The IO model: FLOPs and HBM bytes each algorithm moves, from the tile sizes its kernel uses.
// Pure C++, no GPU. Every byte term is listed by name so a reader (and `fa-bench --explain`
// later) can see where the total comes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/problem.hpp"
#include "kernels/registry.hpp"

namespace fa::model {

struct ByteTerm {
  std::string name;  // e.g. "K read (once per query block)"
  bool is_write = false;
  double bytes = 0;
};

struct IoModel {
  // FLOPs of the two matrix products as the kernel issues them (causal: whole tiles on and
  // below the diagonal; standard: cuBLAS computes the full N x N products even when causal).
  double flops_matrix = 0;
  // The field's convention, 4*B*H*N^2*d, halved for causal: compares with published figures.
  double flops_convention = 0;
  // Softmax and rescaling work on CUDA cores (approximate operation counts; see io_model.cpp).
  double flops_nonmatrix = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  // Each input read once, each output written once: no algorithm moves less.
  double bytes_compulsory = 0;
  // The asymptotic seed: standard Theta(N^2 + N d), FlashAttention Theta(N^2 d^2 / M) elements,
  // with M the shared memory per SM in elements; constants taken as 1.
  double bytes_asymptotic = 0;
  std::vector<ByteTerm> terms;

  double bytes() const { return bytes_read + bytes_written; }
  double arithmetic_intensity() const { return bytes() > 0 ? flops_matrix / bytes() : 0; }
};

// Sizes of the state FA1 keeps in HBM between K/V steps (kernels/fa1/fa1.cu keeps O in fp32,
// so rounding does not accumulate over N/Bc steps).
struct Fa1StateBytes {
  int o_element = 4;     // 0: same as the input element size
  int stat_element = 4;  // l and m are fp32
};

struct ModelOptions {
  Fa1StateBytes fa1;
  bool fp8_quantisation_timed = true;  // false with --fp8-prequantized
};

IoModel io_model(Algorithm algorithm, const Shape& shape, Tiles tiles,
                 std::int64_t smem_per_sm_bytes, ModelOptions options = {});

// K/V blocks the FA2 kernel visits for query block qb (causal stops at the diagonal).
std::int64_t kv_blocks_for_query_block(const Shape& shape, Tiles tiles, std::int64_t qb);

}  // namespace fa::model
