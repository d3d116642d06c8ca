#include "run_dist.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "dry_run.hpp"

namespace vexp::cli {

namespace {
bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_ID"})
    if (std::getenv(v)) return true;
  return false;
}
}  // namespace

void print_dry_run(const RecipeArgs& args, int nproc) {
  Session s;
  auto overrides = parse_sets(args.sets);
  load_session_plugins(s, args.plugin_paths);
  std::string note;
  bool ok = false;
  try {
    ok = open_recipe_for_planning(s, args.path, overrides, note);
  } catch (const dsl::RecipeError& e) {
    throw Exit{kExitInvalid, e.what()};
  }
  for (const auto& d : s.diags.sorted()) std::cerr << d.str() << "\n";
  if (!ok) {
    size_t n = s.diags.error_count();
    std::cerr << args.path << ": " << n << (n == 1 ? " error" : " errors") << "\n";
    throw Exit{kExitInvalid, ""};
  }
  if (!note.empty()) std::cerr << "vexp: note: " << note << "\n";
  const int64_t ranks = nproc > 0 ? nproc : launched_ranks_from_env();
  DistPlan p;
  try {
    p = plan_run(s, ranks);
  } catch (const std::exception& e) {
    throw Exit{kExitInvalid, args.path + ": " + e.what()};
  }
  std::cout << "plan of " << args.path << " (dry run: no data loaded, nothing trained)\n" << describe(p);
}

void launch_local_ranks(int nproc, const RecipeArgs& args, const std::vector<std::string>& passthrough) {
  if (under_launcher()) return;  // mpirun/srun already started us: --nproc is informational
  Session s;
  RecipeArgs checked = args;
  checked.require_data = true;  // refuse before starting ranks
  if (!open_session(s, checked)) throw Exit{kExitInvalid, ""};
  std::vector<std::string> argv{"mpirun"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(nproc)});
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw Exit{kExitFailure, "cannot find the vexp executable to start ranks"};
  self[n] = '\0';
  argv.push_back(self);
  argv.push_back("run");
  argv.push_back(args.path);
  for (const auto& set : args.sets) {
    argv.push_back("--set");
    argv.push_back(set);
  }
  for (const auto& a : args.plugin_path_argv()) argv.push_back(a);  // the ranks may load what we may
  if (s.plan->comm == "local") {
    argv.push_back("--set");
    argv.push_back("dist.backend=mpi");
  }
  argv.insert(argv.end(), passthrough.begin(), passthrough.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::cerr << "vexp: starting " << nproc << " local ranks with mpirun\n";
  std::cerr.flush();
  ::execvp("mpirun", cargv.data());
  throw Exit{kExitFailure, std::string("cannot start mpirun for --nproc ") + std::to_string(nproc) + ": " +
                               std::strerror(errno) + " (install openmpi-bin, or launch with mpirun/srun yourself)"};
}

}  // namespace vexp::cli
