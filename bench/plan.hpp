// Run planning: the configurations a run covers and the rows of each, in the order they run.
// Every row is planned here once, as a typed spec (kernels/variant.hpp: variant, direction,
// kernel configuration, option values); nothing downstream parses a row's name.
#pragma once

#include <string>
#include <vector>

#include "bench/options.hpp"
#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa::bench {

// N outer, then d, then causal (off before on): a sweep's rows come out grouped by size.
std::vector<Shape> make_plan(const Options& options);

// One row of a configuration: its spec and the description of its variant.
struct PlannedRow {
  RowSpec spec;
  const VariantInfo* info = nullptr;
  bool default_config = true;  // spec.kernel_config is the variant's default at this d (or none)
};

// The values the run asks for of option `decl` (--fa2-order for block_order, --fp8-prequantized
// for prequantized; the declared default otherwise), each one among those the option accepts.
std::vector<OptionValue> requested_values(const Options& options, const OptionDecl& decl);

// The compiled kernel configurations of `info` at head dim d for a pass, default first: the
// forward's (VariantInfo::kernel_configs), or the backward's own tiles (one stage) when it has
// them.
std::vector<KernelConfig> kernel_configs_for(const VariantInfo& info, int d, Direction direction);

// The rows at head dim d, in registry order: for each variant, each compiled kernel configuration
// that matches --block-q / --block-kv (each list empty = the default configuration), and for each
// of those (each requested direction, --direction, forward first; the backward's own tiles) every
// combination of the
// requested option values. A row of a direction the variant lacks is planned all the same (the
// runner marks it unsupported, with the reason). A spec planned twice
// is kept once. Returns "" or a one-line error naming the flags and the valid shapes.
std::string plan_rows(const Options& options, int d, std::vector<PlannedRow>* out);

}  // namespace fa::bench
