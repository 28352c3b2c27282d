// The tests' way into the CLI: a command line (without the program's name) parsed as fa-bench's
// main parses it.
#pragma once

#include <string>
#include <vector>

#include "bench/options.hpp"

namespace fa::bench::test {

inline ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fa-bench");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_cli(static_cast<int>(argv.size()), argv.data());
}

}  // namespace fa::bench::test
