// The command-line flag of each option the variants declare (OptionDecl, kernels/variant.hpp): its
// name, the option it sets, how its value is written, the option value each word selects and its
// help line. Declared in kernels/registry.cpp beside the variants that declare the options, so
// the registry is the one place where a variant's options and their flags are declared;
// bench/cli.cpp adds every flag to the command line alike and bench/plan.cpp turns what a run
// gave into the option's values. Pure C++; no kernel includes this file.
#pragma once

#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

// How a flag's value is written.
enum class FlagSyntax {
  // --flag WORD: one of the flag's words (one value), or its `every` word (each value, one row
  // each, in the words' order).
  choice,
  // --flag WORD[,WORD...]: one row per listed word, in the list's order; or the `every` word
  // alone (each value the option accepts, one row each).
  list,
  // --flag alone: the word "true" (CLI11 also reads --flag=false, and its other bool spellings).
  toggle,
};

// A word a flag's value may say, and the option value it selects.
struct FlagWord {
  std::string word;
  OptionValue value;
};

struct OptionFlag {
  std::string name;    // "fa2-order": the command line's --fa2-order
  std::string option;  // the option it sets, in every variant that declares it (kOptionBlockOrder)
  FlagSyntax syntax = FlagSyntax::choice;
  // What the value may say: each accepted value of the option once (list: the value's own text).
  std::vector<FlagWord> words;
  std::string every;  // the word for every value ("both", "all"); "" for a toggle
  std::string help;   // its line in --help
};

// Every option flag, in --help order. A run that does not give an option's flag plans the
// option's default: its shape default for the row's shape where it has one
// (OptionDecl::shape_default), else the first value it accepts.
const std::vector<OptionFlag>& option_flags();
// The flag that sets option `option`, or null.
const OptionFlag* option_flag(const std::string& option);

}  // namespace fa
