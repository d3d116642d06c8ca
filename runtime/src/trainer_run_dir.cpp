// The run directory: its path, the checkpoint a run continues from, the files
// written before the first step (checkpoints/, resolved.toml) and the failure
// records of earlier invocations set aside. The files themselves are named,
// written and read by vexp::rundir.
#include "trainer_parts.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/base/error.hpp"
#include "vexp/log.hpp"

namespace vexp::trainer {

std::string run_name_of(const dsl::RecipePlan& plan, const TrainOptions& opt) {
  return plan.run.name.empty() ? fs::path(opt.recipe_path).stem().string() : plan.run.name;
}

fs::path run_dir_of(const dsl::RecipePlan& plan, const TrainOptions& opt) {
  return !opt.out_dir.empty()      ? fs::path(opt.out_dir)
         : !plan.run.out.empty()   ? fs::path(plan.run.out)
                                   : fs::path("runs") / run_name_of(plan, opt);
}

base::DirLock lock_run_dir(const fs::path& out, const TrainOptions& opt) {
  std::error_code ec;
  if (rundir::RunDir(out).is_sweep_dir())
    throw RunDirRefused("'" + out.string() +
                        "' is a sweep directory (it holds sweep.db), not a run directory: give --out another directory");
  if (opt.resume && opt.resume_from.empty() && !fs::exists(out, ec)) return {};
  fs::create_directories(out, ec);
  if (ec) throw base::failure("cannot create the run directory '" + out.string() + "': " + ec.message());
  auto lock = base::attempt([&] { return base::DirLock(out.string(), "vexp run"); });
  if (!lock) throw RunDirRefused(lock.message());
  return std::move(lock).value();
}

ResumePoint choose_resume_point(const TrainOptions& opt, const fs::path& out, bool writer) {
  const rundir::RunDir dir(out);
  const fs::path ckpt_dir = dir.checkpoints();
  ResumePoint rp;
  if (!opt.resume_from.empty()) {
    if (!fs::is_regular_file(opt.resume_from))
      throw base::failure("cannot resume from '" + opt.resume_from + "': no such checkpoint file");
    rp.path = opt.resume_from;
    rp.checkpoint = load_checkpoint(rp.path);
    return rp;
  }
  const bool holds_run = dir.holds_run();
  if (opt.resume_auto && writer)
    log_info(std::string("--resume auto: '") + out.string() +
             (holds_run ? "' holds a run: continuing it" : "' holds no run: starting it"));
  if (!opt.resume && !(opt.resume_auto && holds_run)) {
    if (holds_run)
      throw base::failure("run directory '" + out.string() +
                               "' already holds a run; use --resume to continue it, or --out to choose another directory");
    return rp;
  }
  if (!fs::exists(out)) throw base::failure("cannot resume: run directory '" + out.string() + "' does not exist");
  const auto all = checkpoints_newest_first(ckpt_dir);
  std::string first_error;
  for (const auto& c : all) {
    try {
      rp.checkpoint = load_checkpoint(c);
      rp.path = c;
      break;
    } catch (const std::exception& e) {
      if (first_error.empty()) first_error = e.what();
      std::string kept = c;
      if (writer) {
        fs::path aside = c + ".corrupt";
        for (int k = 1; fs::exists(aside); ++k) aside = c + ".corrupt." + std::to_string(k);
        std::error_code ec;
        fs::rename(c, aside, ec);
        if (!ec) kept = aside.string();
      }
      log_warn("checkpoint '" + c + "' does not load (" + e.what() + "); it is kept as '" + kept +
               "' and the run resumes from the newest older checkpoint that loads");
    }
  }
  if (!all.empty() && !rp.checkpoint)
    throw base::failure("cannot resume '" + out.string() + "': none of its " + std::to_string(all.size()) +
                             " checkpoint(s) loads (newest: " + first_error +
                             "); start the run again in another directory (--out)");
  if (all.empty())
    log_warn("no checkpoint in '" + ckpt_dir.string() + "': starting '" + out.string() + "' from the beginning");
  else if (rp.path != all.front())
    log_warn("resuming from '" + rp.path + "', the newest checkpoint that loads; to choose another: --resume-from CHECKPOINT");
  return rp;
}


// Failure records (failures/rank_<r>.txt) older than this process belong to an
// earlier invocation on the run directory: they move to failures/previous/.
namespace {
const fs::file_time_type g_process_start = fs::file_time_type::clock::now();
}  // namespace

void set_aside_stale_failures(const fs::path& out) {
  const fs::path dir = rundir::RunDir(out).failures();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  int moved = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (tec || t >= g_process_start) continue;
    fs::create_directories(dir / rundir::kFailuresPrevious, tec);
    const std::string stem = it->path().stem().string(), ext = it->path().extension().string();
    fs::path target = dir / rundir::kFailuresPrevious / it->path().filename();
    for (int k = 1; fs::exists(target); ++k)
      target = dir / rundir::kFailuresPrevious / (stem + "." + std::to_string(k) + ext);
    fs::rename(it->path(), target, tec);
    if (!tec) ++moved;
  }
  if (moved > 0)
    log_info("moved " + std::to_string(moved) + " failure record(s) of an earlier invocation to '" +
             (dir / rundir::kFailuresPrevious).string() + "'");
}

void start_run_dir(const Run& r) {
  fs::create_directories(r.ckpt_dir);
  rundir::write_resolved(r.out, r.recipe_hash, dsl::to_toml(r.plan.resolved));
}

std::string last_good_checkpoint(const fs::path& ckpt_dir) {
  std::string last = latest_checkpoint(ckpt_dir);
  return last.empty() ? std::string("; no checkpoint was written yet") : "; the last good checkpoint is " + last;
}

}  // namespace vexp::trainer
