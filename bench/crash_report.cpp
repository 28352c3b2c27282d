#include "bench/crash_report.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <initializer_list>

namespace fa::bench {
namespace {

constexpr std::size_t kContextBytes = 512;
char g_context[kContextBytes] = "";
std::atomic<bool> g_installed{false};

void write_text(const char* s) {
  std::size_t left = std::strlen(s);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, s, left);
    if (n <= 0) return;
    s += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Async-signal-safe: write(2), backtrace (glibc's is safe once loaded: it is called once at
// install time so libgcc is already mapped), sigaction, raise.
extern "C" void on_fatal_signal(int sig) {
  write_text("\nfa-bench: fatal signal ");
  write_text(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  write_text(" while ");
  write_text(g_context[0] ? g_context : "starting up or shutting down (no row running)");
  write_text("\nfa-bench: native stack (resolve with addr2line -Cfe <fa-bench> <offset>):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

}  // namespace

void install_crash_report() {
  if (g_installed.exchange(true)) return;
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

void set_crash_context(const char* what) {
  std::strncpy(g_context, what ? what : "", kContextBytes - 1);
  g_context[kContextBytes - 1] = '\0';
}

const char* crash_context() {
  return g_context;
}

}  // namespace fa::bench
