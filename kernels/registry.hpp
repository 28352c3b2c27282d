// The catalogue of attention variants: what each one is (pure data, usable with no GPU, so the
// IO model and --list-variants work anywhere) and how to launch it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/problem.hpp"

namespace fa {

// Which IO pattern the variant executes; the IO model in profiler/ has one formula per pattern.
enum class Algorithm { standard, fa1, fa2 };

struct Tiles {
  int block_q = 0;   // query rows per thread block (Br)
  int block_kv = 0;  // key/value rows per inner step (Bc)
};

// Enqueues one forward pass on `stream`. Never synchronises. Returns "" on success or a
// one-line reason (an unsupported shape, a library error).
class Launcher {
 public:
  virtual ~Launcher() = default;
  // Scratch the variant needs beyond Q, K, V, O, lse (standard: S/P in HBM).
  virtual std::size_t workspace_bytes(const Shape&) const { return 0; }
  virtual std::string run(const Shape& shape, const DeviceBuffers& buffers,
                          cudaStream_t stream) = 0;
};

struct VariantInfo {
  std::string name;
  Algorithm algorithm;
  std::string summary;     // one line: the algorithm
  std::string loop_order;  // e.g. "Q blocks outer (grid), K/V blocks inner"
  std::string hardware_path;
  std::vector<int> head_dims;
  std::vector<DType> dtypes;
  Tiles (*tiles_for)(int d);  // the tiles the kernel uses at head dim d ({0,0} = not tiled)
  std::unique_ptr<Launcher> (*make_launcher)();

  bool supports_head_dim(int d) const;
  bool supports_dtype(DType t) const;
  // "" when the shape is supported, otherwise why not (for the row's status).
  std::string unsupported_reason(const Shape& s) const;
};

const std::vector<VariantInfo>& variant_registry();
const VariantInfo* find_variant(const std::string& name);
std::string to_string(Algorithm a);

}  // namespace fa
