// The catalogue of attention variants: what each one is (pure data, usable with no GPU, so the
// IO model and --list-variants work anywhere) and how to launch it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/fault.hpp"
#include "kernels/problem.hpp"

namespace fa {

// Which IO pattern the variant executes; the IO model in profiler/ has one formula per pattern.
enum class Algorithm { standard, fa1, fa2, fp8 };

// How a variant's output is judged (docs/accuracy.md).
enum class AccuracyRule {
  same_precision,  // max error <= 2 x a plain same-precision implementation + 1e-3
  fp8_rmse,        // RMSE <= 1e-2 (normal inputs) or 2.4e-2 (outlier inputs)
};

// Run-time choices a launcher is made with.
struct LaunchOptions {
  bool fp8_prequantized = false;       // fp8: quantise once outside the timed region
  bool fa2_heads_interleaved = false;  // fa2: thread blocks walk heads first (block order)
  FaultInjection fault;  // verification tests only (kernels/common/fault.hpp); none by default
};

struct Tiles {
  int block_q = 0;   // query rows per thread block (Br)
  int block_kv = 0;  // key/value rows per inner step (Bc)
  // Written out: device code is C++17, which has no defaulted comparisons.
  bool operator==(const Tiles& o) const { return block_q == o.block_q && block_kv == o.block_kv; }
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
  virtual std::string prepare(const Shape&, const Tiles&, const DeviceBuffers&, cudaStream_t) {
    return "";
  }
  virtual std::string run(const Shape& shape, const Tiles& tiles, const DeviceBuffers& buffers,
                          cudaStream_t stream) = 0;

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

  Tiles default_tiles(int d) const;  // {0, 0} when not tiled
  bool supports_head_dim(int d) const;
  bool supports_dtype(DType t) const;
  // "" when the shape is supported, otherwise why not (for the row's status).
  std::string unsupported_reason(const Shape& s) const;
  // "" when a device of compute capability major.minor runs this variant.
  std::string unsupported_on_device(int cc_major, int cc_minor) const;
};

const std::vector<VariantInfo>& variant_registry();
const VariantInfo* find_variant(const std::string& name);
std::string to_string(Algorithm a);

}  // namespace fa
