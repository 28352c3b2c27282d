// What fa-bench was doing when the process died: a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT) prints one line naming the row and its step, then the native stack, then the
// process dies of the same signal (exit status 128 + signal, as without the handler). The rows
// finished before are already in the result file (checkpointed after every row).
//
// Why: a sweep that segfaulted at a cuDNN row on the H200 (2026-11-23) left only "Segmentation
// fault" and no way to tell which row or step (verification, timing, counters) was running.
#pragma once

namespace fa::bench {

// Installs the handlers (once; later calls do nothing).
void install_crash_report();

// The step now running, e.g. "N=4096 d=128 causal cudnn bwd: counters". Copied into a fixed
// buffer (the handler may not allocate); longer text is cut.
void set_crash_context(const char* what);

// The text set last ("" at first): for tests.
const char* crash_context();

}  // namespace fa::bench
