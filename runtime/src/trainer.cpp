// `vexp run`'s training: stop signals, the failure path of a rank, and the order
// of the jobs of a run (each in its own file, see trainer_parts.hpp).
#include "vexp/runtime/trainer.hpp"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>

#include "trainer_parts.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/runtime/data_pipeline.hpp"
#include "vexp/runtime/launcher.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/log.hpp"

namespace vexp {

namespace {

// The environment variable a recipe line reads (`pretrained = "${VEXP_R50_IMAGENET:-}"`), if any.
std::string variable_on_line(const dsl::Loc& loc) {
  std::string text;
  try {
    text = base::read_file_bounded(loc.file, base::kMaxTextFileBytes);
  } catch (const std::exception&) {
    return "";  // the warning is given without the variable's name
  }
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < loc.line && std::getline(in, line); ++i) {
  }
  std::smatch m;
  return std::regex_search(line, m, std::regex(R"(\$\{([A-Za-z_][A-Za-z0-9_]*))")) ? m[1].str() : "";
}

// A node whose weights slot the recipe left empty (an unset `${VAR:-}`) trains from
// scratch; the paper's results start from ImageNet weights. Said once per run, by
// rank 0, when the run starts rather than resumes.
void warn_from_scratch(const dsl::RecipePlan& plan) {
  for (const dsl::NodeSpec& n : plan.nodes) {
    if (!n.pretrained_empty.known()) continue;
    const std::string var = variable_on_line(n.pretrained_empty);
    std::cerr << n.pretrained_empty.str() << ": warning: TRAINING FROM SCRATCH: node '" << n.id
              << "' has an empty `pretrained`" << (var.empty() ? "" : " (" + var + " is not set)")
              << ", so it starts from random weights, not ImageNet.\n"
              << "  The official TSM/TSN/I3D Kinetics-400 results start from torchvision's ImageNet ResNet-50; from "
                 "scratch, video ResNets need about 4x the epochs to come close (SlowFast trains 196 epochs from "
                 "scratch), so this schedule will end several points of top-1 lower.\n"
              << "  To start from ImageNet: " << (var.empty() ? "set `pretrained`" : "export " + var + "=")
              << "/path/to/resnet50-0676ba61.pth (docs/reproducing-the-paper.md, \"ImageNet initialisation\")\n";
  }
}

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_quiet_signals = 0;  // ranks other than 0 say nothing
// 1 from install_stop_handlers until the training loop begins (opening the recipe and
// the data, the thread pools, the model, a checkpoint to resume): nothing new exists
// to save, so a stop signal ends the process at once instead of waiting for a step.
volatile std::sig_atomic_t g_starting = 0;

extern "C" void on_stop_signal(int) {
  if (g_starting) {
    static const char starting[] =
        "\nvexp: interrupted while starting, before the first step: exiting at once (nothing new to save)\n";
    if (!g_quiet_signals) (void)!::write(STDERR_FILENO, starting, sizeof starting - 1);
    ::_exit(130);
  }
  if (g_stop) {
    static const char again[] = "\nvexp: interrupted again: exiting at once (checkpoints already written stay)\n";
    if (!g_quiet_signals) (void)!::write(STDERR_FILENO, again, sizeof again - 1);
    ::_exit(130);
  }
  g_stop = 1;
  static const char first[] =
      "\nvexp: interrupted: stopping after the current step and writing a checkpoint (interrupt again to exit at once)\n";
  if (!g_quiet_signals) (void)!::write(STDERR_FILENO, first, sizeof first - 1);
}

}  // namespace

namespace trainer {

void clear_stop_request() { g_stop = 0; }
void steps_begin() { g_starting = 0; }

Run::Run(const dsl::RecipePlan& p, const TrainOptions& o, std::shared_ptr<Comm> c)
    : plan(p), opt(o), comm(std::move(c)), rank(comm->rank()), ranks(comm->size()), writer(rank == 0) {}

namespace {

// Device and arithmetic: checked before the run directory is touched. `say`: this
// rank reports (a run.threads lowered to the cores is one warning, from rank 0).
Execution set_up_execution(const dsl::RunConfig& run, const std::string& recipe_path, bool say) {
  Execution x;
  std::string lowered;
  x.threads = set_intra_op_threads(run.threads, &lowered);
  if (say && !lowered.empty()) log_warn(run_setting_where(run, dsl::Loc{}, "threads", recipe_path) + ": " + lowered);
  x.device = resolve_device(run.device, run_setting_where(run, run.device_loc, "device", recipe_path));
  x.precision = parse_precision(run.precision);
  check_precision(x.precision, x.device, run_setting_where(run, run.precision_loc, "precision", recipe_path));
  x.memory_format = parse_memory_format(run.memory_format);
  return x;
}

// The dataset, the model (on its device, in its layout), the optimizer and the
// scaler (the rig's first stage), and the batch geometry (global batch, learning
// rate after scaling, schedule in steps: see dist_plan.hpp).
void build(Run& r, Session& s) {
  const dsl::RecipePlan& plan = r.plan;
  at::manual_seed(static_cast<uint64_t>(plan.run.seed));
  r.data = make_dataset(s.host, plan);  // with the recipe's transform pipelines (data_pipeline.hpp)
  r.model = std::make_shared<ModelGraph>(plan, s.host);
  for (const auto& rep : r.model->pretrained_reports()) log_info(rep);
  r.model->train();
  r.params_count = r.model->parameter_count();
  r.macs = plan.data_facts.clip.empty() ? 0.0 : r.model->macs_per_clip(plan.data_facts.clip);
  // The model on its device and in its layout, the optimizer and the scaler (rig.hpp);
  // the reducer and the step once the weights are final (train_run).
  RigOptions ro;
  ro.device = r.exec.device;
  ro.precision = r.exec.precision;
  ro.memory_format = r.exec.memory_format;
  r.rig = std::make_unique<Rig>(plan, s.host, r.model, r.comm, ro);
  r.exec.memory_format = r.rig->memory_format();

  r.dp = make_dist_plan(plan, r.ranks, r.data->size(Split::Train), r.rig->grad_numels());
  if (r.dp.world > r.ranks && r.rank == 0) {  // one line for the run, not one per rank
    log_info("emulating " + std::to_string(r.dp.world) + " GPUs on " + std::to_string(r.ranks) + " rank(s): " +
             std::to_string(r.dp.micro) + " micro-batches of " + std::to_string(r.dp.per_gpu) + " clips per step");
  }
  // The loader: decode threads, prefetch queue; pinned host memory on a GPU
  // (asynchronous copies).
  r.loader_opts.workers = plan.data.workers;
  r.loader_opts.prefetch = plan.data.prefetch;
  r.loader_opts.pin_memory = r.exec.device.is_cuda();
}

void log_start(const Run& r) {
  if (!r.writer) return;
  const Execution& x = r.exec;
  log_info("run '" + r.out.string() + "': " + std::to_string(r.params_count) + " parameters, " +
           base::count_text(r.macs) + " MACs per clip, " +
           (x.device.is_cpu() ? std::to_string(x.threads) + " threads" : x.device.str()) +
           (x.precision == Precision::Fp32 ? std::string() : std::string(", ") + precision_name(x.precision) + " autocast") +
           ", " + memory_format_name(x.memory_format) + ", global batch " + std::to_string(r.dp.global_batch) + ", " +
           steps_per_epoch_text(r.dp) + " steps per epoch (every clip once per epoch)");
  // The objective when the recipe chooses one (objective.hpp): its loss, its batch transforms.
  if (!r.plan.loss.type.empty() || !r.plan.batch_transforms.empty()) {
    std::string parts = "training loss '" + r.rig->objective().loss_name() + "'";
    for (size_t i = 0; i < r.plan.batch_transforms.size(); ++i)
      parts += (i ? ", " : " on soft targets of the batch transforms ") + r.plan.batch_transforms[i].type;
    log_info(parts + "; val_loss is cross-entropy over the labels");
  }
  // Where another rank count would not train bit for bit alike, say so at the start.
  if (!r.dp.exact && r.dp.world > 1) log_info("dist.reduction = \"fast\": " + reduction_text(r.dp).substr(6));
}

TrainResult train_run(Run& r, Session& s, ResumePoint& resume);

// --resume (auto) of a directory whose summary.json says its run of this very
// recipe (recipe_hash) is done: the run as that summary records it, decided by
// rank 0 for every rank. A summary of another recipe (--set train.epochs=... to
// train further) or one that does not read falls through to the resume.
std::optional<TrainResult> finished_run(const Run& r, const TrainOptions& opt) {
  if (!(opt.resume || opt.resume_auto) || !opt.resume_from.empty()) return std::nullopt;
  nlohmann::json summary;
  if (r.writer) {
    auto read = base::attempt([&] { return rundir::read_summary(rundir::RunDir(r.out).summary()); });
    if (read) summary = std::move(read).value();
    else log_warn(read.message() + "; the run is resumed as if it had not finished");
  }
  const bool mine = summary.is_object() && summary.value("status", "") == "done" &&
                    summary.value("recipe_hash", "") == r.recipe_hash;
  at::Tensor flag = at::full({1}, mine ? int64_t(1) : int64_t(0), at::kLong);
  if (r.ranks > 1) r.comm->broadcast(flag, 0);
  if (flag.item<int64_t>() == 0) return std::nullopt;
  TrainResult res;
  res.run_dir = r.out.string();
  res.rank = r.rank;
  res.finished = true;
  res.already_finished = true;
  if (r.writer) {
    auto num = [&summary](const char* k) { return summary.contains(k) && summary[k].is_number() ? summary[k].get<double>() : 0.0; };
    res.top1 = num("top1");
    res.top5 = num("top5");
    res.val_loss = num("val_loss");
    res.epochs = static_cast<int64_t>(num("epochs"));
    res.steps = static_cast<int64_t>(num("steps"));
    res.clips_per_s = num("clips_per_s");
    res.wall_s = num("wall_s");
    res.params = static_cast<int64_t>(num("params"));
    res.flops_per_clip = num("flops_per_clip");
    log_info("'" + r.out.string() + "' holds this recipe's finished run (summary.json): nothing to train, nothing rewritten");
  }
  return res;
}

TrainResult train_body(Session& s, const TrainOptions& opt, const std::shared_ptr<Comm>& comm) {
  Run r(*s.plan, opt, comm);
  r.exec = set_up_execution(r.plan.run, opt.recipe_path, r.writer);
  r.out = run_dir_of(r.plan, opt);
  r.ckpt_dir = rundir::RunDir(r.out).checkpoints();
  r.recipe_hash = dsl::recipe_hash(r.plan.resolved);
  // The recipe's [[hooks]]: a hook that refuses its parameters does so before the
  // run directory is touched.
  if (!r.plan.hooks.empty()) r.hooks = std::make_shared<RunHooks>(r.plan, s.host);

  // Held until the run ends (the kernel drops it however this process ends).
  base::DirLock lock;
  if (r.writer) lock = lock_run_dir(r.out, opt);
  // A finished run of this recipe is not trained again (a requeued or resubmitted
  // job's --resume auto, a second --resume): nothing in the directory changes.
  if (std::optional<TrainResult> done = finished_run(r, opt)) return *done;
  ResumePoint resume = choose_resume_point(opt, r.out, r.writer);
  // Failure records of an earlier invocation (a failed --nproc start) are no
  // longer current: a run that succeeds now leaves none at failures/.
  if (r.writer) set_aside_stale_failures(r.out);
  if (r.ranks > 1) agree_on_resume_point(*comm, resume.path);
  // Resuming this directory's own run: every rank that holds the checkpoint checks
  // it (the same answer on all), so that a resume of another recipe is refused
  // before resolved.toml is rewritten. (--resume-from another run's checkpoint is
  // checked in restore(), after the model: another model is named as such first.)
  if (resume.checkpoint && opt.resume_from.empty()) check_same_recipe(r, *resume.checkpoint, resume.path);
  if (r.writer) start_run_dir(r);
  // provenance.jsonl: this invocation, completed below however it ends (where it can).
  ProvenanceRecord provenance(r.out, r.writer, describe_invocation(r, s), *r.comm);
  // The hooks' weights files of this invocation, recorded with its end.
  auto hook_weights = [&r] { return r.hooks ? r.hooks->weights_files() : std::map<std::string, std::string>{}; };
  try {
    TrainResult res = train_run(r, s, resume);
    provenance.finish(res.finished ? "finished" : "stopped", hook_weights());
    return res;
  } catch (const DivergedError&) {
    provenance.finish("diverged");
    throw;
  } catch (const InterruptedError&) {
    provenance.finish("interrupted", hook_weights());
    throw;
  } catch (...) {
    provenance.finish("failed");
    throw;
  }
}

// The run after its directory is set up: model, data, resume, the epochs, the summary.
TrainResult train_run(Run& r, Session& s, ResumePoint& resume) {
  build(r, s);
  if (!resume.checkpoint && r.writer) warn_from_scratch(r.plan);
  if (resume.checkpoint) {
    r.state = restore(r, *resume.checkpoint, resume.path);
    const TrainState& st = r.state;
    if (r.writer) rundir::truncate_metrics(r.out, st.global_step, st.start_epoch);
    log_info("resuming '" + r.out.string() + "' from " + fs::path(resume.path).filename().string() + " (epoch " +
             std::to_string(st.start_epoch) +
             (st.start_step > 0 ? " and " + std::to_string(st.start_step) + " steps" : "") + ", step " +
             std::to_string(st.global_step) + ")");
    resume.checkpoint.reset();
  }
  if (r.ranks > 1) set_up_ddp(r);
  // The reducer (more than one rank, dist.reduction = "fast") and the step.
  r.rig->start(r.dp);
  log_start(r);
  // The hooks start from the final weights (and a resume's state, restored above).
  if (r.hooks) r.hooks->start(r);
  r.progress = std::make_unique<Progress>(r.writer ? r.plan.run.progress : "none", r.plan.run.log_every);
  if (const int64_t ms = r.faults.start_sleep_ms(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  LoopResult loop = train_epochs(r);
  return finish(r, std::move(loop));
}

}  // namespace
}  // namespace trainer

void install_stop_handlers() {
  g_starting = 1;
  // A task after a launcher's first says nothing of a signal, from the start on (srun's
  // --kill-on-bad-exit stops the others while they start: one line, the first task's).
  g_quiet_signals = detect_launcher().rank > 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and waits in progress continue
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }

// With more than one rank, an error on any rank ends the whole job: the rank
// prints it, records it in <run>/failures/rank_<r>.txt and aborts every rank
// (the others would wait for it forever otherwise). An interruption is agreed by
// every rank (they stop after the same step) and ends each of them normally.
TrainResult train(Session& s, const TrainOptions& opt) {
  namespace fs = std::filesystem;
  install_stop_handlers();
  const dsl::RecipePlan& plan = *s.plan;
  auto comm = s.host.make<Comm>("comm", plan.comm, plan.comm_params);
  // Rank 0 reports a stop signal; under `vexp run --nproc` the launcher already did.
  g_quiet_signals = comm->rank() != 0 || std::getenv("VEXP_RESUME_COMMAND") != nullptr;
  if (comm->size() == 1) return trainer::train_body(s, opt, comm);
  const fs::path out = trainer::run_dir_of(plan, opt);
  const int rank = comm->rank();
  auto report = [out, rank](const std::string& what) {
    std::fprintf(stderr, "vexp: error: rank %d: %s\n", rank, what.c_str());
    std::fflush(stderr);
    std::error_code ec;
    const rundir::RunDir dir(out);
    fs::create_directories(dir.failures(), ec);
    // Not recorded: the line above already said it on stderr.
    (void)base::attempt([&] { base::append_file(dir.failure_of_rank(rank).string(), what + "\n"); });
  };
  comm->set_watchdog(plan.dist.timeout_s, report);
  try {
    return trainer::train_body(s, opt, comm);
  } catch (const InterruptedError&) {
    throw;
  } catch (const trainer::RunDirRefused& e) {
    std::fprintf(stderr, "vexp: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    comm->abort(1);
  } catch (const DivergedError& e) {
    report(e.what());
    comm->abort(3);
  } catch (const c10::Error& e) {
    report(e.what_without_backtrace());
    comm->abort(1);
  } catch (const std::exception& e) {
    report(e.what());
    comm->abort(1);
  }
  // Comm::abort does not return; a virtual [[noreturn]] is not trusted by every
  // compiler's flow analysis (-Wreturn-type), so say it.
  std::abort();
}

}  // namespace vexp
