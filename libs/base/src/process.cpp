#include "vexp/base/process.hpp"
#include "vexp/base/files.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace vexp::base {
namespace {

std::string quoted_argv0(const std::vector<std::string>& argv) { return "'" + (argv.empty() ? "" : argv[0]) + "'"; }

// The environment with env_set applied (KEY=VALUE replaces KEY).
std::vector<std::string> merged_env(const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& kv : set) {
    const auto eq = kv.find('=');
    const std::string key = kv.substr(0, eq == std::string::npos ? kv.size() : eq + 1);
    bool replaced = false;
    for (auto& e : env)
      if (e.compare(0, key.size(), key) == 0) e = kv, replaced = true;
    if (!replaced) env.push_back(kv);
  }
  return env;
}

struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() { posix_spawn_file_actions_init(&fa); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
};

int spawn(const std::vector<std::string>& argv, const SpawnOptions& o, FileActions& fa) {
  if (argv.empty() || argv[0].empty()) throw Error("cannot start a program: no program named");
  // No O_CLOEXEC: these descriptors are the child's standard streams.
  const int out_flags = O_WRONLY | O_CREAT | (o.append ? O_APPEND : O_TRUNC);
  if (!o.stdin_path.empty()) posix_spawn_file_actions_addopen(&fa.fa, 0, o.stdin_path.c_str(), O_RDONLY, 0);
  if (!o.stdout_path.empty()) posix_spawn_file_actions_addopen(&fa.fa, 1, o.stdout_path.c_str(), out_flags, 0644);
  if (o.stderr_path == "=stdout")
    posix_spawn_file_actions_adddup2(&fa.fa, 1, 2);
  else if (!o.stderr_path.empty())
    posix_spawn_file_actions_addopen(&fa.fa, 2, o.stderr_path.c_str(), out_flags, 0644);
  // Redirect targets are checked here so that the error names them (posix_spawn only
  // reports a bare errno for a failed file action).
  for (const std::string* p : {&o.stdout_path, &o.stderr_path}) {
    if (p->empty() || *p == "=stdout") continue;
    const int fd = ::open(p->c_str(), (out_flags & ~O_TRUNC) | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot start " + quoted_argv0(argv) + ": cannot open '" + *p + "': " + std::strerror(errno));
    ::close(fd);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = merged_env(o.env_set);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with default dispositions and an empty mask, whatever vexp set
  // for itself (its SIGINT/SIGTERM handlers, blocked signals of worker threads).
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (o.own_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa.fa, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    if (rc == ENOENT) throw Error("cannot start " + quoted_argv0(argv) + ": not found on PATH");
    throw Error("cannot start " + quoted_argv0(argv) + ": " + std::strerror(rc));
  }
  return pid;
}

}  // namespace

std::string ProcessStatus::describe() const {
  if (signal) {
    const char* name = ::strsignal(signal);
    return "signal " + std::to_string(signal) + (name ? " (" + std::string(name) + ")" : "");
  }
  return "exit code " + std::to_string(exit_code);
}

int start_program(const std::vector<std::string>& argv, const SpawnOptions& options) {
  FileActions fa;
  return spawn(argv, options, fa);
}

ProcessStatus wait_program(int pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(std::string("waiting for a child process failed: ") + std::strerror(errno));
  }
  ProcessStatus s;
  if (WIFEXITED(status)) s.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

ProcessStatus run_program(const std::vector<std::string>& argv, const SpawnOptions& options) {
  return wait_program(start_program(argv, options));
}

Captured run_capture(const std::vector<std::string>& argv, bool merge_stderr, std::size_t max_bytes,
                     const std::optional<std::string>& input) {
  int out[2], in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) throw Error(std::string("cannot make a pipe: ") + std::strerror(errno));
  if (input && ::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    throw Error(std::string("cannot make a pipe: ") + std::strerror(errno));
  }
  FileActions fa;
  posix_spawn_file_actions_adddup2(&fa.fa, out[1], 1);
  if (merge_stderr) posix_spawn_file_actions_adddup2(&fa.fa, out[1], 2);
  if (input) posix_spawn_file_actions_adddup2(&fa.fa, in[0], 0);
  int pid = -1;
  try {
    pid = spawn(argv, SpawnOptions{}, fa);
  } catch (...) {
    ::close(out[0]), ::close(out[1]);
    if (input) ::close(in[0]), ::close(in[1]);
    throw;
  }
  ::close(out[1]);
  Captured c;
  if (input) {
    ::close(in[0]);
    // A child that exits without reading must not kill vexp with SIGPIPE.
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ign, &old);
    const std::string& data = *input;
    std::size_t off = 0;
    // Interleave writing the input and draining the output so neither pipe fills up.
    ::fcntl(in[1], F_SETFL, O_NONBLOCK);
    char buf[65536];
    bool out_open = true;
    while (off < data.size() && out_open) {
      pollfd p[2] = {{in[1], POLLOUT, 0}, {out[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
        const ssize_t w = ::write(in[1], data.data() + off, data.size() - off);
        if (w > 0)
          off += static_cast<std::size_t>(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
          break;
      }
      if (p[1].revents & (POLLIN | POLLHUP)) {
        const ssize_t r = ::read(out[0], buf, sizeof buf);
        if (r <= 0) {
          out_open = r < 0 && errno == EINTR;
        } else {
          const std::size_t keep = std::min<std::size_t>(static_cast<std::size_t>(r), max_bytes - std::min(max_bytes, c.out.size()));
          c.out.append(buf, keep);
          if (keep < static_cast<std::size_t>(r)) c.truncated = true;
        }
      }
    }
    ::close(in[1]);
    ::sigaction(SIGPIPE, &old, nullptr);
  }
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(out[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    const std::size_t keep = std::min<std::size_t>(static_cast<std::size_t>(r), max_bytes - std::min(max_bytes, c.out.size()));
    c.out.append(buf, keep);
    if (keep < static_cast<std::size_t>(r)) c.truncated = true;
  }
  ::close(out[0]);
  c.status = wait_program(pid);
  return c;
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = std::min(p.find(':', start), p.size());
    std::string dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + name;
    struct stat st {};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return std::nullopt;
}

std::string exe_path() {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return len > 0 ? std::string(self, static_cast<size_t>(len)) : std::string();
}

std::vector<std::string> own_argv() {
  std::vector<std::string> argv;
  const std::string text = read_file_or_empty("/proc/self/cmdline", 1 << 20);
  size_t start = 0;
  for (size_t nul; (nul = text.find('\0', start)) != std::string::npos; start = nul + 1)
    argv.push_back(text.substr(start, nul - start));
  if (start < text.size()) argv.push_back(text.substr(start));
  return argv;
}

std::vector<std::string> mpirun_argv(int np, const std::vector<std::string>& program,
                                     const std::string& rank_stdout_dir) {
  std::vector<std::string> m{"mpirun"};
  if (::geteuid() == 0) m.push_back("--allow-run-as-root");
  m.insert(m.end(), {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(np)});
  if (!rank_stdout_dir.empty())
    m.insert(m.end(), {"/bin/sh", "-c",
                       "r=${OMPI_COMM_WORLD_RANK:?not started by Open MPI mpirun}; exec \"$@\" >\"$0/rank.$r.out\"",
                       rank_stdout_dir});
  m.insert(m.end(), program.begin(), program.end());
  return m;
}

}  // namespace vexp::base
