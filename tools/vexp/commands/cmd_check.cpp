// vexp check RECIPE [--set k=v]... [--print]; vexp check CLUSTER.toml (a [cluster] file)
#include <cstdint>
#include <iostream>
#include <optional>

#include "commands/common.hpp"
#include "commands/param_groups_check.hpp"
#include "vexp/base/text.hpp"
#include "vexp/plan/cluster.hpp"
#include "vexp/runtime/data_pipeline.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/dataset.hpp"

namespace vexp::cli {

namespace {

// vexp run refuses a global batch larger than the training split
// (runtime/src/dist_plan.cpp). Where the dataset can count its clips, check says so
// too, at dist.batch_per_gpu: the dataset is made as vexp run makes it (synthetic
// data counts from its parameters, Kinetics reads its list files). A dataset whose
// data is missing (already a warning) or that cannot be made is not counted.
void check_global_batch(Session& s, const std::string& path) {
  const dsl::RecipePlan& plan = *s.plan;
  const PluginDecl* decl = s.host.find("dataset", plan.dataset);
  if (!decl) return;
  int64_t train = 0;
  std::shared_ptr<Dataset> data;
  try {
    if (decl->check_data) decl->check_data(plan.dataset_params);
    data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
    train = data->size(Split::Train);
  } catch (const std::exception&) {
    return;  // vexp run reports why the data cannot be read
  }
  // The recipe's transform lists, handed over as vexp run does: a dataset that takes
  // none (or whose parameters contradict a list) is refused here too, at the list.
  attach_transforms(*data, s.host, plan);
  const std::string why = batch_fit_problem(plan.dist, train);
  if (why.empty()) return;
  dsl::Loc loc = plan.dist.batch_per_gpu_loc;
  if (!loc.known()) loc = {path, 1, 1};
  dsl::Diagnostic d{dsl::Severity::Error, loc, why};
  std::cerr << d.str() << "\n" << base::printable(path) << ": 1 error\n";
  throw base::invalid("");
}

}  // namespace

void add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate a recipe (exit 0 when valid, 2 when not)");
  auto args = std::make_shared<RecipeArgs>();
  auto print = std::make_shared<bool>(false);
  auto no_data = std::make_shared<bool>(false);
  args->add_to(cmd);
  cmd->add_flag("--print", *print, "Print the fully resolved recipe");
  cmd->add_flag("--no-data", *no_data,
                "Validate without the data: a missing data root or list file is a warning, not an error");
  cmd->callback([args, print, no_data] {
    // A cluster description (a top-level [cluster] table) is checked as one (vexp plan --cluster).
    if (plan::is_cluster_file(args->path)) {
      dsl::Diagnostics d;
      const auto c = plan::load_cluster(args->path, d);
      if (!c) {
        // A file for jobs only: [cluster] and [scheduler] are all vexp submit and vexp
        // sweep --cluster read; it is valid for them, and says what vexp plan lacks.
        dsl::Diagnostics dj;
        const auto j = plan::load_cluster(args->path, dj, plan::ClusterUse::jobs);
        if (j && j->scheduler.given && !j->plan_missing.empty()) {
          std::string missing;
          for (const auto& t : j->plan_missing) missing += (missing.empty() ? "" : ", ") + t;
          std::cout << base::printable(args->path) << ": ok for vexp submit and vexp sweep --cluster ("
                    << plan::cluster_summary(*j) << "); vexp plan also needs " << missing << "\n";
          return;
        }
      }
      for (const auto& x : d.sorted()) std::cerr << x.str() << "\n";
      if (!c) throw base::invalid("");
      std::cout << base::printable(args->path) << ": ok (" << plan::cluster_summary(*c) << ")\n";
      return;
    }
    Session s;
    // The data a recipe names must exist, as vexp run requires: a recipe that
    // checks "ok" starts (`--no-data` and `vexp run --dry-run` only warn).
    args->require_data = !*no_data;
    if (!open_session(s, *args)) throw base::invalid("");
    check_global_batch(s, args->path);
    check_recipe_param_groups(s, args->path, true);  // the model is built only for a recipe with groups
    const auto& plan = *s.plan;
    if (*print) {
      std::cout << "# resolved recipe, hash " << dsl::recipe_hash(plan.resolved) << "\n" << dsl::to_toml(plan.resolved);
    } else {
      std::cout << base::printable(args->path) << ": ok (" << plan.nodes.size() << " nodes, " << plan.inserts.size()
                << " inserted operators, dataset '" << base::printable(plan.dataset) << "', backend '"
                << base::printable(plan.comm) << "')\n";
    }
  });
}

}  // namespace vexp::cli
