#include "commands/cluster_file.hpp"

#include <iostream>
#include <optional>

#include "commands/common.hpp"
#include "vexp/base/text.hpp"

namespace vexp::cli {

plan::Cluster open_cluster_file(const std::string& path, plan::ClusterUse use) {
  dsl::Diagnostics d;
  std::optional<plan::Cluster> c = plan::load_cluster(path, d, use);
  for (const auto& x : d.sorted()) std::cerr << x.str() << "\n";
  if (!c) throw base::invalid("");
  return *c;
}

plan::Cluster open_scheduler_cluster(const std::string& path, const std::string& command) {
  // Its name is written into every batch script (a comment line): one line only.
  if (base::has_control(path))
    throw base::invalid("--cluster '" + base::printable(path, 80) +
                                 "' holds a newline or another control character, which a batch script cannot hold; "
                                 "rename it; nothing written, nothing submitted");
  plan::Cluster c = open_cluster_file(path, plan::ClusterUse::jobs);
  if (!c.scheduler.given)
    throw base::invalid(path + ": no [scheduler] table: " + command +
                                 " needs one (kind = \"slurm\", partition, time, ...; docs/clusters.md); nothing submitted");
  return c;
}

void add_choice_options(CLI::App* cmd, slurm::Choices& c) {
  cmd->add_option("--time", c.time, "Time limit (Slurm syntax; default: the cluster file's [scheduler] time)");
  cmd->add_option("--partition", c.partition, "Partition (default: the cluster file's [scheduler] partition)");
  cmd->add_option("--account", c.account, "Account (default: the cluster file's [scheduler] account)");
}

}  // namespace vexp::cli
