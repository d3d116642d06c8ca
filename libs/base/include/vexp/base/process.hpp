// Starting other programs. Always an argv (posix_spawnp), never a command string
// handed to a shell: no path, name or value from a file can become shell syntax.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "vexp/base/error.hpp"

namespace vexp::base {

struct SpawnOptions {
  std::string stdin_path;   // "" = inherit; else opened read-only
  std::string stdout_path;  // "" = inherit; else created/truncated (or appended, below)
  std::string stderr_path;  // "" = inherit; "=stdout" sends stderr where stdout goes
  bool append = false;      // open stdout/stderr files for appending
  std::vector<std::string> env_set;  // "KEY=VALUE" entries added to (or replacing in) the environment
  // Start the program in a process group of its own (its pid): a terminal's Ctrl-C
  // then reaches only vexp, which decides what the child gets (launch_local_ranks).
  bool own_process_group = false;
};

// How a program ended: its exit code, or the signal that killed it.
struct ProcessStatus {
  int exit_code = -1;  // 0..255 when it exited
  int signal = 0;      // the signal number when a signal ended it
  bool ok() const { return signal == 0 && exit_code == 0; }
  // "exit code N" or "signal N (NAME)".
  std::string describe() const;
};

// Runs argv[0] (looked up on PATH when it has no '/') with `argv` and waits for it.
// Throws Error when it cannot be started (not found, not executable, a redirect fails).
ProcessStatus run_program(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// Starts it without waiting; returns its pid. Throws Error as above.
int start_program(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// Waits for a pid from start_program (EINTR retried).
ProcessStatus wait_program(int pid);

struct Captured {
  ProcessStatus status;
  std::string out;  // standard output (and standard error when merged), at most max_bytes
  bool truncated = false;
};

// Runs the program with standard output captured (standard error too when
// merge_stderr; else inherited), at most max_bytes kept (the rest read and dropped).
// `input`, when given, is written to its standard input.
Captured run_capture(const std::vector<std::string>& argv, bool merge_stderr = false, std::size_t max_bytes = 1 << 20,
                     const std::optional<std::string>& input = std::nullopt);

// The path of a program found on PATH (or `name` itself when it holds a '/' and is
// executable), or nullopt.
std::optional<std::string> find_program(const std::string& name);

// This process: its executable (/proc/self/exe; "" when unknown) and its argv
// (/proc/self/cmdline; empty when unreadable).
std::string exe_path();
std::vector<std::string> own_argv();

// The one place vexp builds an Open MPI `mpirun` command line for ranks on this
// machine: `mpirun [--allow-run-as-root] --oversubscribe --bind-to none -np NP
// PROGRAM...` (--allow-run-as-root only when running as root; oversubscribed and
// unbound, as ranks share this machine's cores). With `rank_stdout_dir`, rank r's
// standard output goes to DIR/rank.r.out: each rank redirects its own (a fixed
// /bin/sh script reading the rank Open MPI puts in its environment, the program's
// argv passed as arguments, never as shell text), because --output-filename lays
// its files out differently in Open MPI 4 and 5.
std::vector<std::string> mpirun_argv(int np, const std::vector<std::string>& program,
                                     const std::string& rank_stdout_dir = "");

}  // namespace vexp::base
