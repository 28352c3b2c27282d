// The result record to and from JSON (schema fa-bench/1, docs/results-schema.md).
#pragma once

#include <stdexcept>
#include <string>

#include "bench/result.hpp"
#include "profiler/atomic_file.hpp"

namespace fa::bench {

struct ResultFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string to_json_text(const RunResult& r);
// Throws ResultFileError naming `source` and the problem (malformed JSON, unknown schema,
// a missing or mistyped key).
RunResult from_json_text(const std::string& text, const std::string& source);
RunResult read_result_file(const std::string& path);

using fa::write_file_atomically;  // profiler/atomic_file.hpp

}  // namespace fa::bench
