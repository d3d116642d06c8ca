// vexp eval RECIPE --weights CKPT|RUN_DIR [--set k=v]... [--out DIR] [--nproc N] [--logits] [--force] [--batch N]
// Evaluates a checkpoint on the recipe's validation split by the test protocol its
// dataset parameters choose (kinetics: TSN segment centres or dense clips,
// test_clips x test_crops, twice_sample, test_full_res), each video's views' logits
// averaged, on any number of ranks (runtime/evaluation.hpp). Writes DIR/eval.json
// (rundir/eval_file.hpp), DIR/logits.pt with --logits, DIR/provenance.jsonl.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "commands/model_session.hpp"
#include "commands/run_dist.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/base/lock.hpp"
#include "vexp/base/text.hpp"
#include "vexp/dataset.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/runtime/data_pipeline.hpp"
#include "vexp/runtime/evaluation.hpp"
#include "vexp/runtime/launcher.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/provenance.hpp"
#include "vexp/runtime/torch_save.hpp"
#include "vexp/rundir/eval_file.hpp"
#include "vexp/rundir/provenance.hpp"
#include "vexp/rundir/sha256.hpp"

namespace vexp::cli {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct EvalArgs {
  std::string weights, out;
  int nproc = 0;
  bool logits = false, force = false;
  int64_t batch = 0;
};

// The weights file, and the run folder it was given as ("" for a file).
struct Weights {
  std::string file;
  fs::path run_dir;
};

Weights resolve_weights(const std::string& given, bool say) {
  Weights w;
  std::error_code ec;
  if (!fs::is_directory(given, ec)) {
    w.file = weights_file(given, "--weights");
    return w;
  }
  fs::path dir = fs::path(given).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  w.run_dir = dir.filename() == rundir::kCheckpoints ? dir.parent_path() : dir;
  if (w.run_dir.empty()) w.run_dir = ".";
  w.file = latest_checkpoint_of(given);
  if (w.file.empty()) w.file = weights_file(given, "--weights");  // says why there is none
  if (say) std::cerr << "vexp: --weights '" << given << "': its latest checkpoint, '" << w.file << "'\n";
  return w;
}

// DIR: --out, else RUN_DIR/eval-PROTOCOL for a run folder's weights, else eval/RECIPE-PROTOCOL.
fs::path out_dir(const EvalArgs& e, const Weights& w, const std::string& recipe, const EvalProtocol& p) {
  if (!e.out.empty()) return fs::path(e.out);
  if (!w.run_dir.empty()) return w.run_dir / (rundir::kEvalDirPrefix + p.name());
  return fs::path("eval") / (fs::path(recipe).stem().string() + "-" + p.name());
}

// The folder must be one of its own (a run folder's provenance.jsonl is the run's),
// and an earlier eval.json is replaced only with --force.
void check_out(const fs::path& out, const EvalArgs& e, const Weights& w, const std::string& recipe) {
  const std::string shown = "'" + base::printable(out.string()) + "'";
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw base::invalid("--out " + shown + " is not a folder; give a folder for eval.json");
  const rundir::RunDir rd(out);
  if (rd.is_run_dir(true) || rd.is_sweep_dir())
    throw base::invalid("--out " + shown + " is a " + (rd.is_sweep_dir() ? "sweep" : "run") +
                        " folder, whose provenance.jsonl is its own: give a folder of the evaluation's own (the "
                        "default for weights given as a run folder is RUN_DIR/eval-PROTOCOL)");
  const fs::path json = out / rundir::kEvalFile;
  if (fs::exists(json, ec) && !e.force)
    throw base::refused("'" + base::printable(json.string()) +
                        "' exists (an earlier evaluation): give --force to replace it, or another --out");
  const std::vector<std::pair<std::string, std::string>> inputs{{w.file, "the weights"}, {recipe, "the recipe"}};
  rundir::refuse_output(json.string(), "--out", inputs);
  if (e.logits) rundir::refuse_output((out / rundir::kEvalLogits).string(), "--logits", inputs);
}

std::string fixed(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "top-1 0.7410  top-5 0.9120  mean class 0.7380 over 998 of 1000 videos; 2 failed ..."
std::string figures_line(const EvalFigures& f) {
  std::string s = "top-1 " + fixed(f.top1) + "  top-" + std::to_string(f.k) + " " + fixed(f.top5) + "  mean class " +
                  fixed(f.mean_class) + "  over " + std::to_string(f.evaluated) + " of " + std::to_string(f.videos) +
                  " videos";
  if (f.failed == 0) return s + " (every video decoded)";
  return s + "; " + std::to_string(f.failed) + " failed to decode and are left out (counted as wrong: top-1 " +
         fixed(f.top1_all) + "  top-" + std::to_string(f.k) + " " + fixed(f.top5_all) + "  mean class " +
         fixed(f.mean_class_all) + " over all " + std::to_string(f.videos) + ")";
}

struct Context {
  const RecipeArgs& args;
  const EvalArgs& e;
  Session& s;
  const Dataset& data;
  const EvalProtocol& protocol;
  const Weights& w;
  fs::path out;
};

ojson eval_record(const Context& c, const EvalOutput& res, const EvalFigures& f, const EvalOptions& o, int ranks,
                  const std::string& weights_sha, const std::string& start, double wall_s) {
  const auto [names, names_from] = class_names(c.s, "");
  const bool named = static_cast<int64_t>(names.size()) == f.classes;
  ojson j;
  j["format"] = rundir::kEvalFormat;
  j["summary"] = figures_line(f);
  j["denominator"] = "top1, top5 and mean_class_accuracy are over the " + std::to_string(f.evaluated) +
                     " evaluated videos of the " + std::to_string(f.videos) + " listed; " + std::to_string(f.failed) +
                     " failed to decode and are left out. top1_all, top5_all and mean_class_accuracy_all count them "
                     "as wrong, over all " +
                     std::to_string(f.videos);
  j["videos"] = f.videos;
  j["evaluated"] = f.evaluated;
  j["failed"] = f.failed;
  j["top1"] = f.top1;
  j["top5"] = f.top5;
  j["topk"] = f.k;
  j["mean_class_accuracy"] = f.mean_class;
  j["top1_all"] = f.top1_all;
  j["top5_all"] = f.top5_all;
  j["mean_class_accuracy_all"] = f.mean_class_all;
  j["correct_top1"] = f.correct1;
  j["correct_top5"] = f.correctk;
  j["classes"] = f.classes;
  j["classes_in_mean"] = f.classes_evaluated;
  j["protocol"] = c.protocol.to_json();
  ojson wj;
  wj["path"] = rundir::absolute_path(c.w.file);
  wj["given"] = c.e.weights;
  wj["sha256"] = weights_sha;
  wj["run_dir"] = c.w.run_dir.empty() ? ojson() : ojson(rundir::absolute_path(c.w.run_dir.string()));
  j["weights"] = wj;
  j["recipe"] = rundir::absolute_path(c.args.path);
  j["recipe_hash"] = dsl::recipe_hash(c.s.plan->resolved);
  j["overrides"] = c.args.sets;
  j["dataset"] = c.s.plan->dataset;
  j["split"] = "val";
  j["ranks"] = ranks;
  j["batch"] = o.batch;
  j["device"] = o.device.str();
  j["precision"] = precision_name(o.precision);
  j["start"] = start;
  j["wall_s"] = wall_s;
  j["eval_s"] = res.seconds;
  j["videos_per_s"] = res.seconds > 0 ? static_cast<double>(f.videos) / res.seconds : 0.0;
  j["logits"] = c.e.logits ? ojson(rundir::kEvalLogits) : ojson();
  j["vexp"] = {{"version", rundir::vexp_version()}, {"commit", rundir::vexp_commit()}, {"tree", rundir::vexp_tree()}};
  j["class_names_from"] = named ? ojson(names_from) : ojson();
  ojson failures = ojson::array();
  for (const auto& x : res.failures)
    failures.push_back({{"index", x.index}, {"item", x.item}, {"label", x.label}, {"error", x.error}});
  j["failures"] = failures;
  ojson per_class = ojson::array();
  for (int64_t k = 0; k < f.classes; ++k) {
    const ClassFigures& pc = f.per_class[static_cast<size_t>(k)];
    ojson row;
    row["class"] = k;
    row["name"] = named ? ojson(names[static_cast<size_t>(k)]) : ojson();
    row["videos"] = pc.videos;
    row["evaluated"] = pc.evaluated;
    row["correct"] = pc.correct;
    row["accuracy"] =
        pc.evaluated > 0 ? ojson(static_cast<double>(pc.correct) / static_cast<double>(pc.evaluated)) : ojson();
    row["accuracy_all"] =
        pc.videos > 0 ? ojson(static_cast<double>(pc.correct) / static_cast<double>(pc.videos)) : ojson();
    per_class.push_back(row);
  }
  j["per_class"] = per_class;
  ojson confusion = ojson::array();
  for (const auto& row : f.confusion) confusion.push_back(row);
  j["confusion_rows"] = "true class";
  j["confusion_columns"] = "top-1 class";
  j["confusion"] = confusion;
  return j;
}

// Rank 0's report of the failed videos on stderr (eval.json lists every one).
void print_failures(const EvalOutput& res) {
  if (res.failures.empty()) return;
  std::cerr << "vexp: " << res.failures.size() << " of " << res.videos
            << " videos failed to decode; they are counted and named, and left out of the figures' denominator:\n";
  size_t shown = 0;
  for (const auto& f : res.failures) {
    if (++shown > 20) {
      std::cerr << "vexp:   ... and " << res.failures.size() - 20 << " more (eval.json lists every one)\n";
      break;
    }
    std::cerr << "vexp:   video " << f.index << " " << base::printable(f.item.empty() ? "(no file named)" : f.item, 300)
              << ": " << base::printable(f.error, 300) << "\n";
  }
}

// The work of one rank, after the comm exists.
void eval_body(Context& c, Comm& comm) {
  const dsl::RecipePlan& plan = *c.s.plan;
  const bool writer = comm.rank() == 0;
  const auto wall0 = std::chrono::steady_clock::now();
  const std::string start = base::utc_now();
  std::string lowered;
  set_intra_op_threads(plan.run.threads, &lowered);
  if (writer && !lowered.empty()) std::cerr << "vexp: warning: run.threads: " << lowered << "\n";
  EvalOptions o;
  o.device = resolve_device(plan.run.device, run_setting_where(plan.run, plan.run.device_loc, "device", c.args.path));
  o.precision = parse_precision(plan.run.precision);
  check_precision(o.precision, o.device, run_setting_where(plan.run, plan.run.precision_loc, "precision", c.args.path));
  o.batch = c.e.batch > 0 ? c.e.batch : plan.run.eval_batch > 0 ? plan.run.eval_batch : plan.dist.batch_per_gpu;
  o.workers = plan.data.workers;

  auto model = build_model(c.s);
  const WeightReport report = load_model_weights(*model, c.w.file, true);
  if (writer) std::cerr << "vexp: " << report.summary(c.w.file, false) << "\n";
  model->to(o.device);
  apply_memory_format(model->parameters(true), parse_memory_format(plan.run.memory_format));

  base::DirLock lock;
  if (writer) {
    std::error_code ec;
    fs::create_directories(c.out, ec);
    if (ec) throw base::failure("cannot make the eval folder '" + c.out.string() + "': " + ec.message());
    lock = base::DirLock(c.out.string(), "vexp eval");
  }
  InvocationFacts facts;
  facts.recipe_path = c.args.path;
  facts.recipe_hash = dsl::recipe_hash(plan.resolved);
  facts.overrides = c.args.sets;
  facts.ranks = comm.size();
  ProvenanceRecord provenance(c.out, writer, describe_invocation(c.s, facts), comm);
  try {
    if (writer) {
      std::cerr << "vexp: evaluating " << c.data.size(Split::Val) << " videos of '" << c.args.path << "', "
                << c.protocol.name() << " (" << c.protocol.views << (c.protocol.views == 1 ? " view" : " views")
                << " per video), on " << comm.size() << (comm.size() == 1 ? " rank" : " ranks") << ", " << o.batch
                << " views per forward pass\n";
      auto last = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
      o.progress = [last, wall0](int64_t done, int64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (done < total && now - *last < std::chrono::seconds(10)) return;
        *last = now;
        const double s = std::chrono::duration<double>(now - wall0).count();
        std::cerr << "vexp: eval: " << done << "/" << total << " videos of rank 0 (" << fixed(s, 1) << " s)\n";
      };
    }
    const EvalOutput res = evaluate_videos(*model, c.data, comm, o);
    if (writer) {
      const EvalFigures f = eval_figures(res);
      std::string sha;
      try {
        sha = rundir::sha256_file(c.w.file, std::numeric_limits<std::uint64_t>::max());
      } catch (const std::exception& ex) {
        sha = "";
        std::cerr << "vexp: warning: " << ex.what() << "\n";
      }
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      if (c.e.logits) {
        at::Tensor evaluated = at::ones({res.videos}, at::kBool), predicted = at::empty({res.videos}, at::kLong);
        for (const auto& x : res.failures) evaluated.data_ptr<bool>()[x.index] = false;
        std::copy(f.predicted.begin(), f.predicted.end(), predicted.data_ptr<int64_t>());
        save_tensor_dict(
            (c.out / rundir::kEvalLogits).string(),
            {{"logits", res.logits}, {"labels", res.labels}, {"evaluated", evaluated}, {"predicted", predicted}});
      }
      rundir::write_eval(c.out, eval_record(c, res, f, o, comm.size(), sha, start, wall));
      print_failures(res);
      std::cout << "eval of " << c.args.path << " (" << c.protocol.name() << ", " << c.protocol.views
                << (c.protocol.views == 1 ? " view" : " views") << " per video): " << figures_line(f) << "\n"
                << (c.out / rundir::kEvalFile).string() << "  (" << fixed(wall, 1) << " s, " << comm.size()
                << (comm.size() == 1 ? " rank" : " ranks") << ")\n";
    }
    provenance.finish("finished");
  } catch (...) {
    provenance.finish("failed");
    throw;
  }
}

// What every rank (and `--nproc`'s launcher, before it starts them) checks first: the
// recipe and its data, the dataset opened strict, the protocol, the weights, the folder.
struct Prepared {
  Session s;
  RecipeArgs args;
  std::shared_ptr<Dataset> data;
  EvalProtocol protocol;
  Weights w;
  fs::path out;
};

// `say`: this process reports a problem (the others leave with its kind, silent) and,
// with `announce`, which checkpoint of a run folder it evaluates.
std::unique_ptr<Prepared> prepare(const RecipeArgs& given, const EvalArgs& e, bool say, bool announce) {
  auto p = std::make_unique<Prepared>();
  Session& s = p->s;
  p->args = given;
  p->args.require_data = true;  // the validation split is read
  const auto prepared = base::attempt([&] {
    if (!open_session(s, p->args)) throw base::invalid("");
    refuse_backend_of_one(p->args.path, s.plan->comm, "evaluate");
    // A bad video is recorded as failed, never replaced by the next good one. The
    // dataset with the recipe's test pipeline, as the trainer and predict make it.
    dsl::Params params = s.plan->dataset_params;
    if (params.has("strict")) params.values()["strict"] = dsl::Value(true);
    // (a plugin's own error comes as a PluginError naming the dataset; attach_transforms
    // names the recipe's list)
    p->data = make_dataset(s.host, *s.plan, params);
    if (p->data->size(Split::Val) == 0) throw base::failure(p->args.path + ": the validation split has no videos");
    p->protocol = eval_protocol(*s.plan, p->data->views(Split::Val));
    p->w = resolve_weights(e.weights, say && announce);
    p->out = out_dir(e, p->w, p->args.path, p->protocol);
    check_out(p->out, e, p->w, p->args.path);
  });
  if (!prepared && !say) throw prepared.reword("");  // the first rank says it
  prepared.value();
  return p;
}

void run_eval(const RecipeArgs& given, const EvalArgs& e) {
  // Before the comm exists, every rank finds the same problem: the first one says it.
  const bool first = detect_launcher().rank <= 0;
  std::unique_ptr<Prepared> p = prepare(given, e, first, first);
  Session& s = p->s;
  const std::shared_ptr<Dataset>& data = p->data;
  // Datasets without a strict mode replace a bad sample by another: that must not pass unseen.
  const int64_t skipped_before = data->skipped_samples();
  auto comm = s.host.make<Comm>("comm", s.plan->comm, s.plan->comm_params);
  Context c{p->args, e, s, *data, p->protocol, p->w, p->out};
  auto check_replaced = [&] {
    if (data->skipped_samples() != skipped_before)
      throw base::failure("dataset '" + s.plan->dataset + "' replaced " +
                          std::to_string(data->skipped_samples() - skipped_before) +
                          " bad sample(s) by others and has no `strict` parameter to stop it: the figures would "
                          "count other videos in their place");
  };
  if (comm->size() == 1) {
    eval_body(c, *comm);
    check_replaced();
    return;
  }
  // No collective watchdog (dist.timeout_s): the one gather waits at the end for the
  // slowest rank, however long its share takes. A rank that fails ends every rank.
  const int rank = comm->rank();
  auto fail = [&](const std::string& what, int code) {
    if (!what.empty()) std::fprintf(stderr, "vexp: error: rank %d: %s\n", rank, base::printable(what, 4096).c_str());
    std::fflush(stderr);
    comm->abort(code);
  };
  try {
    eval_body(c, *comm);
    check_replaced();
  } catch (const base::Error& err) {
    fail(err.what(), exit_code(err));
  } catch (const c10::Error& err) {
    fail(err.what_without_backtrace(), 1);
  } catch (const std::exception& err) {
    fail(err.what(), 1);
  }
}

}  // namespace

void add_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "eval", "Evaluate weights on the recipe's validation split by its test protocol (views averaged per video)");
  auto args = std::make_shared<RecipeArgs>();
  auto e = std::make_shared<EvalArgs>();
  args->add_to(cmd);
  cmd->add_option("--weights", e->weights,
                  "vexp checkpoint, run directory (its latest checkpoint) or PyTorch state dict (.pth: torchvision, "
                  "TSM, mmaction2)")
      ->required();
  cmd->add_option("--out", e->out,
                  "Folder for eval.json (default: RUN_DIR/eval-PROTOCOL for a run directory's weights, else "
                  "eval/RECIPE-PROTOCOL)");
  cmd->add_flag("--logits", e->logits, "Also write every video's averaged logits to DIR/logits.pt (torch.load)");
  cmd->add_flag("--force", e->force, "Replace an earlier eval.json in DIR");
  cmd->add_option("--batch", e->batch, "Views per forward pass (default: run.eval_batch, else dist.batch_per_gpu)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--nproc", e->nproc, "Start this many local ranks (through mpirun)")->check(CLI::PositiveNumber);
  cmd->callback([args, e] {
    if (e->nproc > 1 && !detect_launcher().mpi) {
      // Refused before any rank starts: a bad recipe, missing data, an existing eval.json.
      prepare(*args, *e, true, false);
      std::vector<std::string> pass{"--weights", e->weights};
      if (!e->out.empty()) pass.insert(pass.end(), {"--out", e->out});
      if (e->logits) pass.push_back("--logits");
      if (e->force) pass.push_back("--force");
      if (e->batch > 0) pass.insert(pass.end(), {"--batch", std::to_string(e->batch)});
      if (launch_local_ranks(e->nproc, *args, pass, "eval")) return;
    }
    run_eval(*args, *e);
  });
}

}  // namespace vexp::cli
