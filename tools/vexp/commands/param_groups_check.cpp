#include "commands/param_groups_check.hpp"

#include <iostream>

#include "vexp/base/error.hpp"
#include "vexp/base/text.hpp"
#include "vexp/dsl/diagnostics.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/optimizer.hpp"

namespace vexp::cli {

void check_recipe_param_groups(Session& s, const std::string& path, bool say_warnings) {
  const dsl::RecipePlan& plan = *s.plan;
  if (plan.optim.groups.empty()) return;
  ModelGraph model(plan, s.host);
  const ParamGroups g = param_groups(model, plan.optim);
  dsl::Diagnostics d;
  if (say_warnings)
    for (const auto& w : g.warnings) d.warning(w.loc, w.message);
  for (const auto& e : g.errors) d.error(e.loc, e.message);
  for (const auto& x : d.sorted()) std::cerr << x.str() << "\n";
  if (g.errors.empty()) return;
  const size_t n = d.error_count();
  std::cerr << base::printable(path) << ": " << n << (n == 1 ? " error" : " errors") << "\n";
  throw base::invalid("");
}

}  // namespace vexp::cli
