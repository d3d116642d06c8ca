#include "vexp/runtime/dry_run.hpp"

#include "vexp/base/error.hpp"
#include "vexp/runtime/launcher.hpp"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <ATen/ATen.h>

#include "vexp/log.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/dataset.hpp"

namespace vexp {

int64_t planned_train_size(Session& s, std::string* size_note) {
  const dsl::RecipePlan& plan = *s.plan;
  int64_t train_size = plan.data.train_size;
  if (train_size <= 0 && !s.host.find("dataset", plan.dataset))
    throw base::failure("dataset plugin '" + plan.dataset +
                             "' is not installed and data.train_size is not declared: the number of training clips "
                             "is unknown (declare data.train_size to plan without the plugin)");
  if (train_size <= 0) {
    auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
    train_size = data->size(Split::Train);
  } else if (size_note) {
    // The run counts the clips its list holds, not the declared number: a dry
    // run that can read the list plans what the run will do.
    const std::string declared = "data.train_size = " + std::to_string(train_size);
    try {
      auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
      const int64_t real = data->size(Split::Train);
      if (real > 0 && real != train_size && !batch_fit_problem(plan.dist, real).empty() &&
          batch_fit_problem(plan.dist, train_size).empty()) {
        // A small prepared set at the recipe's root (the demo's, a test's): the plan of
        // the recipe is still the declared dataset's; `vexp run` with this data is refused.
        *size_note = "planning with the declared " + declared + ": the data at hand holds only " +
                     std::to_string(real) + " training clips, fewer than one global batch; `vexp run` with it would " +
                     "stop: " + batch_fit_fix(plan.dist, real);
      } else if (real > 0 && real != train_size) {
        *size_note = "planning with the " + std::to_string(real) + " training clips the data holds, not the declared " +
                     declared;
        train_size = real;
      }
    } catch (const std::exception& e) {
      std::string why = e.what();
      *size_note = "planning with the declared " + declared + " (the data cannot be read: " +
                   why.substr(0, why.find('\n')) + ")";
    }
  }
  return train_size;
}

DistPlan plan_run(Session& s, int64_t ranks, GradientProfile* profile, std::string* size_note,
                  std::vector<std::string>* param_groups) {
  const dsl::RecipePlan& plan = *s.plan;
  const int64_t train_size = planned_train_size(s, size_note);
  std::vector<int64_t> numels;
  {
    ModelGraph model(plan, s.host);
    for (const auto& p : model.named_parameters(true))
      if (p.value().requires_grad()) numels.push_back(p.value().numel());
    if (profile) {
      if (plan.data_facts.clip.size() != 4)
        throw base::failure("the dataset gives no clip shape [T, C, H, W] to count the model's MACs with");
      *profile = gradient_profile(model, plan.data_facts.clip);
    }
    if (param_groups) {
      const ParamGroups g = vexp::param_groups(model, plan.optim);
      check_param_groups(g);
      for (const auto& w : g.warnings) log_warn(w.loc.str() + ": " + w.message);
      *param_groups = param_groups_table(g);
    }
  }
  return make_dist_plan(plan, ranks, train_size, numels);
}

int64_t launched_ranks_from_env() {
  const Launcher l = detect_launcher();
  return l.tasks > 0 ? l.tasks : 1;
}

}  // namespace vexp
