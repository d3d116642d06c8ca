// vexp check RECIPE [--set k=v]... [--print]
#include <iostream>

#include "common.hpp"

namespace vexp::cli {

void add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate a recipe (exit 0 when valid, 2 when not)");
  auto args = std::make_shared<RecipeArgs>();
  auto print = std::make_shared<bool>(false);
  args->add_to(cmd);
  cmd->add_flag("--print", *print, "Print the fully resolved recipe");
  cmd->callback([args, print] {
    Session s;
    if (!open_session(s, *args)) throw Exit{kExitInvalid, ""};
    const auto& plan = *s.plan;
    if (*print) {
      std::cout << "# resolved recipe, hash " << dsl::recipe_hash(plan.resolved) << "\n" << dsl::to_toml(plan.resolved);
    } else {
      std::cout << args->path << ": ok (" << plan.nodes.size() << " nodes, " << plan.inserts.size()
                << " inserted operators, dataset '" << plan.dataset << "', backend '" << plan.comm << "')\n";
    }
  });
}

}  // namespace vexp::cli
