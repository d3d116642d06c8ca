// The stop request both sweep drivers poll: SIGINT and SIGTERM (and, for the
// Slurm driver, SIGHUP: a logout) set it; the loop then ends its pass and stops.
#pragma once

#include <signal.h>

#include <csignal>

namespace vexp::sweep::detail {

inline volatile std::sig_atomic_t g_stop = 0;

inline void on_stop_signal(int) { g_stop = 1; }

inline void catch_stop_signals(bool hangup) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (hangup) sigaction(SIGHUP, &sa, nullptr);
}

}  // namespace vexp::sweep::detail
