// The vocabulary every layer uses to speak of variants and rows: the algorithm (the IO pattern),
// the kernel configuration, the direction, the accuracy rule, the options a variant declares, the
// row spec (what one row of a result is), the launcher interface and the variant's description.
//
// Pure C++: no CUDA header, no kernel. The record (bench/result*), the IO model
// (profiler/io_model*), verification (bench/verify*) and the gate (bench/gate*) depend on this
// file alone; only kernels/registry.cpp lists the variants (and so links the kernels).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "kernels/common/fault.hpp"
#include "kernels/fp8_scheme.hpp"
#include "kernels/problem.hpp"

// The CUDA runtime's stream handle, declared as cuda_runtime_api.h declares it (cudaStream_t is
// CUstream_st*), so that this header needs no CUDA include.
struct CUstream_st;

namespace fa {

using StreamHandle = CUstream_st*;  // the same type as cudaStream_t

// Which IO pattern the variant executes; the IO model in profiler/ has one formula per pattern.
enum class Algorithm { standard, fa1, fa2, fp8, split_kv };
std::string to_string(Algorithm a);
bool parse_algorithm(const std::string& s, Algorithm* out);

// Which pass a row runs. Only forward exists today; the backward pass is next.
enum class Direction { forward, backward };
// How a K/V-outer backward adds each K/V block's share of dQ into its fp32 accumulator: atomics
// from registers (fa2), or a TMA bulk reduce-add of a tile staged in shared memory (fa3).
enum class DqAccumulation { atomics, bulk_reduce };
const char* to_string(Direction d);
bool parse_direction(const std::string& s, Direction* out);

// The tensor-core instructions of a variant's matrix products (VariantInfo::tensor_instructions).
enum class TensorInstructions { mma_sync, wgmma, library };

// How a variant's output is judged (docs/accuracy.md).
enum class AccuracyRule {
  same_precision,  // max error <= 2 x a plain same-precision implementation + 1e-3
  fp8_rmse,        // RMSE <= 1e-2 (normal inputs) or 2.4e-2 (outlier inputs)
};

struct Tiles {
  int block_q = 0;   // query rows per thread block (Br)
  int block_kv = 0;  // key/value rows per inner step (Bc)
  // Written out: device code is C++17, which has no defaulted comparisons.
  bool operator==(const Tiles& o) const { return block_q == o.block_q && block_kv == o.block_kv; }
};

// What a kernel is built for: its tiles, how many tile buffers its pipeline keeps in flight, its
// warpgroups (Hopper warp specialisation; 0: not warp-specialised) and its cluster shape.
struct KernelConfig {
  int block_q = 0;
  int block_kv = 0;
  int stages = 1;
  int warpgroups = 0;
  std::array<int, 3> cluster{1, 1, 1};

  Tiles tiles() const { return {block_q, block_kv}; }
  auto tie() const { return std::tie(block_q, block_kv, stages, warpgroups, cluster); }
  bool operator==(const KernelConfig& o) const { return tie() == o.tie(); }
  bool operator!=(const KernelConfig& o) const { return !(*this == o); }
  bool operator<(const KernelConfig& o) const { return tie() < o.tie(); }
};
// "128x64" or, when the rest is not the plain one, "128x64 s3 wg2 c2x1x1".
std::string to_string(const KernelConfig& c);

// The value of a declared option: a string, a number or a bool (as in the result file).
using OptionValue = std::variant<bool, double, std::string>;
using OptionValues = std::map<std::string, OptionValue>;
std::string to_string(const OptionValue& v);  // heads, true, 2

// The options variants declare (kernels/registry.cpp), by name.
inline constexpr const char* kOptionBlockOrder = "block_order";     // "blocks" | "heads"
inline constexpr const char* kOptionPrequantized = "prequantized";  // bool
// "full" | "no-pingpong" | "no-overlap" | "persistent" (fa3: which parts of FA3's schedule run)
inline constexpr const char* kOptionFa3Schedule = "schedule";
inline constexpr const char* kOptionStats = "stats";  // bool: the forward writes the lse (cudnn)
// "dq-atomic" | "dq-separate" (fa2 backward: how dQ is accumulated; backward rows only)
inline constexpr const char* kOptionDq = "dq";
inline constexpr const char* kDqAtomic = "dq-atomic";
inline constexpr const char* kDqSeparate = "dq-separate";
inline constexpr const char* kOptionFp8Scale = "fp8_scale";  // "block" | "head" (fp8 scales)
// "tiles" | "persistent-tma-store" | "dynamic-tma-store" (fp8 on sm_90a: grid and epilogue)
inline constexpr const char* kOptionFp8Schedule = "fp8_schedule";

// An option a variant declares: its name, the values it accepts (the first is the default) and
// what it changes.
struct OptionDecl {
  std::string name;
  std::vector<OptionValue> accepted;
  std::string meaning;
  // The passes whose rows carry the option (empty: every pass the variant has).
  std::vector<Direction> directions{};
  // The default where it depends on the shape (null: accepted's first): the planner takes it
  // when the run names no value (fp8's schedule by head dim, mask and N).
  OptionValue (*shape_default)(const Shape& s) = nullptr;
};

// One row of a result: which variant, which pass, built how, with which option values. Planned
// once (bench/plan.cpp); the record writes it and the gate matches rows on it.
struct RowSpec {
  std::string variant;  // the registry name: "fa2", never a decorated label
  Direction direction = Direction::forward;
  std::optional<KernelConfig> kernel_config;  // none: a peer whose configuration we do not choose
  OptionValues options;                       // every option the variant declares

  // The value of option `name`, or null when the row has none.
  const OptionValue* option(const std::string& name) const;
  Tiles tiles() const { return kernel_config ? kernel_config->tiles() : Tiles{}; }
  auto tie() const { return std::tie(variant, direction, kernel_config, options); }
  bool operator==(const RowSpec& o) const { return tie() == o.tie(); }
  bool operator!=(const RowSpec& o) const { return !(*this == o); }
  bool operator<(const RowSpec& o) const { return tie() < o.tie(); }
};
// Every part, in one line: "fa2 forward 128x64 block_order=heads" (the gate's calibration key).
std::string to_string(const RowSpec& s);

// Where a variant's FP8 quantisation of Q, K, V runs relative to the timed region.
enum class Quantisation {
  none,           // no quantisation (16-bit variants)
  timed,          // inside the timed region, unless the row sets option "prequantized"
  outside_timed,  // always outside (a library that takes FP8 inputs)
};

// Run-time choices a launcher is made with: the row's option values and, for the verification
// tests only, deliberate faults (kernels/common/fault.hpp; none by default).
struct LaunchOptions {
  OptionValues options;
  FaultInjection fault;

  // True when option `name` is set to `value`.
  bool is(const std::string& name, const OptionValue& value) const;
};

// Marks the phases (kernels) of a multi-kernel variant, so the profiler can count each one.
class PhaseMarker {
 public:
  virtual ~PhaseMarker() = default;
  virtual void begin(const char* name) = 0;
  virtual void end() = 0;
};

// Enqueues one forward pass on `stream`. Never synchronises. Returns "" on success or a
// one-line reason (an unsupported shape, a library error).
class Launcher {
 public:
  virtual ~Launcher() = default;
  // While set, run() brackets each of its kernels with begin/end (variants of one kernel: no-op).
  void set_phase_marker(PhaseMarker* marker) { phases_ = marker; }
  // Scratch the variant needs beyond Q, K, V, O, lse (standard: S/P; fa1: its O/l/m state).
  virtual std::size_t workspace_bytes(const Shape&, const Tiles&) const { return 0; }
  // Work done once before verification and timing (fp8 with prequantized inputs). Optional.
  virtual std::string prepare(const Shape&, const Tiles&, const DeviceBuffers&, StreamHandle) {
    return "";
  }
  virtual std::string run(const Shape& shape, const Tiles& tiles, const DeviceBuffers& buffers,
                          StreamHandle stream) = 0;
  // The backward pass (variants whose VariantInfo::directions list it): scratch beyond the
  // buffers, and one enqueued pass writing dQ, dK, dV. Same contract as run().
  virtual std::size_t backward_workspace_bytes(const Shape&, const Tiles&) const { return 0; }
  // Work done once before the backward's verification and timing, untimed (standard: P computed
  // into its workspace, where its forward keeps it for the backward). Optional.
  virtual std::string prepare_backward(const Shape&, const Tiles&, const BackwardBuffers&,
                                       StreamHandle) {
    return "";
  }
  virtual std::string run_backward(const Shape&, const Tiles&, const BackwardBuffers&,
                                   StreamHandle) {
    return "no backward pass";
  }

 protected:
  void phase_begin(const char* name) {
    if (phases_) phases_->begin(name);
  }
  void phase_end() {
    if (phases_) phases_->end();
  }

 private:
  PhaseMarker* phases_ = nullptr;
};

// What a variant is: pure data, usable with no GPU (so the IO model and --list-variants work
// anywhere), and how to launch it.
struct VariantInfo {
  std::string name;
  Algorithm algorithm;
  std::string summary;     // one line: the algorithm
  std::string loop_order;  // e.g. "Q blocks outer (grid), K/V blocks inner"
  std::string hardware_path;
  std::vector<int> head_dims;
  std::vector<DType> dtypes;
  // Compiled tile shapes at head dim d, the default (fastest measured) first; empty: not tiled.
  std::vector<Tiles> (*tile_options)(int d);
  std::unique_ptr<Launcher> (*make_launcher)(const LaunchOptions&);
  int min_compute_capability = 80;  // major*10 + minor
  AccuracyRule accuracy = AccuracyRule::same_precision;
  bool writes_lse = false;
  // A peer is someone else's implementation (a vendor library), run as a yardstick: marked in
  // every output, and our rows show their speed relative to the fastest peer.
  bool peer = false;
  // Tiles the IO model assumes when the variant's own are not visible (a library's kernel).
  Tiles model_tiles{};
  // "" or a line on what the variant needs at run time and whether it is there (e.g. the
  // cuDNN library found); --list-variants prints it.
  std::string (*availability)() = nullptr;
  // Shape limits beyond head dim and dtype: "" when fine, else the row's one-line reason.
  std::string (*shape_rule)(const Shape&) = nullptr;
  // Part of --variants all; false for variants run only when named (see --list-variants).
  bool in_all = true;
  // The options the variant declares; a row carries a value for each.
  std::vector<OptionDecl> options;
  // Where its FP8 quantisation runs (none for 16-bit variants).
  Quantisation quantisation = Quantisation::none;
  // FP8 variants: how a row with these option values quantises (the verification models the
  // same scheme, bench/verify.hpp); null: plain per-head FP8 (kPlainFp8).
  Fp8Scheme (*fp8_scheme)(const OptionValues&) = nullptr;
  // The rest of a tiled kernel's configuration, fixed in its code (its tiles come from
  // tile_options): the sm_80 kernels keep two tile buffers in flight (cp.async double buffering).
  KernelConfig pipeline{};
  // Warp-specialised kernels: query rows per consumer warpgroup, so a tile of block_q rows runs
  // 1 producer + block_q / warpgroup_rows warpgroups (0: pipeline.warpgroups for every tile).
  int warpgroup_rows = 0;
  // Limits on a row beyond its shape (a tile compiled without one schedule): "" when fine, else
  // the row's one-line unsupported reason.
  std::string (*row_rule)(const Shape&, const RowSpec&) = nullptr;
  // The newest compute capability (major*10 + minor) it runs on; 0: none (sm_90a code: 90).
  int max_compute_capability = 0;
  // The passes the variant implements (run for forward, run_backward for backward).
  std::vector<Direction> directions{Direction::forward};
  // A tiled backward's own compiled tiles at head dim d, default first (null: tile_options'; its
  // kernel keeps one stage); bench/plan.cpp gives backward rows these.
  std::vector<Tiles> (*backward_tile_options)(int d) = nullptr;
  // Its backward's dQ path, for the IO model.
  DqAccumulation dq_accumulation = DqAccumulation::atomics;
  // The head dims its backward rows run at, where fewer than head_dims (empty: head_dims); a
  // backward row at another says unsupported (unsupported_row).
  std::vector<int> backward_head_dims{};
  // The head dims its backward rows run at: backward_head_dims, or head_dims where that is empty.
  const std::vector<int>& backward_dims() const {
    return backward_head_dims.empty() ? head_dims : backward_head_dims;
  }
  // Which tensor-core instructions its matrix products use, for the energy model: mma.sync loads
  // the operands into registers (ldmatrix), wgmma reads them from shared memory; a library picks
  // its own kernels, and its rows are priced as the calibration's cuBLASLt GEMMs are, whatever
  // instruction the device gives both.
  TensorInstructions tensor_instructions = TensorInstructions::mma_sync;
  bool uses_mma_sync() const { return tensor_instructions == TensorInstructions::mma_sync; }
  // Shapes beyond square multi-head attention its forward takes: grouped-query heads (H_kv < H)
  // and a K/V length apart from the query length (causal aligned bottom-right). Backward rows of
  // either say unsupported: no backward here takes them.
  bool grouped_heads = false;
  bool kv_length_apart = false;
  // The inference cache: K/V in pages through a page table (--page-size), and each sequence of
  // the batch at its own K/V length (--kv-lengths).
  bool paged_kv = false;
  bool kv_lengths_per_sequence = false;
  // A split-K/V kernel's parts for a shape on a GPU of sm_count SMs (the IO model's split terms);
  // null: one.
  int (*kv_splits)(const Shape& s, int sm_count) = nullptr;
  // A forward default tile that depends on more of the shape than d (one of tile_options(s.d));
  // {0, 0} or null: the first of tile_options(d). fa3: d=64 causal short sequences.
  Tiles (*shape_default_tiles)(const Shape& s) = nullptr;

  // The kernel configurations at head dim d (tile_options with the pipeline), default first.
  std::vector<KernelConfig> kernel_configs(int d) const;
  Tiles default_tiles(int d) const;  // {0, 0} when not tiled
  // The forward default for this shape: shape_default_tiles where it names one, else
  // default_tiles(s.d).
  Tiles default_tiles(const Shape& s) const;
  const OptionDecl* declared(const std::string& option) const;
  // Whether a row with these option values quantises inside the timed region (IO model).
  bool quantisation_timed(const OptionValues& values) const;
  // Whether a row with these option values writes the log-sum-exp: writes_lse, unless the row
  // sets option "stats" false (the cudnn peer's inference forward).
  bool row_writes_lse(const OptionValues& values) const;
  bool supports_head_dim(int d) const;
  bool supports_dtype(DType t) const;
  // "" when the shape is supported, otherwise why not (for the row's status).
  std::string unsupported_reason(const Shape& s) const;
  // unsupported_reason, then row_rule: "" when this row (shape, tiles, options) can run.
  std::string unsupported_row(const Shape& s, const RowSpec& row) const;
  // "" when a device of compute capability major.minor runs this variant.
  std::string unsupported_on_device(int cc_major, int cc_minor) const;
};

}  // namespace fa
