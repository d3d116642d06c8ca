// vexp sweep SWEEP.toml [--out DIR] [--jobs N] [--ranks-per-trial R] [--dry-run]
// Runs every trial of a sweep as a child `vexp run` in DIR/trials/NNN/, records
// them in DIR/sweep.db, and resumes when run again.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "vexp/runtime/checkpoint.hpp"
#include "common.hpp"
#include "sweep/sweep.hpp"
#include "vexp/dsl/recipe.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace vexp::sweep;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct SweepArgs {
  std::string path, out;
  std::vector<std::string> plugin_paths;  // --plugin-path, passed on to every trial
  int jobs = 1, ranks = 1, gpus = -1;
  bool dry_run = false, retry_failed = false, no_report = false;
};

struct Running {
  int64_t id;
  pid_t pid;
  int slot;
  std::string dir;
  double started;
  bool pruned = false;
  std::string prune_message;
  int64_t checked_epoch = 0;
};

std::string trial_name(int64_t id) {
  char b[16];
  std::snprintf(b, sizeof b, "%03lld", static_cast<long long>(id));
  return b;
}

// Per-epoch evaluation values of `metric` in a run's metrics.jsonl.
std::map<int64_t, double> eval_curve(const fs::path& metrics, const std::string& metric) {
  std::map<int64_t, double> out;
  std::ifstream in(metrics);
  std::string line;
  const std::string key = metric == "val_loss" ? "val_loss" : metric;
  while (std::getline(in, line)) {
    try {
      json j = json::parse(line);
      if (j.value("type", "") == "eval" && j.contains(key) && j[key].is_number())
        out[j.value("epoch", int64_t(0))] = j[key].get<double>();
    } catch (const std::exception&) {
    }
  }
  return out;
}

// The last error line a trial printed (for the store's message column).
std::string last_error(const fs::path& log) {
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line))
    if (line.find("error") != std::string::npos || line.find("diverged") != std::string::npos) found = line;
  if (found.size() > 400) found = found.substr(0, 400);
  return found;
}

std::string hash_in_resolved(const fs::path& resolved) {
  std::ifstream in(resolved);
  std::string first;
  std::getline(in, first);
  const std::string tag = "# resolved recipe, hash ";
  return first.rfind(tag, 0) == 0 ? first.substr(tag.size()) : "";
}

bool has_checkpoint(const fs::path& dir) { return !latest_checkpoint((dir / "checkpoints").string()).empty(); }

// The line `vexp sweep` appends to a trial's log.txt when the trial ends:
// "==== vexp sweep: end of trial 003 failed, exit code 1, 12.345 s: message".
constexpr const char* kEndTag = "==== vexp sweep: end of trial ";

// `threads = N` of the [run] table of a resolved recipe ("" when absent).
std::string run_threads_in(const fs::path& resolved) {
  std::ifstream in(resolved);
  std::string line;
  bool in_run = false;
  static const std::regex threads(R"(^threads\s*=\s*(\d+)\s*$)");
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '[') in_run = line == "[run]";
    std::smatch m;
    if (in_run && std::regex_match(line, m, threads)) return m[1];
  }
  return "";
}

double mtime_s(const fs::path& p) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec) return 0;
  auto sys = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      t - fs::file_time_type::clock::now() + std::chrono::system_clock::now());
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

// Fills a new store from DIR/trials/NNN: a trial whose resolved.toml is this
// trial's recipe is done when it left a summary.json, failed / diverged / pruned
// when its log.txt ends so, and otherwise still to run (from its last checkpoint).
// Directories of another recipe stay pending: running them moves them aside.
void rebuild_from_trials(Store& store, Session& s, const Definition& def, const fs::path& dir) {
  std::map<std::string, int> counts;
  int found = 0;
  for (Row r : store.rows()) {
    const fs::path tdir = dir / "trials" / trial_name(r.id);
    if (!fs::is_directory(tdir)) continue;
    ++found;
    r.run_dir = fs::absolute(tdir).lexically_normal().string();
    const std::string threads = run_threads_in(tdir / "resolved.toml");
    std::vector<dsl::Override> ov;
    for (const auto& p : r.overrides) ov.push_back({p[0].get<std::string>(), p[1].get<std::string>()});
    if (!threads.empty()) ov.push_back({"run.threads", threads});
    // The recipe this trial runs, as launched alone or by a multi-rank sweep (MPI backend).
    const std::string found_hash = hash_in_resolved(tdir / "resolved.toml");
    bool ours = false;
    for (int variant = 0; variant < 2 && !ours && !found_hash.empty(); ++variant) {
      if (variant == 1) ov.push_back({"dist.backend", "\"mpi\""});
      s.diags = dsl::Diagnostics{};
      ours = open_recipe(s, def.base, ov, false) && s.plan && dsl::recipe_hash(s.plan->resolved) == found_hash;
    }
    // Attempts and the recorded outcome, from the log.
    std::string end_line;
    {
      std::ifstream in(tdir / "log.txt");
      std::string line;
      const std::string start = "==== vexp sweep: trial " + trial_name(r.id) + ", attempt ";
      while (std::getline(in, line)) {
        if (line.rfind(start, 0) == 0) {
          ++r.attempts;
          end_line.clear();
        } else if (line.rfind(kEndTag, 0) == 0) {
          end_line = line.substr(std::strlen(kEndTag));
        }
      }
    }
    r.started_at = mtime_s(tdir / "resolved.toml");
    json summary;
    bool has_summary = false;
    if (ours) {
      std::ifstream in(tdir / "summary.json");
      try {
        if (in) {
          in >> summary;
          has_summary = summary.is_object();
        }
      } catch (const std::exception&) {
      }
    }
    static const std::regex end_re(R"(^(\d+) (done|failed|diverged|pruned), exit code (-?\d+), ([0-9.]+) s(: (.*))?$)");
    std::smatch m;
    const bool ended = std::regex_match(end_line, m, end_re) && m[1] == trial_name(r.id);
    if (ours && has_summary) {
      r.status = "done";
      r.exit_code = 0;
      r.metrics = summary;
      if (summary.contains(def.metric) && summary[def.metric].is_number()) r.metric = summary[def.metric].get<double>();
      r.wall_s = ended ? std::stod(m[4]) : summary.value("wall_s", 0.0);
      r.finished_at = mtime_s(tdir / "summary.json");
    } else if (ours && ended && m[2] != "done") {
      r.status = m[2];
      r.exit_code = std::stoi(m[3]);
      r.wall_s = std::stod(m[4]);
      r.message = m[6];
      r.finished_at = mtime_s(tdir / "log.txt");
      json evals = json::object();
      for (auto& [e, v] : eval_curve(tdir / "metrics.jsonl", def.metric)) evals[std::to_string(e)] = v;
      r.metrics = json{{"evals", evals}};
    } else {
      r.status = "pending";  // interrupted, or another recipe's directory
      r.started_at = 0;
    }
    ++counts[r.status];
    store.restore(r);
  }
  std::cout << "rebuilt sweep.db from " << found << " trial director" << (found == 1 ? "y" : "ies") << ":";
  const char* sep = " ";
  for (const auto& [st, n] : counts) {
    std::cout << sep << n << " " << st;
    sep = ", ";
  }
  std::cout << "\n";
}

int count_gpus() {
  int n = 0;
  std::error_code ec;
  static const std::regex dev("nvidia[0-9]+");
  for (fs::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec))
    if (std::regex_match(it->path().filename().string(), dev)) ++n;
  return n;
}

std::string find_on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    fs::path p = fs::path(dir) / exe;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

void print_trials(const std::vector<Trial>& trials) {
  for (const auto& t : trials) {
    std::printf("trial %03lld  global_batch %-6lld lr %-10.6g", static_cast<long long>(t.id),
                static_cast<long long>(t.global_batch), t.lr);
    for (const auto& o : t.overrides) std::printf(" --set %s=%s", o.path.c_str(), o.text.c_str());
    std::printf("\n");
  }
}

}  // namespace

void add_sweep(CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "Run a batch-size / learning-rate study (or any grid/random sweep)");
  auto a = std::make_shared<SweepArgs>();
  cmd->add_option("sweep", a->path, "Sweep definition (.toml)")->required();
  cmd->add_option("--out", a->out, "Sweep directory (default: [sweep] out, else runs/sweeps/<name>)");
  cmd->add_option("--jobs", a->jobs, "Trials run at once; the cores (and GPUs) are split between them")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--ranks-per-trial", a->ranks, "Ranks per trial (> 1: each trial is launched with mpirun -np R)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--gpus", a->gpus, "GPUs to split between trials (default: the /dev/nvidiaN devices present)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--dry-run", a->dry_run, "Validate every trial and print them; run nothing");
  add_plugin_path_option(cmd, a->plugin_paths);
  cmd->add_flag("--retry-failed", a->retry_failed, "When resuming, rerun trials that failed");
  cmd->add_flag("--no-report", a->no_report, "Do not write the best recipe and the plots at the end");
  cmd->callback([a] {
    Session s;
    load_session_plugins(s, a->plugin_paths);
    dsl::Diagnostics d;
    std::optional<Definition> def;
    try {
      def = load_definition(a->path, d);
    } catch (const dsl::RecipeError& e) {
      throw Exit{kExitInvalid, e.what()};
    }
    std::vector<Trial> trials;
    s.require_data = !a->dry_run;  // listing trials needs no data; running them does
    if (def) trials = expand(*def, s, d);
    for (const auto& diag : d.sorted()) std::cerr << diag.str() << "\n";
    if (d.has_errors()) {
      size_t n = d.error_count();
      throw Exit{kExitInvalid, a->path + ": " + std::to_string(n) + (n == 1 ? " error" : " errors") +
                                   (def ? "; no trial was started" : "")};
    }
    // A trial of R ranks runs a world of dist.world_size GPUs: R must divide it.
    for (const auto& t : trials) {
      if (t.world_size % a->ranks != 0)
        d.error(dsl::Loc{a->path, 0, 0}, "trial " + std::to_string(t.id) + ": dist.world_size = " +
                                             std::to_string(t.world_size) + " is not a multiple of --ranks-per-trial " +
                                             std::to_string(a->ranks) + " (set dist.world_size in [sweep.set] or an axis)");
    }
    if (d.has_errors()) {
      for (const auto& diag : d.sorted()) std::cerr << diag.str() << "\n";
      throw Exit{kExitInvalid, a->path + ": " + std::to_string(d.error_count()) + " errors; no trial was started"};
    }
    std::cout << a->path << ": " << trials.size() << " trials, every recipe valid\n";
    if (a->dry_run) {
      print_trials(trials);
      return;
    }

    // Devices: cores (this process's affinity) and GPUs are split into `jobs` slots.
    cpu_set_t mask;
    CPU_ZERO(&mask);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof mask, &mask) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &mask)) cpus.push_back(c);
    if (cpus.empty())
      for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) cpus.push_back(static_cast<int>(c));
    const int jobs = a->jobs, ranks = a->ranks;
    const int per_slot = static_cast<int>(cpus.size()) / jobs;
    if (per_slot == 0)
      std::cerr << "vexp: warning: --jobs " << jobs << " exceeds the " << cpus.size()
                << " cores: trials will share cores (1 thread each)\n";
    const int threads = std::max(1, per_slot / ranks);
    const int gpus = a->gpus >= 0 ? a->gpus : count_gpus();
    if (gpus > 0 && jobs * ranks > gpus)
      throw Exit{kExitInvalid, "--jobs " + std::to_string(jobs) + " x --ranks-per-trial " + std::to_string(ranks) +
                                   " needs " + std::to_string(jobs * ranks) + " GPUs but " + std::to_string(gpus) +
                                   " are present: trials would share a GPU"};
    std::string mpirun;
    if (ranks > 1) {
      mpirun = find_on_path("mpirun");
      if (mpirun.empty()) throw Exit{kExitInvalid, "--ranks-per-trial " + std::to_string(ranks) + " needs mpirun on PATH"};
    }
    char exe_buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
    if (n <= 0) throw Exit{kExitFailure, "cannot find the vexp executable (/proc/self/exe)"};
    const std::string exe(exe_buf, static_cast<size_t>(n));

    // The store: new, or the same sweep resumed.
    fs::path dir = !a->out.empty() ? fs::path(a->out) : !def->out.empty() ? fs::path(def->out)
                                                                           : fs::path("runs/sweeps") / def->name;
    fs::create_directories(dir / "trials");
    const std::string hash = sweep_hash(*def, trials);
    // A damaged sweep.db is moved aside (kept) and rebuilt below: the trial
    // directories are the source of truth.
    const std::string db_path = (dir / "sweep.db").string();
    Store store;
    try {
      try {
        store.open(db_path, true);
        store.has_meta();
      } catch (const CorruptDatabase& e) {
        store.close();
        const std::string aside = move_aside(db_path);
        std::cerr << "vexp: warning: '" << db_path << "' is damaged (" << e.what() << "); kept it as '" << aside
                  << "' and rebuilding it from the trial directories in '" << (dir / "trials").string() << "'\n";
        store.open(db_path, true);
      }
    } catch (const std::exception& e) {
      throw Exit{kExitFailure, e.what()};
    }
    if (store.has_meta()) {
      if (store.meta("sweep_hash") != hash)
        throw Exit{kExitFailure, "'" + dir.string() + "' holds another sweep (definition hash " +
                                     store.meta("sweep_hash") + ", now " + hash + ", from '" +
                                     store.meta("sweep_file") +
                                     "'): the sweep file or its base recipe changed; use --out for a new directory"};
      std::cout << "resuming sweep in '" << dir.string() << "'\n";
    } else {
      store.insert_trials(trials, fs::absolute(dir / "trials").lexically_normal().string());
      std::ifstream in(a->path);
      std::stringstream text;
      text << in.rdbuf();
      store.set_meta({{"sweep_hash", hash}, {"sweep_file", fs::absolute(a->path).string()}, {"name", def->name},
                      {"metric", def->metric}, {"direction", def->direction}, {"base", def->base},
                      {"definition", text.str()}, {"created_at", std::to_string(now_s())}});
      // A new store over trial directories that exist (the old one damaged or deleted):
      // their results are taken from them.
      if (!fs::is_empty(dir / "trials")) rebuild_from_trials(store, s, *def, dir);
    }
    std::vector<int64_t> pending;
    std::map<int64_t, Row> by_id;
    std::map<int64_t, std::map<int64_t, double>> finished_curves;  // done trials' per-epoch metric
    for (auto& r : store.rows()) {
      if (r.status == "running") {
        std::cout << "trial " << trial_name(r.id) << " was interrupted: running it again\n";
        store.reset(r.id);
        r.status = "pending";
      }
      if (r.status == "failed" && a->retry_failed) {
        store.reset(r.id);
        r.status = "pending";
      }
      if (r.status == "pending") pending.push_back(r.id);
      if (r.status == "done" && def->prune) finished_curves[r.id] = eval_curve(fs::path(r.run_dir) / "metrics.jsonl", def->metric);
      by_id[r.id] = r;
    }
    std::cout << pending.size() << " trials to run, " << jobs << " at a time, " << threads << " thread"
              << (threads == 1 ? "" : "s") << " per " << (ranks > 1 ? "rank" : "trial") << "\n";
    std::cout.flush();

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    std::string base_backend = "local";
    {
      s.diags = dsl::Diagnostics{};
      if (open_recipe(s, def->base, {}, false) && s.plan) base_backend = s.plan->comm;
    }
    std::map<pid_t, Running> running;
    std::vector<bool> busy(static_cast<size_t>(jobs), false);
    size_t next = 0;
    int failed = 0;
    auto launch = [&](int64_t id, int slot) {
      const Row& row = by_id.at(id);
      const fs::path tdir = dir / "trials" / trial_name(id);
      std::vector<dsl::Override> ov;
      for (const auto& p : row.overrides) ov.push_back({p[0].get<std::string>(), p[1].get<std::string>()});
      ov.push_back({"run.threads", std::to_string(threads)});
      // A multi-rank trial needs a multi-rank backend: a recipe written for one
      // process ("local") runs on MPI, as `vexp run --nproc` does.
      if (ranks > 1 && base_backend == "local") ov.push_back({"dist.backend", "\"mpi\""});
      // An interrupted attempt: continue it when it has a checkpoint of this very
      // recipe; otherwise move it aside and start afresh.
      bool resume = false;
      if (fs::exists(tdir)) {
        std::string expected;
        s.diags = dsl::Diagnostics{};
        if (open_recipe(s, def->base, ov)) expected = dsl::recipe_hash(s.plan->resolved);
        if (has_checkpoint(tdir) && !expected.empty() && hash_in_resolved(tdir / "resolved.toml") == expected) {
          resume = true;
        } else if (!fs::is_empty(tdir)) {
          int k = 1;
          while (fs::exists(tdir.string() + ".attempt-" + std::to_string(k))) ++k;
          fs::rename(tdir, tdir.string() + ".attempt-" + std::to_string(k));
        }
      }
      fs::create_directories(tdir);
      std::vector<std::string> argv;
      if (ranks > 1) argv = {mpirun, "-np", std::to_string(ranks), "--allow-run-as-root", "--oversubscribe",
                             "--bind-to", "none", exe};
      else argv = {exe};
      argv.insert(argv.end(), {"run", def->base});
      for (const auto& o : ov) argv.insert(argv.end(), {"--set", o.path + "=" + o.text});
      for (const auto& d : s.plugin_dirs) argv.insert(argv.end(), {"--plugin-path", d});  // trials load what we may
      argv.insert(argv.end(), {"--out", tdir.string()});
      if (resume) argv.push_back("--resume");
      const fs::path log = tdir / "log.txt";
      {
        std::ofstream l(log, std::ios::app);
        std::time_t t = std::time(nullptr);
        char when[64];
        std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
        l << "==== vexp sweep: trial " << trial_name(id) << ", attempt " << row.attempts + 1 << ", " << when
          << (resume ? ", resuming" : "") << "\n$";
        for (const auto& x : argv) l << " " << x;
        l << "\n";
      }
      store.mark_running(id, tdir.string());
      // Cores of this slot; GPUs of this slot.
      std::vector<int> slot_cpus;
      if (per_slot > 0) slot_cpus.assign(cpus.begin() + slot * per_slot, cpus.begin() + (slot + 1) * per_slot);
      std::string gpu_list;
      for (int g = slot * ranks; gpus > 0 && g < (slot + 1) * ranks; ++g) gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(g);
      std::vector<char*> cargv;
      for (auto& x : argv) cargv.push_back(x.data());
      cargv.push_back(nullptr);
      const pid_t parent = ::getpid();
      pid_t pid = ::fork();
      if (pid < 0) throw Exit{kExitFailure, std::string("fork failed: ") + std::strerror(errno)};
      if (pid == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed sweep takes its trials with it
        if (::getppid() != parent) ::_exit(127);
        if (!slot_cpus.empty()) {
          cpu_set_t m;
          CPU_ZERO(&m);
          for (int c : slot_cpus) CPU_SET(c, &m);
          ::sched_setaffinity(0, sizeof m, &m);
        }
        if (gpus > 0) ::setenv("CUDA_VISIBLE_DEVICES", gpu_list.c_str(), 1);
        ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
        int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
          ::dup2(fd, 1);
          ::dup2(fd, 2);
          ::close(fd);
        }
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::execv(cargv[0], cargv.data());
        std::fprintf(stderr, "vexp sweep: cannot start '%s': %s\n", cargv[0], std::strerror(errno));
        ::_exit(127);
      }
      ::setpgid(pid, pid);
      running[pid] = Running{id, pid, slot, tdir.string(), now_s()};
      busy[static_cast<size_t>(slot)] = true;
      std::cout << "trial " << trial_name(id) << " started (" << row.params.dump() << ")"
                << (resume ? ", resuming its last checkpoint" : "") << "\n";
      std::cout.flush();
    };

    auto reap = [&](pid_t pid, int status) {
      auto it = running.find(pid);
      if (it == running.end()) return;
      Running r = it->second;
      running.erase(it);
      busy[static_cast<size_t>(r.slot)] = false;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      const double wall = now_s() - r.started;
      const fs::path tdir(r.dir);
      json metrics = json::object();
      std::optional<double> metric;
      std::string st, msg;
      auto curve = eval_curve(tdir / "metrics.jsonl", def->metric);
      if (r.pruned) {
        st = "pruned";
        msg = r.prune_message;
      } else if (code == 0) {
        std::ifstream in(tdir / "summary.json");
        try {
          in >> metrics;
          st = "done";
          if (metrics.contains(def->metric) && metrics[def->metric].is_number()) metric = metrics[def->metric].get<double>();
        } catch (const std::exception&) {
          st = "failed";
          msg = "the run exited 0 but left no readable summary.json";
        }
      } else if (code == kExitDiverged) {
        st = "diverged";
        msg = last_error(tdir / "log.txt");
      } else {
        st = "failed";
        msg = last_error(tdir / "log.txt");
        if (msg.empty()) msg = "exit code " + std::to_string(code);
      }
      if (st != "done") {
        json evals = json::object();
        for (auto& [e, v] : curve) evals[std::to_string(e)] = v;
        metrics["evals"] = evals;
      }
      store.finish(r.id, st, code, metric, metrics, wall, msg);
      {
        // The trial directory records its own outcome: a damaged sweep.db is rebuilt from it.
        std::ofstream l(tdir / "log.txt", std::ios::app);
        char buf[96];
        std::snprintf(buf, sizeof buf, ", exit code %d, %.3f s", code, wall);
        l << kEndTag << trial_name(r.id) << " " << st << buf << (msg.empty() ? "" : ": " + msg) << "\n";
      }
      if (st == "failed") ++failed;
      if (st == "done" && def->prune) finished_curves[r.id] = curve;
      char buf[160];
      std::snprintf(buf, sizeof buf, "trial %s %s in %.1f s", trial_name(r.id).c_str(), st.c_str(), wall);
      std::cout << buf;
      if (metric) std::cout << ": " << def->metric << " " << *metric;
      if (!msg.empty()) std::cout << " (" << msg << ")";
      std::cout << "\n";
      std::cout.flush();
    };

    auto check_pruning = [&]() {
      if (!def->prune) return;
      const bool higher = def->direction == "max";
      for (auto& [pid, r] : running) {
        if (r.pruned) continue;
        auto curve = eval_curve(fs::path(r.dir) / "metrics.jsonl", def->metric);
        if (curve.empty()) continue;
        const auto& [epoch, value] = *curve.rbegin();
        if (epoch < def->prune_after || epoch <= r.checked_epoch) continue;
        r.checked_epoch = epoch;
        std::vector<double> others;
        for (const auto& [id, c] : finished_curves) {
          auto it = c.find(epoch);
          if (it != c.end()) others.push_back(it->second);
        }
        if (static_cast<int64_t>(others.size()) < def->prune_min_trials) continue;
        std::sort(others.begin(), others.end());
        const size_t m = others.size();
        const double median = m % 2 ? others[m / 2] : 0.5 * (others[m / 2 - 1] + others[m / 2]);
        if (higher ? value < median : value > median) {
          char buf[200];
          std::snprintf(buf, sizeof buf, "pruned after epoch %lld: %s %.4g is worse than the median %.4g of %zu finished trials",
                        static_cast<long long>(epoch), def->metric.c_str(), value, median, m);
          r.pruned = true;
          r.prune_message = buf;
          ::kill(-r.pid, SIGTERM);
        }
      }
    };

    while (!g_stop && (next < pending.size() || !running.empty())) {
      for (int slot = 0; slot < jobs && next < pending.size() && !g_stop; ++slot)
        if (!busy[static_cast<size_t>(slot)]) launch(pending[next++], slot);
      int status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) reap(pid, status);
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
      throw Exit{130, "interrupted: " + std::to_string(running.size()) +
                          " running trial(s) will run again when this command is repeated"};
    }

    std::cout << "\n" << results_text(dir.string(), "table", "");
    if (!a->no_report) {
      try {
        int64_t best = write_best_recipe(dir.string(), (dir / "best_recipe.toml").string());
        std::cout << "best trial " << trial_name(best) << ": recipe written to " << (dir / "best_recipe.toml").string() << "\n";
      } catch (const Exit& e) {
        std::cerr << "vexp: warning: " << e.message << "\n";
      }
      try {
        auto files = write_report(dir.string(), (dir / "report").string());
        std::cout << "report: " << files.size() << " plots in " << (dir / "report").string() << "\n";
      } catch (const Exit& e) {
        std::cerr << "vexp: warning: " << e.message << "\n";
      }
    }
    failed = 0;  // this invocation's and earlier ones' (kept unless --retry-failed)
    for (const auto& r : store.rows()) failed += r.status == "failed" ? 1 : 0;
    if (failed > 0)
      throw Exit{kExitFailure, std::to_string(failed) + " trial(s) failed; see their log.txt (rerun with --retry-failed)"};
  });
}

}  // namespace vexp::cli
