#include "commands/run_dist.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "vexp/base/attempt.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/dry_run.hpp"
#include "vexp/runtime/launcher.hpp"

namespace vexp::cli {

namespace {
bool under_launcher() { return detect_launcher().mpi; }
}  // namespace

void refuse_backend_of_one(const std::string& recipe_path, const std::string& backend, const std::string& work) {
  if (backend != "local") return;
  const Launcher l = detect_launcher();
  if (!l.several()) return;
  // Every task would train alone in the same run directory; only the first says why.
  // The others wait for it first (5 s at most): srun --kill-on-bad-exit stops the
  // whole step at the first bad exit, which could otherwise be a quiet task's before
  // the first one has printed its line (seen under load: no reason at all was shown).
  if (l.rank > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    throw base::invalid("");
  }
  const std::string tasks =
      l.tasks > 0 ? std::to_string(l.tasks) + " tasks (" + l.var + "=" + std::to_string(l.tasks) + ")"
                  : "more than one task (" + l.var + ")";
  throw base::invalid(recipe_path + ": dist.backend = \"local\" " + work + "s in one process, but " + l.name +
                               " started " + tasks + ", which would each " + work +
                               " alone; add --set dist.backend=mpi (or set it in the recipe's [dist]), or start one "
                               "task");
}

void print_dry_run(const RecipeArgs& args, int nproc) {
  Session s;
  if (!open_session_for_planning(s, args)) throw base::invalid("");
  if (nproc <= 0) refuse_backend_of_one(args.path, s.plan->comm);
  const int64_t ranks = nproc > 0 ? nproc : launched_ranks_from_env();
  std::vector<std::string> groups;
  std::string size_note;
  auto planned = base::attempt([&] { return plan_run(s, ranks, nullptr, &size_note, &groups); });
  // A recipe's own error, at its line ([[optim.groups]]), passes as it is; any other
  // is the recipe's too, named by its file.
  if (!planned && planned.kind() != base::ErrorKind::invalid) throw base::invalid(args.path + ": " + planned.message());
  const DistPlan p = std::move(planned).value();
  if (!size_note.empty()) std::cerr << "vexp: note: " << size_note << "\n";
  std::cout << "plan of " << args.path << " (dry run: no data loaded, nothing trained)\n" << describe(p);
  std::cout << "optimizer:         " << s.plan->optim.type << ", " << groups.size() - 1 << " parameter group"
            << (groups.size() == 2 ? "" : "s") << "\n";
  for (const auto& row : groups) std::cout << "  " << row << "\n";
  // The training parts the recipe names (plugins), in their order; `vexp check --print`
  // shows their parameters.
  const auto names = [](const std::vector<dsl::PluginUse>& uses, const char* none) {
    std::string out;
    for (const auto& u : uses) out += (out.empty() ? "" : ", ") + base::printable(u.type);
    return out.empty() ? std::string(none) : out;
  };
  const dsl::RecipePlan& r = *s.plan;
  std::cout << "loss:              " << (r.loss.type.empty() ? "cross_entropy (the default)" : base::printable(r.loss.type))
            << "\n"
            << "batch transforms:  " << names(r.batch_transforms, "none") << "\n"
            << "train clips:       " << names(r.train_transforms, "the dataset's own pipeline") << "\n"
            << "test clips:        " << names(r.test_transforms, "the dataset's own pipeline") << "\n"
            << "hooks:             " << names(r.hooks, "none") << "\n";
}

namespace {

// The launcher's child (mpirun) and how many stop signals arrived.
volatile pid_t g_mpirun = 0;
volatile std::sig_atomic_t g_signals = 0;
volatile std::sig_atomic_t g_training = 1;  // the ranks run `vexp run` (they stop after a step, with a checkpoint)

extern "C" void forward_stop(int) {
  const std::sig_atomic_t before = g_signals;  // not ++: C++20 deprecates it on volatile
  g_signals = before + 1;
  if (before == 0) {
    static const char first[] =
        "\nvexp: interrupted: every rank stops after its current step and writes a checkpoint (interrupt again to "
        "exit at once)\n";
    static const char first_eval[] = "\nvexp: interrupted: ending the ranks\n";
    if (g_training) (void)!::write(STDERR_FILENO, first, sizeof first - 1);
    else (void)!::write(STDERR_FILENO, first_eval, sizeof first_eval - 1);
    if (g_mpirun > 0) ::kill(g_mpirun, SIGUSR1);  // mpirun forwards SIGUSR1 to every rank
    return;
  }
  static const char again[] = "\nvexp: interrupted again: ending the ranks at once\n";
  (void)!::write(STDERR_FILENO, again, sizeof again - 1);
  if (g_mpirun > 0) ::kill(g_mpirun, SIGTERM);  // mpirun ends every rank
  ::_exit(130);
}
}  // namespace

std::string resume_command() {
  std::vector<std::string> a = base::own_argv();
  std::string cmd;
  const Launcher l = detect_launcher();
  if (l.mpi) {
    const std::string n = l.tasks > 0 ? std::to_string(l.tasks) : "N";
    cmd = l.name == "Slurm (srun)" ? "srun -n " + n + " " : "mpirun -np " + n + " ";
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& x = a[i];
    if (x == "--resume") {
      if (i + 1 < a.size() && a[i + 1] == "auto") ++i;
      continue;
    }
    if (x.rfind("--resume=", 0) == 0) continue;
    if (x == "--resume-from" || x == "--stop-after") {
      ++i;
      continue;
    }
    if (x.rfind("--resume-from=", 0) == 0 || x.rfind("--stop-after=", 0) == 0) continue;
    cmd += (i == 0 ? "" : " ") + shell_quote(x);
  }
  return cmd + " --resume";
}

bool launch_local_ranks(int nproc, const RecipeArgs& args, const std::vector<std::string>& passthrough,
                        const std::string& command) {
  if (under_launcher()) return false;  // mpirun/srun already started us: --nproc is informational
  Session s;
  RecipeArgs checked = args;
  checked.require_data = true;  // refuse before starting ranks
  if (!open_session(s, checked)) throw base::invalid("");
  const std::string self = base::exe_path();
  if (self.empty()) throw base::failure("cannot find the vexp executable to start ranks");
  std::vector<std::string> rank_argv{self, command, args.path};
  for (const auto& set : args.sets) {
    rank_argv.push_back("--set");
    rank_argv.push_back(set);
  }
  for (const auto& a : args.plugin_path_argv()) rank_argv.push_back(a);  // the ranks may load what we may
  if (s.plan->comm == "local") {
    rank_argv.push_back("--set");
    rank_argv.push_back("dist.backend=mpi");
  }
  rank_argv.insert(rank_argv.end(), passthrough.begin(), passthrough.end());
  const std::vector<std::string> argv = base::mpirun_argv(nproc, rank_argv);
  const std::string resume = resume_command();
  std::cerr << "vexp: starting " << nproc << " local ranks with mpirun\n";
  g_training = command == "run";
  std::cerr.flush();
  // Stop signals are ours: mpirun runs in its own process group (a terminal's
  // Ctrl-C reaches only this process) and gets them forwarded as SIGUSR1.
  struct sigaction sa {};
  sa.sa_handler = forward_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &block, &old);  // no handler runs before g_mpirun is known
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // mpirun in a process group of its own (a terminal's Ctrl-C reaches only this
  // process), its input /dev/null (it would forward a terminal's input, and stop on it).
  base::SpawnOptions o;
  o.stdin_path = "/dev/null";
  o.own_process_group = true;
  o.env_set = {"VEXP_RESUME_COMMAND=" + resume};
  auto started = base::attempt([&] { return base::start_program(argv, o); });
  if (!started) {
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    started.rethrow_with("--nproc " + std::to_string(nproc) + ": ",
                         " (install openmpi-bin, or launch with mpirun/srun yourself)");
  }
  const int pid = std::move(started).value();
  g_mpirun = pid;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  const base::ProcessStatus status = base::wait_program(pid);
  g_mpirun = 0;
  if (g_signals > 0) throw base::interrupted("");  // rank 0 said where the checkpoint is and how to continue
  const int code = status.signal ? 128 + status.signal : status.exit_code;
  if (code != 0) throw base::child_failed(code);
  return true;
}

}  // namespace vexp::cli
