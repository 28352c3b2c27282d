// The crash report (bench/crash_report.hpp): a fatal signal names the row and step that were
// running and the process still dies of that signal. Death tests run the statement in a child.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "bench/crash_report.hpp"

namespace {

using namespace fa::bench;

void die_in_a_row(int sig) {
  install_crash_report();
  set_crash_context("N=4096 d=128 causal cudnn bwd: hardware counters (CUPTI)");
  std::raise(sig);
}

TEST(CrashReport, SegfaultNamesTheRowAndStepAndStillDiesOfIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(die_in_a_row(SIGSEGV), testing::KilledBySignal(SIGSEGV),
              "fatal signal SEGV while N=4096 d=128 causal cudnn bwd: hardware counters "
              "\\(CUPTI\\)\nfa-bench: native stack");
}

TEST(CrashReport, AbortAndBusErrorAreReportedToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(die_in_a_row(SIGABRT), testing::KilledBySignal(SIGABRT),
              "fatal signal ABRT while N=4096");
  EXPECT_EXIT(die_in_a_row(SIGBUS), testing::KilledBySignal(SIGBUS),
              "fatal signal BUS while N=4096");
}

TEST(CrashReport, NoRowRunningSaysSo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_crash_report();
        set_crash_context("");
        std::raise(SIGSEGV);
      },
      testing::KilledBySignal(SIGSEGV), "while starting up or shutting down");
}

TEST(CrashReport, LongContextIsCutNotOverflowed) {
  const std::string long_text(2000, 'x');
  set_crash_context(long_text.c_str());
  EXPECT_EQ(std::string(crash_context()), std::string(511, 'x'));
  set_crash_context(nullptr);
  EXPECT_STREQ(crash_context(), "");
}

}  // namespace
