// libFuzzer target: the result-file reader (bench/result_json.cpp) and the gate on what it reads.
// Any input must either be read or be refused with ResultFileError naming the problem; nothing
// may crash, hang, trip a sanitizer or throw anything else. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "bench/gate.hpp"
#include "bench/gate_outputs.hpp"
#include "bench/result_json.hpp"

namespace {

using namespace fa::bench;

// The gate's rows and outputs on a file that was read: against itself and against a copy with
// every sample scaled (so the time rule takes its other branches).
void exercise_gate(const RunResult& r) {
  GateOptions o;
  RunResult slower = r;
  for (auto& c : slower.configs) {
    for (auto& v : c.results) {
      if (v.timing) {
        for (double& s : v.timing->samples_ms) s *= 1.1;
      }
    }
  }
  for (const RunResult* cur : {&r, static_cast<const RunResult*>(&slower)}) {
    const GateReport rep = run_gate(r, *cur, o, "base", "cur");
    if (rep.exit_code < 0 || rep.exit_code > 2) std::abort();
    (void)gate_table(rep, o);
    (void)gate_markdown(rep, o);
    (void)gate_junit(rep, o);
    (void)gate_github_benchmark(rep);
    (void)gate_bmf(rep);
  }
  // Calibration on the two (refused with invalid_argument when it cannot learn from them).
  try {
    const Calibration cal = calibrate({r, slower}, {"a", "b"});
    GateOptions with = o;
    with.calibration = cal;
    if (run_gate(r, slower, with, "base", "cur").exit_code > 2) std::abort();
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  RunResult r;
  try {
    r = from_json_text(text, "fuzz-input");
  } catch (const ResultFileError& e) {
    // Refused: the message must name the source.
    if (std::string(e.what()).rfind("fuzz-input", 0) != 0) std::abort();
    return 0;
  }
  // Read: writing it back and reading that must work too.
  const std::string again = to_json_text(r);
  try {
    (void)from_json_text(again, "round-trip");
  } catch (const ResultFileError&) {
    std::abort();  // the writer produced something its own reader refuses
  }
  // The gate's optional calibration key: read, or refused with invalid_argument.
  try {
    (void)read_calibration(text, "fuzz-input");
  } catch (const std::invalid_argument&) {
  }
  exercise_gate(r);
  return 0;
}
