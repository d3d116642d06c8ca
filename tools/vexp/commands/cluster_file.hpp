// Opening a cluster file (clusters/NAME.toml) for a command: vexp plan, vexp submit,
// vexp sweep --cluster. Its diagnostics are printed (file:line:col); a file that is
// wrong is base::Error (invalid), so the three commands refuse it in the same words.
#pragma once

#include <string>

#include "vexp/plan/cluster.hpp"

namespace vexp::cli {

plan::Cluster open_cluster_file(const std::string& path);

// The same, for a command that submits jobs (`command`: "vexp submit"): the file must
// have a [scheduler] table.
plan::Cluster open_scheduler_cluster(const std::string& path, const std::string& command);

}  // namespace vexp::cli
