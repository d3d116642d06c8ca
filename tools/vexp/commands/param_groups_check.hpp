// [[optim.groups]] of a recipe, checked before anything is written: their globs are
// matched against the model's parameter names, which exist once the model is built,
// so the model is built here when (and only when) the recipe has groups.
#pragma once

#include <string>

#include "vexp/runtime/session.hpp"

namespace vexp::cli {

// vexp check and vexp run: every glob that matches no trainable parameter is printed
// as a diagnostic at its recipe line (FILE:L:C: error: ...), then "PATH: N errors",
// and base::invalid("") is thrown; with `say_warnings`, a glob whose every match an
// earlier group took is printed as a warning (vexp run's trainer says it itself).
void check_recipe_param_groups(Session& s, const std::string& path, bool say_warnings);

}  // namespace vexp::cli
