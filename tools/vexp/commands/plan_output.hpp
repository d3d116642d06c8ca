// What `vexp plan` prints and writes: the table with its advice, the JSON of
// docs/planning.md, the gnuplot PNG and the --tune recipe overlay (drawn with
// vexp::report's gnuplot helper); the numbers come from the planner (planner.hpp).
// Errors: vexp::base::Error.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/plan/planner.hpp"

namespace vexp::cli {

std::string plan_table(const plan::Cluster& c, const std::vector<plan::RecipeResult>& results);
nlohmann::json plan_json(const plan::Cluster& c, const std::vector<plan::RecipeResult>& results);
// Efficiency and the step-time split against GPU count, one column of panels per
// recipe; written to `png` atomically (a temporary next to it, then rename) with
// gnuplot.
void write_plot(const std::vector<plan::RecipeResult>& results, const std::string& png);
// The overlay: extends = RECIPE (relative to the overlay's folder) and the keys
// whose suggested value differs. Refuses a target that exists and is not a
// regular file; written atomically.
void write_tune(const plan::Cluster& c, const plan::RecipeResult& r, const std::string& path);

// Refuses (base::Error, invalid) an output path that exists and is not a regular file.
void check_output_path(const std::string& path, const std::string& option);

}  // namespace vexp::cli
