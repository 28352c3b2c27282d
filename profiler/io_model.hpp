// The IO model: FLOPs and HBM bytes each algorithm moves, from the tile sizes its kernel uses.
// Pure C++, no GPU. Every byte term is listed by name so a reader (and `fa-bench --explain`
// later) can see where the total comes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

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
  // With a K/V length apart, 4*B*H*N*N_kv*d, causal's N x N part halved (H: the query heads).
  double flops_convention = 0;
  // Softmax and rescaling work on CUDA cores (approximate operation counts; see io_model.cpp).
  double flops_nonmatrix = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  // Each input read once, each output written once: no algorithm moves less.
  double bytes_compulsory = 0;
  // The seed's law. Standard: N^2 + N d elements per head (constant 1). FlashAttention: the
  // paper's Theta(N^2 d^2 / M) with its own constants: tiles of B = M / (4 d) rows (its choice
  // Bc = M/4d), so the re-read operands (K and V for the Q-outer order, Q and the O state for the
  // K/V-outer one, 2 N d elements a pass) cross HBM N / B times: 8 N^2 d^2 / M elements per head,
  // with M = onchip_budget_bytes, the shared memory the kernel's tiles really use. Our kernels
  // keep Br fixed as d grows (docs/io-model.md), so their tile model grows with d, not d^2.
  double bytes_asymptotic = 0;
  // M of the law above: the shared memory one thread block's tiles occupy (0: not tiled).
  double onchip_budget_bytes = 0;
  std::vector<ByteTerm> terms;
  // The L2 view (backward fa2; 0 elsewhere): the DRAM bytes when each head's working set stays
  // in the L2 while its thread blocks run, so that re-reads and the dQ atomics are served there
  // and every distinct byte crosses DRAM once per kernel that touches it. Measured DRAM bytes lie
  // between this and bytes() (docs/io-model.md, "Backward": how DRAM is judged).
  double bytes_l2_view = 0;

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
  // The pass modelled. Backward (standard and fa2's loop orders only; docs/io-model.md,
  // "Backward"): FLOPs by the field's convention, 2.5 x the forward's.
  Direction direction = Direction::forward;
  Fa1StateBytes fa1;
  bool fp8_quantisation_timed = true;  // false with --fp8-prequantized
  bool fp8_amax_pass = false;          // --fp8-scale head: an amax pass before the quantise pass
  bool writes_lse = true;    // false: the row writes no log-sum-exp (cudnn stats=false, cudnn-fp8)
  bool dq_separate = false;  // fa2 backward, option dq = dq-separate (a dQ kernel, no atomics)
  // A K/V-outer backward's dQ path (VariantInfo::dq_accumulation): fa2's atomics, or fa3's TMA
  // bulk reduce-add with its per-row arrays padded to whole query blocks.
  DqAccumulation dq_accumulation = DqAccumulation::atomics;
  // The tiles are an assumption about a library's kernel (VariantInfo::model_tiles): with grouped
  // heads and fewer query rows than its tile, it packs a group's query heads into one tile
  // (io_model.cpp, fa2_packed_model).
  bool library_tiles = false;
  // A split-K/V kernel's parts (VariantInfo::kv_splits; Algorithm::split_kv).
  int kv_splits = 1;
};

// `device_smem_per_sm_bytes` is the device's shared memory per SM; the law uses the kernel's
// own tile budget instead (IoModel::bytes_asymptotic), so it is recorded by the caller, not used.
IoModel io_model(Algorithm algorithm, const Shape& shape, Tiles tiles,
                 std::int64_t device_smem_per_sm_bytes, ModelOptions options = {});

// Whether the IO model has a backward formula for this algorithm (standard, fa2).
bool has_backward_model(Algorithm algorithm);

// Query blocks the FA2 backward kernel visits for K/V block kb (causal starts at the diagonal).
std::int64_t q_blocks_for_kv_block(const Shape& shape, Tiles tiles, std::int64_t kb);

// K/V blocks the FA2 kernel visits for query block qb (causal stops at the diagonal).
std::int64_t kv_blocks_for_query_block(const Shape& shape, Tiles tiles, std::int64_t qb);
// K/V blocks of block_kv keys that query row `row` sees (causal: up to its bottom-right diagonal).
std::int64_t kv_blocks_through_row(const Shape& shape, std::int64_t block_kv, std::int64_t row);

}  // namespace fa::model
