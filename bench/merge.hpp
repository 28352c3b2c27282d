// fa-bench merge FILE... -o OUT: one result file from shards (--shard), from --devices workers or
// from runs of one sweep on several GPUs. docs/multi-gpu.md.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "bench/result.hpp"

namespace fa::bench {

// Why files cannot be merged: the same row on the same GPU twice, or settings that differ
// (schema, build, timing settings, seeds, shard counts). The message names both files.
struct MergeConflict : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Exit codes of `fa-bench merge` (docs/multi-gpu.md).
enum MergeExit : int {
  kMergeOk = 0,
  kMergeBadInput = 2,  // usage, a file that cannot be read or is not a valid result file
  kMergeRefused = 3,   // duplicates or conflicting settings: nothing written
  kMergeOutputFailed = 4,
};

// The files' configurations in one record: a configuration is keyed by its shape and its GPU's
// UUID (the same shape on two GPUs stays twice, side by side); the rows of one key from several
// files are put together (the peer comparison made again over them). `warnings` gets lines such
// as missing shards. Throws MergeConflict.
RunResult merge_results(const std::vector<RunResult>& inputs,
                        const std::vector<std::string>& sources,
                        std::vector<std::string>* warnings);

// `fa-bench merge ...` (argv[0] is "merge").
int merge_main(int argc, char** argv);

}  // namespace fa::bench
