// Opening a cluster file (clusters/NAME.toml) for a command: vexp plan, vexp submit,
// vexp sweep --cluster. Its diagnostics are printed (file:line:col); a file that is
// wrong is base::Error (invalid), so the three commands refuse it in the same words.
#pragma once

#include <string>

#include "vexp/plan/cluster.hpp"
#include "vexp/slurm/settings.hpp"

namespace CLI {
class App;
}

namespace vexp::cli {

plan::Cluster open_cluster_file(const std::string& path, plan::ClusterUse use = plan::ClusterUse::plan);

// The same, for a command that submits jobs (`command`: "vexp submit"): the file must
// have a [scheduler] table, and [cluster] with it is enough (plan::ClusterUse::jobs).
plan::Cluster open_scheduler_cluster(const std::string& path, const std::string& command);

// --time, --partition and --account, the same options with the same meaning for `vexp
// submit` and `vexp sweep --cluster` (checked by slurm::apply_choices).
void add_choice_options(CLI::App* cmd, slurm::Choices& c);

}  // namespace vexp::cli
