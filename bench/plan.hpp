// Run planning: the configurations a run covers, in the order they run.
#pragma once

#include <vector>

#include <string>

#include "bench/options.hpp"
#include "kernels/registry.hpp"
#include "kernels/problem.hpp"

namespace fa::bench {

// N outer, then d, then causal (off before on): a sweep's rows come out grouped by size.
std::vector<Shape> make_plan(const Options& options);

// One row of a configuration: a variant with the tiles it runs with.
struct PlannedVariant {
  std::string row_name;  // "fa2", "fa2@64x64" for other tiles, "fa2~heads" for the other block order
  const VariantInfo* info = nullptr;
  Tiles tiles;
  bool heads_interleaved = false;  // fa2 --fa2-order heads
};

// The variant a row name belongs to ("fa2@64x64~heads" -> fa2).
const VariantInfo* variant_of_row(const std::string& row_name);

// The rows at head dim d, in registry order. A tiled variant runs once for each compiled tile
// shape that matches --block-q / --block-kv (each list empty = the default tiles). Returns "" or
// a one-line error naming the flags and the valid shapes.
std::string plan_variants(const Options& options, int d, std::vector<PlannedVariant>* out);

}  // namespace fa::bench
