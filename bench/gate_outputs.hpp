// What `fa-bench gate` writes: a table for the log, Markdown for a CI job summary, JUnit XML,
// and the current run's figures in github-action-benchmark's "customSmallerIsBetter" JSON and in
// Bencher's metric format (BMF).
#pragma once

#include <string>

#include "bench/gate.hpp"

namespace fa::bench {

std::string gate_table(const GateReport& r, const GateOptions& o);
std::string gate_markdown(const GateReport& r, const GateOptions& o);
std::string gate_junit(const GateReport& r, const GateOptions& o);
std::string gate_github_benchmark(const GateReport& r);  // [{name, unit, value, range, extra}]
std::string gate_bmf(const GateReport& r);               // {benchmark: {measure: {value, ...}}}

// One line on what the exit code means and what to do next.
std::string gate_verdict_line(const GateReport& r);

// XML text and attribute escaping (control characters dropped: XML 1.0 cannot hold them).
std::string xml_escape(const std::string& s);

}  // namespace fa::bench
