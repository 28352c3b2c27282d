#include "kernels/registry.hpp"

#include "kernels/cudnn/cudnn.hpp"
#include "kernels/decode/decode.hpp"
#include "kernels/fa1/fa1.hpp"
#include "kernels/fa2/fa2.hpp"
#include "kernels/fa3/fa3.hpp"
#include "kernels/fa3/fa3_bwd.hpp"
#include "kernels/fp8/fp8.hpp"
#include "kernels/fp8/fp8_quant.hpp"
#include "kernels/option_flags.hpp"
#include "kernels/standard/standard.hpp"

namespace fa {

// An option's accepted values from a list of names, as strings (a const char* would make the
// OptionValue a bool).
template <std::size_t N>
static std::vector<OptionValue> string_values(const char* const (&names)[N]) {
  std::vector<OptionValue> v;
  for (const char* name : names) v.emplace_back(std::string(name));
  return v;
}

// Each entry lists VariantInfo's fields in order up to the last one that differs from its default;
// the rest (options, quantisation, pipeline: set after the entry where needed) keep their
// defaults, which is what -Wmissing-field-initializers would otherwise report.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const std::vector<VariantInfo>& variant_registry() {
  static const std::vector<VariantInfo> registry = [] {
    std::vector<VariantInfo> r;
    r.push_back(VariantInfo{
        "standard",
        Algorithm::standard,
        "3 passes: S = scale*Q*K^T (cuBLAS), P = softmax(S) (one kernel, causal mask here), "
        "O = P*V (cuBLAS); S and P live in HBM (P overwrites S in place)",
        "one GEMM over all (batch, head), then one softmax row per thread block, then one GEMM",
        "cuBLAS strided-batched GEMM (fp32 accumulate, tensor cores) + CUDA-core softmax",
        {64, 128, 256},
        {DType::bf16, DType::fp16},
        [](int) { return std::vector<Tiles>{}; },
        [](const LaunchOptions& o) { return make_standard_launcher(o); },
        80,
        AccuracyRule::same_precision,
        /*writes_lse=*/true});
    r.back().directions = {Direction::forward, Direction::backward};
    r.back().tensor_instructions = TensorInstructions::library;  // cuBLAS's or cuDNN's kernels
    r.push_back(VariantInfo{
        "fa1",
        Algorithm::fa1,
        "FlashAttention-1 forward (Algorithm 1): K/V blocks outer, query blocks inner; O, l, m "
        "read from and written back to HBM (fp32 state) at every step, O normalised every step",
        "one thread block per (batch, head); loop over K/V blocks, inside it over query blocks; "
        "each warp takes 16 rows of the current query block",
        "mma.sync m16n8k16 (fp32 accumulate), cp.async tiles, Q blocks double-buffered",
        {64, 128},
        {DType::bf16, DType::fp16},
        fa1_tile_options,
        [](const LaunchOptions& o) { return make_fa1_launcher(o); },
        80,
        AccuracyRule::same_precision,
        /*writes_lse=*/true});
    r.back().pipeline.stages = 2;  // cp.async double buffering
    r.push_back(VariantInfo{
        "fa2",
        Algorithm::fa2,
        "FlashAttention-2 forward: fused, online softmax, 1/l rescale deferred to the end of "
        "the K/V loop, log-sum-exp written per row",
        "grid over (query blocks x batch*heads); each thread block loops over K/V blocks; each "
        "warp owns 32 query rows (FlashAttention-2's layout: 4 warps per 128-row block, two "
        "blocks per SM) or 16 (the tile says which: kernels/fa2/fa2.cu)",
        "mma.sync m16n8k16 (fp32 accumulate), cp.async double-buffered K/V tiles",
        {64, 128},
        {DType::bf16, DType::fp16},
        fa2_tile_options,
        [](const LaunchOptions& o) { return make_fa2_launcher_with_backward(o); },
        80,
        AccuracyRule::same_precision,
        /*writes_lse=*/true});
    r.back().pipeline.stages = 2;  // cp.async double buffering
    r.back().options = {{kOptionBlockOrder,
                         {std::string("blocks"), std::string("heads")},
                         "thread-block order: blocks walks the query blocks (backward: the K/V "
                         "blocks) of one head together, heads walks heads first"},
                        {kOptionDq,
                         {std::string(kDqAtomic), std::string(kDqSeparate)},
                         "backward only: dq-atomic adds each K/V block's dQ to an fp32 "
                         "accumulator with atomics (then a convert pass); dq-separate computes dQ "
                         "in a second kernel, query blocks outer, recomputing P and dS (no "
                         "atomics, 7 products per block pair instead of 5)",
                         {Direction::backward}}};
    // kernels/fa2/fa2_bwd.cu: K/V blocks outer (tiles Br x Bc, Bc/16 warps), Q/dO loads of the
    // next query block overlapping the dQ product; dQ by option dq.
    r.back().directions = {Direction::forward, Direction::backward};
    r.back().backward_tile_options = fa2_backward_tile_options;
    r.push_back(VariantInfo{
        "fa3",
        Algorithm::fa2,
        "FlashAttention-2's algorithm (Q outer, online softmax, deferred 1/l, lse) with "
        "FlashAttention-3's Hopper schedule: warp-specialised producer/consumers, softmax "
        "overlapped with the products",
        "grid over (query blocks x batch*heads); a producer warp loads Q once and K/V blocks "
        "through a 2-stage ring (last block first); consumer warpgroups of 64 query rows each "
        "(2 or 3) loop over K/V blocks",
        "sm_90a: TMA loads (swizzled shared memory, mbarriers), wgmma (S from shared memory, P V "
        "with P in registers), setmaxnreg 24/240 or 32/160, named-barrier ping-pong; CuTe "
        "(nvidia-cutlass)",
        {64, 128, 256},
        {DType::bf16, DType::fp16},
        fa3_tile_options,
        [](const LaunchOptions& o) { return make_fa3_launcher(o); },
        90,
        AccuracyRule::same_precision,
        /*writes_lse=*/true,
        /*peer=*/false,
        /*model_tiles=*/Tiles{},
        fa3_build_status,
        fa3_shape_rule});
    r.back().max_compute_capability = 90;  // sm_90a code only (wgmma, setmaxnreg)
    r.back().pipeline.stages = 2;          // K/V ring
    r.back().warpgroup_rows = 64;          // 1 producer + block_q / 64 consumer warpgroups
    r.back().row_rule = fa3_row_rule;
    r.back().tensor_instructions = TensorInstructions::wgmma;
    r.back().shape_default_tiles = fa3_shape_default_tiles;
    // The backward (kernels/fa3/fa3_bwd_kernel.cuh): K/V blocks outer, d = 64 and 128.
    r.back().directions = {Direction::forward, Direction::backward};
    r.back().backward_tile_options = fa3_backward_tile_options;
    r.back().backward_head_dims = {64, 128};
    r.back().dq_accumulation = DqAccumulation::bulk_reduce;
    // Query head bh reads K/V head bh / g (kernels/hopper/forward.cuh's producer); K/V lengths
    // apart from N are the decode kernel's.
    r.back().grouped_heads = true;
    r.back().options = {
        {kOptionFa3Schedule,
         string_values(kFa3Schedules),
         "FA3's ablation (kernels/fa3/fa3.hpp): full; no-pingpong (consumer "
         "warpgroups do not take turns); no-overlap (no softmax/product overlap inside a "
         "warpgroup); persistent (one thread block per SM walks the tiles, O from registers). "
         "Default: the fastest measured for the shape (fa3_default_schedule)",
         {},
         fa3_default_schedule}};
    r.push_back(VariantInfo{
        "decode",
        Algorithm::split_kv,
        "flash-decoding: the K/V sequence split across thread blocks where B*H_kv cannot fill "
        "the GPU (the split chosen from the sequences' lengths, H_kv and the SMs), the parts "
        "combined by the last block of each K/V head; a paged cache read through its page "
        "table; log-sum-exp written per row",
        "grid over (splits x batch*K/V heads); each thread block takes its split's keys in "
        "64-key tiles, 16 per warp, for the group's N x H/H_kv query rows packed into one "
        "16-row tile (each K/V byte read once per group)",
        "mma.sync m16n8k16 (fp32 accumulate), a 3-stage cp.async K/V ring, sized for sm_90",
        {64, 128},
        {DType::bf16, DType::fp16},
        decode_tile_options,
        [](const LaunchOptions& o) { return make_decode_launcher(o); },
        // mma.sync code, but sized for Hopper: 102 KB of shared memory at d=128 (over sm_86/89's
        // 99 KB a block) and two blocks an SM in its split rule; checked on sm_90 alone.
        90,
        AccuracyRule::same_precision,
        /*writes_lse=*/true,
        /*peer=*/false,
        /*model_tiles=*/Tiles{},
        nullptr,
        decode_shape_rule,
        /*in_all=*/false});
    r.back().pipeline.stages = 3;  // the cp.async K/V ring
    r.back().grouped_heads = true;
    r.back().kv_length_apart = true;
    r.back().paged_kv = true;
    r.back().kv_lengths_per_sequence = true;
    r.back().kv_splits = decode_splits;
    // The options both FP8 kernels take (the quantisation pass is shared: fp8_quant.cu).
    const std::vector<OptionDecl> fp8_options = {
        {kOptionPrequantized,
         {false, true},
         "true: Q, K, V quantised once outside the timed region"},
        {kOptionFp8Scale,
         {std::string("block"), std::string("head")},
         "quantisation scales: block (Q per 64 rows, K and V per 128 keys, one pass "
         "over the inputs; the default, chosen by the CPU emulation in docs/accuracy.md) or head "
         "(one per batch and head: an amax pass first)"}};
    r.push_back(VariantInfo{
        "fp8",
        Algorithm::fp8,
        "FP8 (E4M3) forward on sm_90a: Q, K (Hadamard-rotated) and V quantised in one pass (scales "
        "per block of rows or per head; timed with the variant unless --fp8-prequantized), both "
        "products on FP8 wgmma, P quantised as E4M3(256 P) in registers, fp32 softmax, bf16 "
        "output; descales folded into the softmax scale and the epilogue",
        "fa3's: grid over (query blocks x batch*heads); a producer warp loads Q8 once and K8/V8 "
        "blocks through a 2-stage ring (last block first); consumer warpgroups of 64 query rows "
        "(2 at d=128, 3 at d=64) loop over K/V blocks, ping-pong and intra-warpgroup overlap",
        "sm_90a: TMA, wgmma e4m3 (S from shared memory, P V with P8 in registers and V8 K-major "
        "[d][N] written by the quantise pass with its keys permuted to match P's registers), "
        "setmaxnreg; CuTe (nvidia-cutlass). Elsewhere: fp8-sm89",
        {64, 128},
        {DType::bf16},
        fp8_tile_options,
        [](const LaunchOptions& o) { return make_fp8_launcher(o); },
        90,
        AccuracyRule::fp8_rmse,
        /*writes_lse=*/true,
        /*peer=*/false,
        /*model_tiles=*/Tiles{},
        fp8_build_status,
        fp8_shape_rule});
    r.back().max_compute_capability = 90;  // sm_90a code only (wgmma, setmaxnreg)
    r.back().pipeline.stages = 2;          // K/V ring
    r.back().warpgroup_rows = 64;          // 1 producer + block_q / 64 consumer warpgroups
    r.back().row_rule = fp8_row_rule;
    r.back().tensor_instructions = TensorInstructions::wgmma;
    r.back().options = fp8_options;
    r.back().options.push_back(
        {kOptionFp8Schedule,
         string_values(kFp8Schedules),
         "grid and epilogue of the sm_90a kernel (kernels/fp8/fp8_sm90_launch.hpp): "
         "tiles (one thread block per tile, O from registers), persistent-tma-store "
         "(one thread block per SM walks the tiles, O through shared memory and a TMA store), "
         "dynamic-tma-store (the same, fed by an atomic tile counter); default by shape: "
         "persistent-tma-store at d=128 (causal: N <= 8192), dynamic-tma-store at d=64 "
         "non-causal, tiles elsewhere",
         {},
         fp8_default_schedule});
    r.back().fp8_scheme = fp8::scheme;
    r.back().quantisation = Quantisation::timed;
    r.push_back(VariantInfo{
        "fp8-sm89",
        Algorithm::fp8,
        "FP8 (E4M3) forward, the portable kernel (sm_89+): the same quantisation pass as fp8, "
        "P quantised as E4M3(256 P), fp32 accumulation and softmax, bf16 output",
        "as fa2: grid over (query blocks x batch*heads), K/V loop inside, deferred 1/l",
        "mma.sync m16n8k32 e4m3 (FP8 tensor cores, sm_89+), V stored transposed with permuted "
        "keys so P never leaves registers",
        {64, 128},
        {DType::bf16},
        fp8_sm89_tile_options,
        [](const LaunchOptions& o) { return make_fp8_sm89_launcher(o); },
        89,
        AccuracyRule::fp8_rmse,
        /*writes_lse=*/true});
    r.back().pipeline.stages = 2;  // cp.async double buffering
    r.back().options = fp8_options;
    r.back().fp8_scheme = fp8::scheme;
    r.back().quantisation = Quantisation::timed;
    r.push_back(VariantInfo{
        "cudnn",
        Algorithm::fa2,
        "peer: cuDNN's fused flash-attention (NVIDIA's library, cudnn-frontend's sdpa node: Q K^T, "
        "scale, causal mask, softmax, P V in one graph), log-sum-exp written unless stats=false; "
        "backward: the sdpa_backward node (dQ, dK, dV from Q, K, V, O, dO and the lse)",
        "the library's: one fused kernel chosen by cuDNN's heuristics (tiles not visible; the IO "
        "model assumes Br=Bc=128)",
        "cuDNN 9 SDPA engines (on sm_90 wgmma kernels) through cudnn-frontend (header-only, the "
        "API PyTorch uses); libcudnn.so.9 loaded at run time; the same BHSD buffers, no layout "
        "conversion",
        {64, 128, 256},
        {DType::bf16, DType::fp16},
        [](int) { return std::vector<Tiles>{}; },
        [](const LaunchOptions& o) { return make_cudnn_launcher(o); },
        80,
        AccuracyRule::same_precision,
        /*writes_lse=*/true,
        /*peer=*/true,
        /*model_tiles=*/Tiles{128, 128},
        cudnn_library_status,
        cudnn_shape_rule});
    r.back().options = {
        {kOptionStats,
         {true, false},
         "true: the forward writes the log-sum-exp (the training forward; default); "
         "false: no stats output (the inference forward PyTorch requests), the "
         "row's lse is not checked"}};
    r.back().directions = {Direction::forward, Direction::backward};
    r.back().tensor_instructions = TensorInstructions::library;  // cuBLAS's or cuDNN's kernels
    // d=256 is fa3's yardstick (forward). cuDNN's backward there has never run in this project's
    // tests (tests/test_backward_gpu.cpp: d 64 and 128), so its rows say so rather than run
    // unchecked.
    r.back().backward_head_dims = {64, 128};
    // The forward graph takes K and V with their own heads and length, causal bottom-right, and
    // the cache paged (its page tables) or ragged (its padding mask and sequence lengths).
    r.back().grouped_heads = true;
    r.back().kv_length_apart = true;
    r.back().paged_kv = true;
    r.back().kv_lengths_per_sequence = true;
    r.push_back(VariantInfo{
        "cudnn-fp8",
        Algorithm::fp8,
        "peer: cuDNN's FP8 (E4M3) fused attention forward (cudnn-frontend's sdpa_fp8 node): Q, K, "
        "V quantised per tensor (amax / 448) outside the timed region, P stored as E4M3(448 P), O "
        "written in E4M3 and dequantised to bf16 by our kernel (timed with it)",
        "the library's: one fused kernel chosen by cuDNN's heuristics (tiles not visible; the IO "
        "model assumes Br=Bc=128)",
        "cuDNN 9 FP8 SDPA engine (Hopper FP8 tensor cores) through cudnn-frontend; libcudnn.so.9 "
        "loaded at run time; E4M3 copies of Q, K, V in the variant's workspace (BHSD). Run by "
        "name only: on the H200 with cuDNN 9.14 and the hand-built graph its output failed "
        "verification at d=64, and at N=1024 when another cuDNN graph ran earlier in the process "
        "(docs/peers.md); d=128 only",
        {128},
        {DType::bf16},
        [](int) { return std::vector<Tiles>{}; },
        [](const LaunchOptions& o) { return make_cudnn_launcher(o, /*fp8=*/true); },
        90,
        AccuracyRule::fp8_rmse,
        /*writes_lse=*/false,
        /*peer=*/true,
        /*model_tiles=*/Tiles{128, 128},
        cudnn_library_status,
        cudnn_shape_rule,
        /*in_all=*/false});
    r.back().quantisation = Quantisation::outside_timed;         // kernels/cudnn/cudnn.cpp
    r.back().tensor_instructions = TensorInstructions::library;  // cuBLAS's or cuDNN's kernels
    return r;
  }();
  return registry;
}
#pragma GCC diagnostic pop

const VariantInfo* find_variant(const std::string& name) {
  for (const auto& v : variant_registry()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// The flag of each option declared above (kernels/option_flags.hpp): the words a run may give and
// the option value each selects, in the order their rows are planned.
const std::vector<OptionFlag>& option_flags() {
  static const std::vector<OptionFlag> flags = [] {
    auto word = [](const char* w, const char* value) { return FlagWord{w, std::string(value)}; };
    auto listed = [](const auto& names) {
      std::vector<FlagWord> words;
      for (const char* name : names) words.push_back({name, std::string(name)});
      return words;
    };
    return std::vector<OptionFlag>{
        {.name = "fa2-order",
         .option = kOptionBlockOrder,
         .syntax = FlagSyntax::choice,
         .words = {word("blocks", "blocks"), word("heads", "heads")},
         .every = "both",
         .help = "fa2 thread-block order: blocks (query blocks of a head together, default) | "
                 "heads (heads interleaved) | both"},
        {.name = "fa2-dq",
         .option = kOptionDq,
         .syntax = FlagSyntax::choice,
         .words = {word("atomic", kDqAtomic), word("separate", kDqSeparate)},
         .every = "both",
         .help = "fa2 backward's dQ: atomic (fp32 atomics, default) | separate (a second kernel, "
                 "query blocks outer, no atomics) | both"},
        {.name = "fa3-schedule",
         .option = kOptionFa3Schedule,
         .syntax = FlagSyntax::list,
         .words = listed(kFa3Schedules),
         .every = "all",
         .help = "fa3 schedule: full | no-pingpong | no-overlap | persistent | all, or a comma "
                 "list (one row each; --list-variants says what each is); default: the fastest "
                 "measured for the shape (each row records which; docs/performance.md)"},
        {.name = "fp8-prequantized",
         .option = kOptionPrequantized,
         .syntax = FlagSyntax::toggle,
         .words = {{"true", true}, {"false", false}},
         .every = "",
         .help = "fp8: quantise once, time the attention kernel alone"},
        {.name = "fp8-scale",
         .option = kOptionFp8Scale,
         .syntax = FlagSyntax::choice,
         .words = {word("block", "block"), word("head", "head")},
         .every = "both",
         .help = "fp8 quantisation scales: block (per block of rows, one pass; default) | head "
                 "(per batch and head: an amax pass first) | both (one row each)"},
        {.name = "fp8-schedule",
         .option = kOptionFp8Schedule,
         .syntax = FlagSyntax::list,
         .words = listed(kFp8Schedules),
         .every = "all",
         .help = "fp8 (sm_90a) grid and epilogue: tiles | persistent-tma-store | "
                 "dynamic-tma-store | all, or a comma list (one row each); default: the fastest "
                 "measured for the shape (each row records which; docs/performance.md)"},
        {.name = "cudnn-stats",
         .option = kOptionStats,
         .syntax = FlagSyntax::choice,
         .words = {{"on", true}, {"off", false}},
         .every = "both",
         .help = "cudnn forward: on (writes the log-sum-exp, as for training; default) | off (no "
                 "stats: the inference forward PyTorch requests) | both"},
    };
  }();
  return flags;
}

const OptionFlag* option_flag(const std::string& option) {
  for (const auto& f : option_flags()) {
    if (f.option == option) return &f;
  }
  return nullptr;
}

}  // namespace fa
