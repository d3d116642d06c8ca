// What `vexp plan` prints and writes: the table with its advice, the JSON of
// docs/planning.md, the gnuplot PNG and the --tune recipe overlay.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/planner.hpp"

namespace vexp::plan {

std::string plan_table(const dsl::Cluster& c, const std::vector<RecipeResult>& results);
nlohmann::json plan_json(const dsl::Cluster& c, const std::vector<RecipeResult>& results);
// Efficiency and the step-time split against GPU count, one column of panels per
// recipe; written to `png` atomically (a temporary next to it, then rename) with
// gnuplot. Throws cli::Exit.
void write_plot(const std::vector<RecipeResult>& results, const std::string& png);
// The overlay: extends = RECIPE (relative to the overlay's folder) and the keys
// whose suggested value differs. Refuses a target that exists and is not a
// regular file; written atomically. Throws cli::Exit.
void write_tune(const dsl::Cluster& c, const RecipeResult& r, const std::string& path);

// Refuses (cli::Exit, invalid) an output path that exists and is not a regular file.
void check_output_path(const std::string& path, const std::string& option);

}  // namespace vexp::plan
