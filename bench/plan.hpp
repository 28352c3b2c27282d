// Run planning: the configurations a run covers and the rows of each, in the order they run.
// Every row is planned here once, as a typed spec (kernels/variant.hpp: variant, direction,
// kernel configuration, option values); nothing downstream parses a row's name.
#pragma once

#include <string>
#include <vector>

#include "bench/options.hpp"
#include "kernels/option_flags.hpp"
#include "kernels/problem.hpp"
#include "kernels/variant.hpp"

namespace fa::bench {

// N outer, then the K/V length (--kv-len), then d, then causal (off before on): a sweep's rows
// come out grouped by size.
std::vector<Shape> make_plan(const Options& options);

// One row of a configuration: its spec and the description of its variant.
struct PlannedRow {
  RowSpec spec;
  const VariantInfo* info = nullptr;
  // spec.kernel_config is the variant's default for the shape (at this d when planned without a
  // shape), or none.
  bool default_config = true;
  // Every option value of spec is the one the variant runs for this shape when the run names
  // none (option_default), e.g. fa3's schedule no-pingpong at d=64 (named or not). Meaningful
  // only when planned with a shape (plan_rows' `shape`): without one, options with a shape
  // default are compared with their declared default.
  bool default_options = true;
};

// The value of option `decl` a run that names none of it takes for `shape`: its shape default
// (OptionDecl::shape_default) where it has one and a shape is given, else the declared default
// (the first accepted value).
OptionValue option_default(const OptionDecl& decl, const Shape* shape);

// The values option flag `flag` selects when given `text` (kernels/option_flags.hpp: its syntax and
// words), in the order their rows are planned. Returns "" or the one-line error naming the flag
// and what it accepts.
std::string flag_values(const OptionFlag& flag, const std::string& text,
                        std::vector<OptionValue>* out);

// The values the run asks for of option `decl`: those its flag's text selects (flag_values; e.g.
// --fa2-order both for block_order), each one among those the option accepts. An option whose flag
// the run does not give takes its default for `shape` (option_default).
std::vector<OptionValue> requested_values(const Options& options, const OptionDecl& decl,
                                          const Shape* shape = nullptr);

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
// is kept once. Returns "" or a one-line error naming the flags and the valid shapes. With `shape`
// (d == shape->d), a forward row's default tile is the one the variant picks for that shape
// (VariantInfo::default_tiles(Shape)); without, the first at d.
std::string plan_rows(const Options& options, int d, std::vector<PlannedRow>* out,
                      const Shape* shape = nullptr);

// --shard i/n: the indices (into make_plan) of the configurations shard `index` of `count` runs,
// ascending. A configuration is the unit (its rows share inputs, the fp64 reference and the peer
// comparison). The configurations are ordered by an integer work measure (rows x B*H*N*N*d, the
// causal half counted half; ties by plan index) and dealt to the shards in a snake (0..n-1,
// n-1..0, ...): a partition of the plan that depends on the plan and n alone, the same on every
// machine and for any number of GPUs. Shards past the number of configurations are empty.
std::vector<std::size_t> shard_configs(const Options& options, const std::vector<Shape>& plan,
                                       int index, int count);
// A configuration's work measure: exact (128-bit) so the order is the same everywhere.
__extension__ typedef unsigned __int128 Work;
// The same over given work measures (the unit tests' random plans).
std::vector<std::size_t> shard_of(const std::vector<Work>& work, int index, int count);

// --devices: items dealt longest first (LPT): in decreasing `cost` (ties by index), each to the
// worker with the least cost so far (ties: the lowest worker). out[w]: worker w's item indices,
// in the order dealt.
std::vector<std::vector<std::size_t>> deal_longest_first(const std::vector<double>& cost,
                                                         int workers);

}  // namespace fa::bench
