#include "vexp/slurm/scheduler.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/slurm/job.hpp"

namespace vexp::slurm {

using base::printable;

Shape job_shape(const ShapeRequest& r) {
  Shape s;
  s.world = std::max<int64_t>(r.world, 1);
  const int64_t world = s.world;
  const int64_t tpn = std::max<int64_t>(std::min(r.gpus_per_node, world), 1);
  const std::string& cf = r.cluster_file;
  int64_t nodes = r.nodes;
  if (nodes <= 0) {
    if (world % tpn != 0)
      throw Refused("dist.world_size = " + std::to_string(world) + " is not a multiple of the " + std::to_string(tpn) +
                    " GPUs per node of " + cf + ": no whole number of nodes holds it; nothing submitted");
    nodes = world / tpn;
    if (nodes > r.cluster_nodes) {
      int64_t fit = r.cluster_nodes;
      while (fit > 1 && (world % (fit * tpn)) != 0) --fit;
      throw Refused("dist.world_size = " + std::to_string(world) + " needs " + std::to_string(nodes) + " nodes of " +
                    std::to_string(tpn) + " GPU(s), and " + cf + " has " + std::to_string(r.cluster_nodes) +
                    "; --nodes " + std::to_string(fit) + " emulates that world exactly; nothing submitted");
    }
  } else {
    if (nodes > r.cluster_nodes)
      throw Refused("--nodes " + std::to_string(nodes) + ": " + cf + " has " + std::to_string(r.cluster_nodes) +
                    " node(s); nothing submitted");
    if (world % (nodes * tpn) != 0)
      throw Refused("--nodes " + std::to_string(nodes) + " x " + std::to_string(tpn) + " task(s) per node = " +
                    std::to_string(nodes * tpn) + " ranks, which do not divide dist.world_size = " +
                    std::to_string(world) + " (each rank emulates a whole number of GPUs); nothing submitted");
  }
  s.nodes = nodes;
  s.tasks_per_node = tpn;
  s.ranks = nodes * tpn;
  // A recipe written for one machine says dist.backend = "local"; the cluster file
  // may say what spans its nodes.
  if (s.ranks > 1 && r.comm == "local") {
    if (r.backend.empty())
      throw Refused(r.recipe_path + ": dist.backend = \"local\" trains in one process, and the job has " +
                    std::to_string(s.ranks) + " ranks; add --set dist.backend=mpi (or nccl on GPUs), or backend in " +
                    cf + "'s [scheduler]; nothing submitted");
    if (r.backend != "local") s.backend_set = "dist.backend=" + r.backend;
  }
  s.text = std::to_string(nodes) + " node(s) x " + std::to_string(tpn) + " task(s) = " + std::to_string(s.ranks) +
           " rank(s) for dist.world_size = " + std::to_string(world);
  if (!s.backend_set.empty())
    s.emulation += "; " + s.backend_set + " (the recipe's is local; " + cf + "'s [scheduler] backend)";
  if (s.ranks < world)
    s.emulation += "; fewer ranks than the recipe's " + std::to_string(world) + " GPUs: each rank emulates " +
                   std::to_string(world / s.ranks) + " of them, and the run trains exactly what " +
                   std::to_string(world) + " GPUs would (docs/distributed.md)";
  return s;
}

std::string job_name_of(const std::string& name) {
  std::string n;
  for (char ch : name) n += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' ? ch : '_';
  if (n.size() > 64) n.resize(64);
  return n.empty() ? "vexp" : n;
}

std::string sbatch_error(const std::string& out) {
  std::string first, line;
  std::istringstream in(out);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (first.empty()) first = line;
    if (line.find("error") != std::string::npos) return printable(line, 300);
  }
  return first.empty() ? std::string("no message") : printable(first, 300);
}

std::string sbatch(const std::string& script_path) {
  auto ran = base::attempt([&] { return base::run_capture({"sbatch", "--parsable", script_path}, true, 1 << 16); });
  if (!ran) throw Error("cannot run sbatch: " + ran.message() + "; nothing submitted");
  const base::Captured r = std::move(ran).value();
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  const size_t nl = out.rfind('\n');
  const std::string last = nl == std::string::npos ? out : out.substr(nl + 1);
  // --parsable: "JOBID" or "JOBID;CLUSTER".
  const std::string job = last.substr(0, last.find(';'));
  const bool numeric = !job.empty() && job.find_first_not_of("0123456789") == std::string::npos;
  if (!r.status.ok() || !numeric)
    throw Error("sbatch refused the job (" + r.status.describe() + "): " + sbatch_error(r.out) + "; nothing submitted");
  return job;
}

const char* const kQueryFormat = "%i|%T|%r|%N";

std::map<std::string, QueueEntry> parse_queue(const std::string& out) {
  std::map<std::string, QueueEntry> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> f;
    size_t p = 0;
    for (;;) {
      const size_t q = line.find('|', p);
      f.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    if (f.size() != 4 || f[0].empty() || f[0].find_first_not_of("0123456789") != std::string::npos) continue;
    QueueEntry e{f[0], f[1], f[2], f[3]};
    if (e.nodes == "(null)") e.nodes.clear();
    m[e.job] = e;
  }
  return m;
}

namespace {

std::string user_name() {
  if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return std::to_string(::getuid());
}

base::Captured run_slurm(const std::vector<std::string>& argv) {
  auto ran = base::attempt([&] { return base::run_capture(argv, true, 1 << 24); });
  if (!ran) throw Error("cannot run " + argv[0] + ": " + ran.message());
  base::Captured r = std::move(ran).value();
  if (!r.status.ok())
    throw Error(argv[0] + " failed (" + r.status.describe() + "): " + printable(r.out.substr(0, 300), 300));
  return r;
}

}  // namespace

std::map<std::string, QueueEntry> query(const std::vector<std::string>& jobs) {
  std::map<std::string, QueueEntry> all =
      parse_queue(run_slurm({"squeue", "--noheader", "--states=all", "--user=" + user_name(),
                             std::string("--format=") + kQueryFormat})
                      .out);
  std::map<std::string, QueueEntry> mine;
  for (const auto& j : jobs)
    if (auto it = all.find(j); it != all.end()) mine.insert(*it);
  return mine;
}

std::map<std::string, std::vector<QueueEntry>> query_names(const std::vector<std::string>& names) {
  std::map<std::string, std::vector<QueueEntry>> m;
  if (names.empty()) return m;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  const std::string out = run_slurm({"squeue", "--noheader", "--states=all", "--user=" + user_name(),
                                     "--name=" + list, "--format=%j|%i|%T|%r|%N"})
                              .out;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    const auto e = parse_queue(line.substr(bar + 1));
    for (const auto& [id, q] : e) m[line.substr(0, bar)].push_back(q);
  }
  return m;
}

void cancel(const std::vector<std::string>& jobs) {
  if (jobs.empty()) return;
  std::vector<std::string> argv{"scancel"};
  argv.insert(argv.end(), jobs.begin(), jobs.end());
  run_slurm(argv);
}

bool is_final(const std::string& s) {
  static const std::set<std::string> final_states{"COMPLETED", "FAILED",        "TIMEOUT",   "NODE_FAIL",
                                                  "CANCELLED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                                                  "PREEMPTED", "SPECIAL_EXIT",  "REVOKED"};
  return final_states.count(s) > 0;
}

bool is_running(const std::string& s) {
  return s == "RUNNING" || s == "COMPLETING" || s == "CONFIGURING" || s == "STAGE_OUT" || s == "SIGNALING" ||
         s == "RESIZING" || s == "STOPPED" || s == "SUSPENDED";
}

void append_event(const std::string& run_dir, const std::string& json_line) {
  base::append_file(jobs_file(run_dir), json_line + "\n");
}

}  // namespace vexp::slurm
