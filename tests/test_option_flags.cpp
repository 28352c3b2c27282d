// The per-variant option flags (--fa2-order, --fp8-prequantized, --fp8-scale, --fa3-schedule,
// --fp8-schedule, --cudnn-stats, --fa2-dq): the rows each command line plans, and each flag's
// bad value refused with one line naming it (exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "bench/plan.hpp"
#include "kernels/option_flags.hpp"
#include "kernels/registry.hpp"
#include "tests/parse_args.hpp"

namespace fa::bench {
namespace {

using test::parse;

// Every row the command line plans, configuration by configuration, as "N d [causal]: spec".
std::vector<std::string> planned(const std::vector<std::string>& args) {
  const auto out = parse(args);
  EXPECT_EQ(out.action, ParseOutcome::Action::run) << out.output;
  std::vector<std::string> lines;
  for (const Shape& s : make_plan(out.options)) {
    std::vector<PlannedRow> rows;
    EXPECT_EQ(plan_rows(out.options, static_cast<int>(s.d), &rows, &s), "");
    for (const PlannedRow& r : rows)
      lines.push_back(std::to_string(s.N) + " " + std::to_string(s.d) +
                      (s.causal ? " causal" : "") + ": " + to_string(r.spec));
  }
  return lines;
}

// The rows as a C++ initializer, for a failing expectation's message.
std::string as_code(const std::vector<std::string>& lines) {
  std::string s = "{";
  for (const auto& l : lines) s += "\n  \"" + l + "\",";
  return s + "\n}";
}

struct PlanCase {
  std::vector<std::string> args;
  std::vector<std::string> rows;
};

// The rows planned before the flags were declared in the registry (bench/cli.cpp parsed each by
// hand): the same command lines must plan the same rows, in the same order.
TEST(OptionFlags, CommandLinesPlanTheSameRows) {
  const std::vector<PlanCase> cases = {
      {{"--variants", "fa2"},
       {
           "4096 64: fa2 forward 128x64 s2 block_order=blocks",
       }},
      {{"--variants", "fa2", "--fa2-order", "heads"},
       {
           "4096 64: fa2 forward 128x64 s2 block_order=heads",
       }},
      {{"--variants", "fa2", "--fa2-order", "both", "--direction", "both", "--fa2-dq", "both"},
       {
           "4096 64: fa2 forward 128x64 s2 block_order=blocks",
           "4096 64: fa2 forward 128x64 s2 block_order=heads",
           "4096 64: fa2 backward 128x128 block_order=blocks dq=dq-atomic",
           "4096 64: fa2 backward 128x128 block_order=blocks dq=dq-separate",
           "4096 64: fa2 backward 128x128 block_order=heads dq=dq-atomic",
           "4096 64: fa2 backward 128x128 block_order=heads dq=dq-separate",
       }},
      {{"--variants", "fa2", "--direction", "bwd", "--fa2-dq", "separate"},
       {
           "4096 64: fa2 backward 128x128 block_order=blocks dq=dq-separate",
       }},
      {{"--variants", "fp8,fp8-sm89"},
       {
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=false",
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=block prequantized=false",
       }},
      {{"--variants", "fp8,fp8-sm89", "--fp8-prequantized", "--fp8-scale", "both"},
       {
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=true",
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=head fp8_schedule=dynamic-tma-store "
           "prequantized=true",
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=block prequantized=true",
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=head prequantized=true",
       }},
      {{"--variants", "fp8-sm89", "--fp8-prequantized=false", "--fp8-scale", "head"},
       {
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=head prequantized=false",
       }},
      {{"--variants", "fp8", "--N", "1024,16384", "--d", "64,128", "--causal", "both"},
       {
           "1024 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=false",
           "1024 64 causal: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=tiles "
           "prequantized=false",
           "1024 128: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=persistent-tma-store "
           "prequantized=false",
           "1024 128 causal: fp8 forward 128x128 s2 wg3 fp8_scale=block "
           "fp8_schedule=persistent-tma-store prequantized=false",
           "16384 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=false",
           "16384 64 causal: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=tiles "
           "prequantized=false",
           "16384 128: fp8 forward 128x128 s2 wg3 fp8_scale=block "
           "fp8_schedule=persistent-tma-store prequantized=false",
           "16384 128 causal: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=tiles "
           "prequantized=false",
       }},
      {{"--variants", "fp8", "--fp8-schedule", "all", "--d", "128"},
       {
           "4096 128: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=tiles "
           "prequantized=false",
           "4096 128: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=persistent-tma-store "
           "prequantized=false",
           "4096 128: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=false",
       }},
      {{"--variants", "fp8", "--fp8-schedule", "dynamic-tma-store,tiles", "--d", "64"},
       {
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=dynamic-tma-store "
           "prequantized=false",
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=tiles "
           "prequantized=false",
       }},
      {{"--variants", "fa3", "--N", "1024,16384", "--d", "64,128", "--causal", "both"},
       {
           "1024 64: fa3 forward 192x128 s2 wg4 schedule=no-pingpong",
           "1024 64 causal: fa3 forward 128x128 s2 wg3 schedule=no-pingpong",
           "1024 128: fa3 forward 128x128 s2 wg3 schedule=full",
           "1024 128 causal: fa3 forward 128x128 s2 wg3 schedule=full",
           "16384 64: fa3 forward 192x128 s2 wg4 schedule=no-pingpong",
           "16384 64 causal: fa3 forward 192x128 s2 wg4 schedule=no-pingpong",
           "16384 128: fa3 forward 128x128 s2 wg3 schedule=full",
           "16384 128 causal: fa3 forward 128x128 s2 wg3 schedule=full",
       }},
      {{"--variants", "fa3", "--fa3-schedule", "all", "--d", "128"},
       {
           "4096 128: fa3 forward 128x128 s2 wg3 schedule=full",
           "4096 128: fa3 forward 128x128 s2 wg3 schedule=no-pingpong",
           "4096 128: fa3 forward 128x128 s2 wg3 schedule=no-overlap",
           "4096 128: fa3 forward 128x128 s2 wg3 schedule=persistent",
       }},
      {{"--variants", "fa3", "--fa3-schedule", "persistent,full,persistent", "--d", "64"},
       {
           "4096 64: fa3 forward 192x128 s2 wg4 schedule=persistent",
           "4096 64: fa3 forward 192x128 s2 wg4 schedule=full",
       }},
      {{"--variants", "cudnn", "--cudnn-stats", "off"},
       {
           "4096 64: cudnn forward stats=false",
       }},
      {{"--variants", "cudnn", "--cudnn-stats", "both", "--direction", "both"},
       {
           "4096 64: cudnn forward stats=true",
           "4096 64: cudnn forward stats=false",
           "4096 64: cudnn backward stats=true",
           "4096 64: cudnn backward stats=false",
       }},
      {{"--variants", "all,cudnn-fp8", "--d", "128"},
       {
           "4096 128: standard forward",
           "4096 128: fa1 forward 128x64 s2",
           "4096 128: fa2 forward 128x64 s2 block_order=blocks",
           "4096 128: fa3 forward 128x128 s2 wg3 schedule=full",
           "4096 128: fp8 forward 128x128 s2 wg3 fp8_scale=block fp8_schedule=persistent-tma-store "
           "prequantized=false",
           "4096 128: fp8-sm89 forward 128x128 s2 fp8_scale=block prequantized=false",
           "4096 128: cudnn forward stats=true",
           "4096 128: cudnn-fp8 forward",
       }},
      {{"--variants", "all,cudnn-fp8", "--d", "64", "--direction", "both", "--fa2-order", "both",
        "--fa2-dq", "both", "--fp8-prequantized", "--fp8-scale", "both", "--fa3-schedule",
        "full,no-overlap", "--fp8-schedule", "tiles", "--cudnn-stats", "both"},
       {
           "4096 64: standard forward",
           "4096 64: standard backward",
           "4096 64: fa1 forward 128x64 s2",
           "4096 64: fa1 backward 128x64 s2",
           "4096 64: fa2 forward 128x64 s2 block_order=blocks",
           "4096 64: fa2 forward 128x64 s2 block_order=heads",
           "4096 64: fa2 backward 128x128 block_order=blocks dq=dq-atomic",
           "4096 64: fa2 backward 128x128 block_order=blocks dq=dq-separate",
           "4096 64: fa2 backward 128x128 block_order=heads dq=dq-atomic",
           "4096 64: fa2 backward 128x128 block_order=heads dq=dq-separate",
           "4096 64: fa3 forward 192x128 s2 wg4 schedule=full",
           "4096 64: fa3 forward 192x128 s2 wg4 schedule=no-overlap",
           "4096 64: fa3 backward 64x128 schedule=full",
           "4096 64: fa3 backward 64x128 schedule=no-overlap",
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=block fp8_schedule=tiles "
           "prequantized=true",
           "4096 64: fp8 forward 192x128 s2 wg4 fp8_scale=head fp8_schedule=tiles "
           "prequantized=true",
           "4096 64: fp8 backward 192x128 s2 wg4 fp8_scale=block fp8_schedule=tiles "
           "prequantized=true",
           "4096 64: fp8 backward 192x128 s2 wg4 fp8_scale=head fp8_schedule=tiles "
           "prequantized=true",
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=block prequantized=true",
           "4096 64: fp8-sm89 forward 128x128 s2 fp8_scale=head prequantized=true",
           "4096 64: fp8-sm89 backward 128x128 s2 fp8_scale=block prequantized=true",
           "4096 64: fp8-sm89 backward 128x128 s2 fp8_scale=head prequantized=true",
           "4096 64: cudnn forward stats=true",
           "4096 64: cudnn forward stats=false",
           "4096 64: cudnn backward stats=true",
           "4096 64: cudnn backward stats=false",
           "4096 64: cudnn-fp8 forward",
           "4096 64: cudnn-fp8 backward",
       }},
  };
  for (const PlanCase& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += " " + a;
    const auto rows = planned(c.args);
    EXPECT_EQ(rows, c.rows) << "fa-bench" << line << "\nplans " << as_code(rows);
  }
}

// A bad value of each flag: one line naming the flag and what it accepts, exit 2.
TEST(OptionFlags, BadValuesAreOneLineNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--fa2-order", "random"}, "error: --fa2-order: 'random' (accepted: blocks, heads, both)\n"},
      {{"--fa2-dq", "sometimes"},
       "error: --fa2-dq: 'sometimes' (accepted: atomic, separate, both)\n"},
      {{"--fp8-scale", "tensor"}, "error: --fp8-scale: 'tensor' (accepted: block, head, both)\n"},
      {{"--cudnn-stats", "maybe"}, "error: --cudnn-stats: 'maybe' (accepted: on, off, both)\n"},
      {{"--fa3-schedule", "fast"},
       "error: --fa3-schedule: 'fast' (accepted: full, no-pingpong, no-overlap, persistent, all, "
       "or a comma list)\n"},
      {{"--fa3-schedule", "full,all"},
       "error: --fa3-schedule: 'all' (accepted: full, no-pingpong, no-overlap, persistent, all, "
       "or a comma list)\n"},
      {{"--fa3-schedule", ""},
       "error: --fa3-schedule: '' (accepted: full, no-pingpong, no-overlap, persistent, all, or "
       "a comma list)\n"},
      // Given empty, --fp8-schedule is refused as --fa3-schedule always was (it used to mean the
      // default).
      {{"--fp8-schedule", ""},
       "error: --fp8-schedule: '' (accepted: tiles, persistent-tma-store, dynamic-tma-store, "
       "all, or a comma list)\n"},
      {{"--fp8-schedule", "tiles,"},
       "error: --fp8-schedule: '' (accepted: tiles, persistent-tma-store, dynamic-tma-store, "
       "all, or a comma list)\n"},
      {{"--fp8-schedule", "fast"},
       "error: --fp8-schedule: 'fast' (accepted: tiles, persistent-tma-store, dynamic-tma-store, "
       "all, or a comma list)\n"},
  };
  for (const auto& [args, line] : cases) {
    const auto out = parse(args);
    EXPECT_EQ(out.action, ParseOutcome::Action::exit) << args[0];
    EXPECT_EQ(out.exit_code, kExitBadInput) << args[0];
    EXPECT_EQ(out.output, line);
  }
  // The switch takes no value; one it cannot read as a bool is CLI11's error, one line.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--fp8-prequantized=maybe"},
                                               std::vector<std::string>{"--fa2-order"}}) {
    const auto out = parse(args);
    EXPECT_EQ(out.exit_code, kExitBadInput) << out.output;
    EXPECT_EQ(out.output.rfind("error: ", 0), 0u) << out.output;
    EXPECT_EQ(out.output.find('\n'), out.output.size() - 1) << out.output;
    EXPECT_NE(out.output.find(args[0].substr(0, args[0].find('='))), std::string::npos)
        << out.output;
  }
}

// Every option a variant declares has its flag in the registry (kernels/option_flags.hpp), whose
// words select exactly the values the option accepts; each flag sets an option a variant declares,
// once, and its help line names what it takes.
TEST(OptionFlags, EveryDeclaredOptionHasAFlag) {
  for (const VariantInfo& v : variant_registry()) {
    for (const OptionDecl& decl : v.options) {
      const OptionFlag* flag = option_flag(decl.name);
      ASSERT_NE(flag, nullptr) << v.name << "'s option " << decl.name << " has no flag";
      std::vector<OptionValue> values;
      for (const FlagWord& w : flag->words) values.push_back(w.value);
      EXPECT_TRUE(std::is_permutation(values.begin(), values.end(), decl.accepted.begin(),
                                      decl.accepted.end()))
          << "--" << flag->name << " selects other values than " << v.name << "'s option "
          << decl.name << " accepts";
    }
  }
  const std::string help = parse({"--help"}).output;
  std::set<std::string> names, options;
  for (const OptionFlag& flag : option_flags()) {
    EXPECT_TRUE(names.insert(flag.name).second) << "--" << flag.name << " declared twice";
    EXPECT_TRUE(options.insert(flag.option).second) << flag.option << " has two flags";
    const bool declared =
        std::any_of(variant_registry().begin(), variant_registry().end(),
                    [&](const VariantInfo& v) { return v.declared(flag.option) != nullptr; });
    EXPECT_TRUE(declared) << "--" << flag.name << " sets " << flag.option << ", declared by none";
    EXPECT_NE(help.find("--" + flag.name), std::string::npos) << help;
    EXPECT_FALSE(flag.help.empty()) << flag.name;
    if (flag.syntax == FlagSyntax::toggle) {  // bench/cli.cpp gives its text as true or false
      ASSERT_EQ(flag.words.size(), 2u) << flag.name;
      EXPECT_EQ(flag.words[0].word, "true");
      EXPECT_EQ(flag.words[1].word, "false");
      EXPECT_TRUE(flag.every.empty()) << flag.name;
      continue;
    }
    EXPECT_FALSE(flag.every.empty()) << flag.name;
    for (const FlagWord& w : flag.words) {
      EXPECT_NE(w.word, flag.every) << flag.name;
      EXPECT_NE(flag.help.find(w.word), std::string::npos) << "--" << flag.name << ": " << w.word;
    }
    EXPECT_NE(flag.help.find(flag.every), std::string::npos) << flag.name;
  }
}

// The words a flag's text selects: its syntax's, in the order the rows are planned.
TEST(OptionFlags, FlagValuesFollowTheSyntax) {
  const OptionFlag* order = option_flag(kOptionBlockOrder);
  const OptionFlag* schedule = option_flag(kOptionFa3Schedule);
  const OptionFlag* stats = option_flag(kOptionStats);
  ASSERT_TRUE(order && schedule && stats);
  std::vector<OptionValue> v;
  EXPECT_EQ(flag_values(*order, "both", &v), "");
  EXPECT_EQ(v, (std::vector<OptionValue>{std::string("blocks"), std::string("heads")}));
  EXPECT_EQ(flag_values(*stats, "off", &v), "");
  EXPECT_EQ(v, std::vector<OptionValue>{false});
  EXPECT_EQ(flag_values(*schedule, "persistent,full", &v), "");
  EXPECT_EQ(v, (std::vector<OptionValue>{std::string("persistent"), std::string("full")}));
  EXPECT_EQ(flag_values(*schedule, "all", &v), "");
  EXPECT_EQ(v.size(), find_variant("fa3")->declared(kOptionFa3Schedule)->accepted.size());
  EXPECT_EQ(flag_values(*order, "blocks,heads", &v),
            "--fa2-order: 'blocks,heads' (accepted: blocks, heads, both)");
  EXPECT_TRUE(v.empty());
  // A run that does not give the flag plans the option's default (for the shape, where it has
  // one); one that does plans what it gave.
  Options o;
  const OptionDecl* decl = find_variant("fa2")->declared(kOptionBlockOrder);
  EXPECT_EQ(requested_values(o, *decl), std::vector<OptionValue>{std::string("blocks")});
  o.option_text[kOptionBlockOrder] = "heads";
  EXPECT_EQ(requested_values(o, *decl), std::vector<OptionValue>{std::string("heads")});
}

}  // namespace
}  // namespace fa::bench
