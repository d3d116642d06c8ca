#include "vexp/sweep/local_driver.hpp"

#include "vexp/base/attempt.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/files.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "vexp/sweep/directory.hpp"
#include "stop_signal.hpp"
#include "vexp/sweep/error.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/dsl/recipe.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using detail::g_stop;

struct Running {
  int64_t id = 0;
  pid_t pid = 0;
  int slot = 0;
  std::string dir;
  double started = 0;
  double load1_start = -1;  // the machine's 1-minute load average when it started
  bool pruned = false;
  std::string prune_message;
  int64_t checked_epoch = 0;
};

// The 1-minute load average, or -1 where the system does not say.
double load1() {
  double l[1];
  return ::getloadavg(l, 1) == 1 ? l[0] : -1;
}

int count_gpus() {
  int n = 0;
  std::error_code ec;
  static const std::regex dev("nvidia[0-9]+");
  for (fs::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec))
    if (std::regex_match(it->path().filename().string(), dev)) ++n;
  return n;
}

// Forks and execs `argv` in its own process group, bound to `cpus` (all when
// empty), with CUDA_VISIBLE_DEVICES = `gpu_list` when `gpus` > 0, its output appended to `log`.
pid_t start_child(std::vector<std::string> argv, const std::vector<int>& cpus, int gpus, const std::string& gpu_list,
                  int threads, const fs::path& log) {
  std::vector<char*> cargv;
  for (auto& x : argv) cargv.push_back(x.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed sweep takes its trials with it
    if (::getppid() != parent) ::_exit(127);
    if (!cpus.empty()) {
      cpu_set_t m;
      CPU_ZERO(&m);
      for (int c : cpus) CPU_SET(c, &m);
      ::sched_setaffinity(0, sizeof m, &m);
    }
    if (gpus > 0) ::setenv("CUDA_VISIBLE_DEVICES", gpu_list.c_str(), 1);
    ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    // The trial's log, as log_attempt appended to it (no link followed, one name).
    const int fd = base::open_append_fd(log.c_str(), true);
    if (fd < 0) {
      std::fprintf(stderr, "vexp sweep: cannot write '%s': %s\n", log.c_str(), base::append_problem(errno).c_str());
      ::_exit(126);
    }
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(cargv[0], cargv.data());
    std::fprintf(stderr, "vexp sweep: cannot start '%s': %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

}  // namespace

Slots plan_slots(int jobs, int ranks, int gpus) {
  Slots s;
  s.jobs = jobs;
  s.ranks = ranks;
  // Devices: cores (this process's affinity) and GPUs are split into `jobs` slots.
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mask)) s.cpus.push_back(c);
  if (s.cpus.empty())
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) s.cpus.push_back(static_cast<int>(c));
  s.per_slot = static_cast<int>(s.cpus.size()) / jobs;
  if (s.per_slot == 0)
    std::cerr << "vexp: warning: --jobs " << jobs << " exceeds the " << s.cpus.size()
              << " cores: trials will share cores (1 thread each)\n";
  s.threads = std::max(1, s.per_slot / ranks);
  s.gpus = gpus >= 0 ? gpus : count_gpus();
  if (s.gpus > 0 && jobs * ranks > s.gpus)
    throw InvalidUse("--jobs " + std::to_string(jobs) + " x --ranks-per-trial " + std::to_string(ranks) +
                                      " needs " + std::to_string(jobs * ranks) + " GPUs but " + std::to_string(s.gpus) +
                                      " are present: trials would share a GPU");
  return s;
}

void run_trials(Store& store, Session& s, const Definition& def, const fs::path& dir, const Slots& slots,
                const Launch& launch_opts) {
  const int jobs = slots.jobs, ranks = slots.ranks, threads = slots.threads;
  std::vector<int64_t> pending;
  std::map<int64_t, Row> by_id;
  std::map<int64_t, std::map<int64_t, double>> finished_curves;  // done trials' per-epoch metric
  for (auto& r : store.rows()) {
    if (r.status == "running") {
      std::cout << "trial " << trial_name(r.id) << " was interrupted: running it again\n";
      store.reset(r.id);
      r.status = "pending";
    }
    if (r.status == "failed" && launch_opts.retry_failed) {
      store.reset(r.id);
      r.status = "pending";
    }
    if (r.status == "pending") pending.push_back(r.id);
    if (r.status == "done" && def.prune) finished_curves[r.id] = read_curves(r.run_dir, def.metric).eval;
    by_id[r.id] = r;
  }
  std::cout << pending.size() << " trials to run, " << jobs << " at a time, " << threads << " thread"
            << (threads == 1 ? "" : "s") << " per " << (ranks > 1 ? "rank" : "trial") << "\n";
  std::cout.flush();

  detail::catch_stop_signals(false);

  std::string base_backend = "local";
  {
    if (open_trial_recipe(s, def.base, {}, false) && s.plan) base_backend = s.plan->comm;
  }
  std::map<pid_t, Running> running;
  std::vector<bool> busy(static_cast<size_t>(jobs), false);
  size_t next = 0;

  auto launch = [&](int64_t id, int slot) {
    const Row& row = by_id.at(id);
    const fs::path tdir = dir / "trials" / trial_name(id);
    std::vector<dsl::Override> ov = overrides_of(row);
    ov.push_back({"run.threads", std::to_string(threads)});
    // A multi-rank trial needs a multi-rank backend: a recipe written for one
    // process ("local") runs on MPI, as `vexp run --nproc` does.
    if (ranks > 1 && base_backend == "local") ov.push_back({"dist.backend", "\"mpi\""});
    // An interrupted attempt: continue it when it has a checkpoint of this very
    // recipe; otherwise move it aside and start afresh.
    bool resume = false;
    if (fs::exists(tdir)) {
      std::string expected;
      if (open_trial_recipe(s, def.base, ov, true)) expected = dsl::recipe_hash(s.plan->resolved);
      if (has_checkpoint(tdir) && !expected.empty() && hash_in_resolved(rundir::RunDir(tdir).resolved()) == expected) {
        resume = true;
      } else if (!fs::is_empty(tdir)) {
        move_attempt_aside(tdir);
      }
    }
    fs::create_directories(tdir);
    std::vector<std::string> argv;
    if (ranks > 1) {
      // vexp's one mpirun line (--allow-run-as-root only as root), started by the path
      // the CLI found, as the trial is exec'ed without a PATH search.
      argv = base::mpirun_argv(static_cast<int>(ranks), {launch_opts.exe});
      argv[0] = launch_opts.mpirun;
    } else {
      argv = {launch_opts.exe};
    }
    argv.insert(argv.end(), {"run", def.base});
    for (const auto& o : ov) argv.insert(argv.end(), {"--set", o.path + "=" + o.text});
    for (const auto& d : s.plugin_dirs) argv.insert(argv.end(), {"--plugin-path", d});  // trials load what we may
    argv.insert(argv.end(), {"--out", tdir.string()});
    if (resume) argv.push_back("--resume");
    const fs::path log = rundir::RunDir(tdir).trial_log();
    log_attempt(log, id, row.attempts + 1, resume, argv);
    store.mark_running(id, tdir.string());
    // Cores of this slot; GPUs of this slot.
    std::vector<int> slot_cpus;
    if (slots.per_slot > 0)
      slot_cpus.assign(slots.cpus.begin() + slot * slots.per_slot, slots.cpus.begin() + (slot + 1) * slots.per_slot);
    std::string gpu_list;
    for (int g = slot * ranks; slots.gpus > 0 && g < (slot + 1) * ranks; ++g)
      gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(g);
    const pid_t pid = start_child(argv, slot_cpus, slots.gpus, gpu_list, threads, log);
    Running& r = running[pid];
    r.id = id;
    r.pid = pid;
    r.slot = slot;
    r.dir = tdir.string();
    r.started = now_s();
    r.load1_start = load1();
    busy[static_cast<size_t>(slot)] = true;
    std::cout << "trial " << trial_name(id) << " started (" << row.params.dump() << ")"
              << (resume ? ", resuming its last checkpoint" : "") << "\n";
    std::cout.flush();
  };

  auto reap = [&](pid_t pid, int status, const struct rusage& usage) {
    auto it = running.find(pid);
    if (it == running.end()) return;
    Running r = it->second;
    running.erase(it);
    busy[static_cast<size_t>(r.slot)] = false;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const double wall = now_s() - r.started;
    const fs::path tdir(r.dir);
    const rundir::RunDir run(tdir);
    json metrics = json::object();
    std::optional<double> metric;
    std::string st, msg;
    std::map<int64_t, double> curve;
    if (auto curves = base::attempt([&] { return read_curves(tdir, def.metric); }))
      curve = std::move(curves).value().eval;
    else
      std::cerr << "vexp: warning: trial " << trial_name(r.id) << ": " << curves.message() << "\n";
    if (r.pruned) {
      st = "pruned";
      msg = r.prune_message;
    } else if (code == 0) {
      auto summary = base::attempt([&] { return rundir::read_summary(run.summary()); });
      if (summary) metrics = std::move(summary).value();
      if (!summary || !metrics.is_object()) {
        st = "failed";
        msg = "the run exited 0 but left no readable summary.json (" +
              (summary ? std::string("it has no summary.json") : summary.message()) + ")";
        metrics = json::object();
      } else {
        st = "done";
        if (metrics.contains(def.metric) && metrics[def.metric].is_number()) metric = metrics[def.metric].get<double>();
      }
    } else if (code == launch_opts.diverged_exit_code) {
      st = "diverged";
      msg = last_error(run.trial_log());
    } else {
      st = "failed";
      msg = last_error(run.trial_log());
      if (msg.empty()) msg = "exit code " + std::to_string(code);
    }
    if (st != "done") {
      json evals = json::object();
      for (auto& [e, v] : curve) evals[std::to_string(e)] = v;
      metrics["evals"] = evals;
    }
    // What the trial got of the machine, for the reports' throughput comparison
    // (report::throughput_note): its CPU time and the load around it.
    if (metrics.is_object()) {
      metrics["cpu_s"] = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
      if (r.load1_start >= 0) metrics["load1_start"] = r.load1_start;
      if (const double l = load1(); l >= 0) metrics["load1_end"] = l;
      metrics["cores"] = static_cast<int64_t>(std::thread::hardware_concurrency());
    }
    store.finish(r.id, st, code, metric, metrics, wall, msg);
    record_to_target(store, def, r.id, tdir, by_id.at(r.id).global_batch);
    // The trial directory records its own outcome: a damaged sweep.db is rebuilt from it.
    log_outcome(run.trial_log(), r.id, st, code, wall, msg);
    if (st == "done" && def.prune) finished_curves[r.id] = curve;
    char buf[160];
    std::snprintf(buf, sizeof buf, "trial %s %s in %.1f s", trial_name(r.id).c_str(), st.c_str(), wall);
    std::cout << buf;
    if (metric) std::cout << ": " << def.metric << " " << *metric;
    if (!msg.empty()) std::cout << " (" << msg << ")";
    std::cout << "\n";
    std::cout.flush();
  };

  auto check_pruning = [&]() {
    if (!def.prune) return;
    for (auto& [pid, r] : running) {
      if (r.pruned) continue;
      const std::string why = prune_reason(def, read_curves(r.dir, def.metric).eval, finished_curves, r.checked_epoch);
      if (!why.empty()) {
        r.pruned = true;
        r.prune_message = why;
        ::kill(-r.pid, SIGTERM);
      }
    }
  };

  while (!g_stop && (next < pending.size() || !running.empty())) {
    for (int slot = 0; slot < jobs && next < pending.size() && !g_stop; ++slot)
      if (!busy[static_cast<size_t>(slot)]) launch(pending[next++], slot);
    int status = 0;
    pid_t pid;
    struct rusage usage {};
    while ((pid = ::wait4(-1, &status, WNOHANG, &usage)) > 0) reap(pid, status, usage);
    check_pruning();
    if (!running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (g_stop) {
    for (auto& [pid, r] : running) ::kill(-pid, SIGTERM);
    for (auto& [pid, r] : running) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      store.reset(r.id);
    }
    throw Interrupted("interrupted: " + std::to_string(running.size()) +
                      " running trial(s) will run again when this command is repeated");
  }
}

}  // namespace vexp::sweep
