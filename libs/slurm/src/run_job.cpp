#include "vexp/slurm/run_job.hpp"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/lock.hpp"
#include "vexp/base/text.hpp"

namespace vexp::slurm {

namespace fs = std::filesystem;

JobSpec run_job_spec(const Settings& s, const Shape& shape, const RunToSubmit& r) {
  JobSpec j;
  j.run_dir = r.run_dir;
  j.job_name = r.job_name;
  j.nodes = shape.nodes;
  j.tasks_per_node = shape.tasks_per_node;
  if (s.cpus_per_node > 0) j.cpus_per_task = std::max<int64_t>(s.cpus_per_node / shape.tasks_per_node, 1);
  j.gpus_per_node = s.gpus_per_node;
  j.time = s.time;
  j.partition = s.partition;
  j.account = s.account;
  j.signal_lead_s = s.signal_lead_s;
  j.max_requeues = s.max_requeues;
  j.sbatch_extra = s.sbatch;
  j.setup = s.setup;
  j.launcher = s.launcher;
  j.vexp_argv = {r.exe, "run", r.recipe};
  for (const auto& x : r.sets) j.vexp_argv.insert(j.vexp_argv.end(), {"--set", x});
  if (!shape.backend_set.empty()) j.vexp_argv.insert(j.vexp_argv.end(), {"--set", shape.backend_set});
  for (const auto& d : r.plugin_dirs) j.vexp_argv.insert(j.vexp_argv.end(), {"--plugin-path", d});
  j.vexp_argv.insert(j.vexp_argv.end(), {"--out", r.run_dir, "--resume", "auto"});
  j.cluster_file = r.cluster_file;
  j.submit_command = r.submit_command;
  return j;
}

Submitted submit_run(const JobSpec& j, const SubmitNote& note, const std::string& holder,
                     const std::function<void()>& before_sbatch) {
  const std::string script = batch_script(j);  // Refused: nothing written
  const std::string& dir = j.run_dir;
  const std::string script_path = (fs::path(dir) / "job.sbatch").string();
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw base::failure("cannot create the run directory '" + base::printable(dir) + "': " + ec.message());
  // The run's lock only while its files are written: the job's vexp run takes it.
  base::DirLock lock;
  auto undo = [&](bool wrote) {
    std::error_code ig;
    if (wrote) fs::remove(script_path, ig);
    lock.release();
    if (!existed) {
      fs::remove(fs::path(dir) / base::DirLock::kFileName, ig);
      fs::remove(dir, ig);  // only when empty
    }
  };
  Submitted s;
  bool wrote = false;
  try {
    lock = base::DirLock(dir, holder);
    base::write_file_atomic(script_path, script, 0755);
    wrote = true;
    if (before_sbatch) before_sbatch();
    s.job = sbatch(script_path);
  } catch (...) {
    undo(wrote);
    throw;
  }
  nlohmann::json rec{{"event", "submitted"},       {"job", s.job},
                     {"time", base::utc_now()},     {"nodes", j.nodes},
                     {"tasks_per_node", j.tasks_per_node}, {"world_size", note.world_size},
                     {"time_limit", j.time},        {"partition", j.partition},
                     {"cluster", note.cluster},     {"max_requeues", j.max_requeues},
                     {"script", "job.sbatch"}};
  if (note.sweep_trial > 0) rec["sweep_trial"] = note.sweep_trial;
  // The job is queued: a record that cannot be written is not a failed submit.
  if (auto wrote = base::attempt([&] { append_event(dir, rec.dump()); }); !wrote) s.record_problem = wrote.message();
  return s;
}

}  // namespace vexp::slurm
