// Training hooks through the trainer, on the quickstart recipe shrunk to seconds:
// the points in order with their positions (the trace fixture), the metrics they
// add, their state through checkpoints, their errors; the ema hook's records,
// weights files, summary and provenance, and its exact resume.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "vexp/base/error.hpp"
#include "vexp/hook.hpp"
#include "vexp/registrar.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/torch_save.hpp"
#include "vexp/runtime/trainer.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kRecipe = std::string(VEXP_SOURCE_DIR) + "/recipes/quickstart/tsm_motion.toml";

// 48 clips of batch 8: 6 steps per epoch; log_every 4: steps 4 and 6 of each epoch logged.
std::vector<vexp::dsl::Override> tiny(int epochs = 2) {
  std::vector<vexp::dsl::Override> o;
  for (const std::string s : {"data.params.train_clips=48", "data.params.val_clips=16", "data.params.size=16",
                              "data.params.frames=4", "data.params.classes=4", "dist.batch_per_gpu=8",
                              "run.progress=\"none\"", "run.threads=1", "run.log_every=4"})
    o.push_back(*vexp::dsl::parse_override(s));
  o.push_back(*vexp::dsl::parse_override("run.epochs=" + std::to_string(epochs)));
  return o;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("vexp_hooks_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A recipe: the quickstart with `hooks` ([[hooks]] tables) appended.
std::string recipe_with(const fs::path& dir, const std::string& hooks) {
  const fs::path p = dir / "recipe.toml";
  std::ofstream(p) << "extends = \"" << kRecipe << "\"\n" << hooks;
  return p.string();
}

void open(vexp::Session& s, const std::string& path, std::vector<vexp::dsl::Override> o) {
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  s.host.load_directory(std::string(VEXP_TEST_FIXTURE_DIR) + "/trace_hook", problems);
  if (!problems.empty()) throw std::runtime_error(problems.front());
  vexp::OpenOptions options;
  options.load_plugins = false;
  options.overrides = std::move(o);
  if (!vexp::open_recipe(s, path, options)) throw std::runtime_error(s.diags.str());
}

vexp::TrainResult train(const std::string& recipe, const fs::path& out, std::vector<vexp::dsl::Override> o,
                        bool resume = false, int64_t stop_after = 0) {
  vexp::Session s;
  open(s, recipe, std::move(o));
  vexp::TrainOptions opt;
  opt.out_dir = out.string();
  opt.resume = resume;
  opt.stop_after_epochs = stop_after;
  return vexp::train(s, opt);
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<json> records(const fs::path& run) {
  std::vector<json> out;
  for (const auto& l : lines_of(run / "metrics.jsonl")) out.push_back(json::parse(l));
  return out;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j;
  in >> j;
  return j;
}

// "after_step step=3 epoch=1 ..." -> "after_step step=3 epoch=1 epoch_step=3" (the first `fields` words).
std::string head(const std::string& line, int fields = 4) {
  std::istringstream in(line);
  std::string w, out;
  for (int i = 0; i < fields && in >> w; ++i) out += (i ? " " : "") + w;
  return out;
}

std::string field(const std::string& line, const std::string& key) {
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 2;
  return line.substr(from, line.find(' ', from) - from);
}

struct FaultEnv {
  explicit FaultEnv(const char* spec) { ::setenv("VEXP_TEST_FAULT", spec, 1); }
  ~FaultEnv() { ::unsetenv("VEXP_TEST_FAULT"); }
};

TEST(TrainerHooks, PointsAreCalledInOrderWithTheirPositions) {
  TempDir t("order");
  const fs::path trace = t.path / "trace.txt";
  const std::string r = recipe_with(t.path, "[[hooks]]\ntype = \"trace\"\nfile = \"" + trace.string() +
                                                "\"\nevaluate = true\n");
  auto res = train(r, t.path / "run", tiny());
  ASSERT_TRUE(res.finished);
  const auto lines = lines_of(trace);
  std::vector<std::string> want{"start step=0 epoch=1 epoch_step=0"};
  for (int e = 1; e <= 2; ++e) {
    for (int s = 1; s <= 6; ++s)
      want.push_back("after_step step=" + std::to_string(6 * (e - 1) + s) + " epoch=" + std::to_string(e) +
                     " epoch_step=" + std::to_string(s));
    const std::string at = "step=" + std::to_string(6 * e) + " epoch=" + std::to_string(e) + " epoch_step=6";
    want.push_back("after_eval " + at);
    want.push_back("at_checkpoint " + at);
  }
  want.push_back("at_end step=12 epoch=2 epoch_step=6");
  ASSERT_EQ(lines.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(head(lines[i]), want[i]) << i;
    EXPECT_EQ(field(lines[i], "epochs"), "2") << lines[i];
    EXPECT_EQ(field(lines[i], "ranks"), "1") << lines[i];
    EXPECT_EQ(field(lines[i], "model"), "1") << lines[i];
    EXPECT_EQ(field(lines[i], "run_dir"), "1") << lines[i];
  }
  // Logged steps: 4 and 6 of each epoch (log_every 4, an epoch's last).
  for (size_t i = 1; i <= 6; ++i) EXPECT_EQ(field(lines[i], "logged"), i == 4 || i == 6 ? "1" : "0") << lines[i];
  // A logged step's record carries the metric the hook added at it, and the lr the hook saw.
  const auto recs = records(t.path / "run");
  std::vector<json> steps, evals;
  for (const auto& j : recs) (j["type"] == "step" ? steps : evals).push_back(j);
  ASSERT_EQ(steps.size(), 4u);
  ASSERT_EQ(evals.size(), 2u);
  const int64_t logged_at[] = {4, 6, 10, 12};
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["global_step"], logged_at[i]);
    EXPECT_EQ(steps[i]["trace_steps"], logged_at[i]) << steps[i];  // added at the logged steps only
    std::ostringstream lr;
    lr.precision(17);
    lr << steps[i]["lr"].get<double>();
    EXPECT_EQ(field(lines[static_cast<size_t>(logged_at[i]) + (logged_at[i] > 6 ? 2 : 0)], "lr"), lr.str());
  }
  // After an evaluation: the trainer's figures, the hook's metric in the eval record;
  // evaluating the own weights through the context gives the same figures and leaves them.
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(evals[e]["trace_evals"], evals[e]["top1"]);
    const std::string& l = lines[7 + 8 * e];
    EXPECT_EQ(field(l, "same"), "1") << l;
    EXPECT_EQ(field(l, "weights_back"), "1") << l;
  }
  // At a checkpoint: its file, and no add_metric or evaluate.
  EXPECT_EQ(field(lines[8], "checkpoint"), "epoch_0001.pt");
  EXPECT_EQ(field(lines[16], "checkpoint"), "epoch_0002.pt");
  EXPECT_EQ(field(lines[8], "add_metric"), "0");
  EXPECT_EQ(field(lines[8], "evaluate"), "0");
  // At the end: summary.json has the last evaluation's hook metrics and the end's.
  const json summary = read_json(t.path / "run" / "summary.json");
  EXPECT_EQ(summary["trace_evals"], evals[1]["top1"]);
  EXPECT_EQ(summary["trace_end"], 12);
  EXPECT_FALSE(summary.contains("hook_weights"));  // the trace hook writes none
  // Its state is in the checkpoint, under its index and type.
  auto c = vexp::load_checkpoint((t.path / "run" / "checkpoints" / "epoch_0002.pt").string());
  ASSERT_EQ(c.hooks.size(), 1u);
  EXPECT_EQ(c.hooks.begin()->first, "0.trace/steps");
  EXPECT_EQ(c.hooks.begin()->second.item<int64_t>(), 12);
}

TEST(TrainerHooks, StateComesBackOnResume) {
  TempDir t("resume");
  const fs::path trace = t.path / "trace.txt";
  const std::string r = recipe_with(t.path, "[[hooks]]\ntype = \"trace\"\nfile = \"" + trace.string() + "\"\n");
  {
    // Interrupted during global step 9 (step 3 of epoch 2): a checkpoint after it.
    FaultEnv env("sigint@step=9");
    EXPECT_THROW(train(r, t.path / "run", tiny()), vexp::InterruptedError);
  }
  train(r, t.path / "run", tiny(), /*resume=*/true);
  const auto lines = lines_of(trace);
  // The first invocation: start, 6 steps, eval, checkpoint, 3 steps, the interruption's checkpoint.
  ASSERT_EQ(lines.size(), 1u + 6 + 2 + 3 + 1 + 1 + 3 + 2 + 1);
  EXPECT_EQ(head(lines[12]), "at_checkpoint step=9 epoch=2 epoch_step=3");
  EXPECT_EQ(field(lines[12], "checkpoint"), "epoch_0001_step_000003.pt");
  // The second: starts where the first stopped, its count continued from the checkpoint.
  EXPECT_EQ(head(lines[13]), "start step=9 epoch=2 epoch_step=3");
  EXPECT_EQ(head(lines[14]), "after_step step=10 epoch=2 epoch_step=4");
  EXPECT_EQ(field(lines[14], "count"), "10");
  EXPECT_EQ(head(lines.back()), "at_end step=12 epoch=2 epoch_step=6");
  EXPECT_EQ(read_json(t.path / "run" / "summary.json")["trace_end"], 12);
}

TEST(TrainerHooks, ErrorsNameTheHookAndThePoint) {
  TempDir t("errors");
  const fs::path trace = t.path / "trace.txt";
  auto message = [&](const std::string& extra, const std::string& name) {
    const std::string r =
        recipe_with(t.path, "[[hooks]]\ntype = \"trace\"\nfile = \"" + trace.string() + "\"\n" + extra);
    try {
      train(r, t.path / name, tiny(1));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string m = message("fail_at = \"after_eval\"\n", "a");
  EXPECT_NE(m.find("hooks[0] (hook 'trace', " + (t.path / "recipe.toml").string() + ":2:1) failed after the evaluation "
                   "after step 6 (epoch 1): the trace hook fails after_eval as asked"),
            std::string::npos)
      << m;
  m = message("fail_at = \"after_step\"\n", "b");
  EXPECT_NE(m.find("failed after step 1 (epoch 1): the trace hook fails after_step as asked"), std::string::npos) << m;
  // A metric may not take a name of the trainer's records, nor one that is not a word.
  m = message("metric = \"loss\"\n", "c");
  EXPECT_NE(m.find("metric 'loss' is one of the trainer's own"), std::string::npos) << m;
  m = message("metric = \"a b\"\n", "d");
  EXPECT_NE(m.find("metric name 'a b' is not letters, digits and '_'"), std::string::npos) << m;
  // Two hooks adding one metric at one point.
  const std::string r2 = recipe_with(t.path, "[[hooks]]\ntype = \"trace\"\nfile = \"" + trace.string() +
                                                 "\"\n[[hooks]]\ntype = \"trace\"\nfile = \"" + trace.string() + "\"\n");
  try {
    train(r2, t.path / "e", tiny(1));
    FAIL() << "expected a failure";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("metric 'trace_steps' was added at this point already, by hooks[0]"),
              std::string::npos)
        << e.what();
  }
}

TEST(TrainerHooks, AFactoryThatRefusesItsParametersStopsTheRunBeforeItsDirectory) {
  TempDir t("refuse");
  const std::string r = recipe_with(t.path, "[[hooks]]\ntype = \"refuser\"\n");
  vexp::Session s;
  vexp::PluginDecl d;
  d.name = "refuser";
  d.doc = "A hook whose factory refuses (test only)";
  s.host.builtin_registrar("test").add_hook(d, [](const vexp::Params&) -> std::shared_ptr<vexp::Hook> {
    throw std::invalid_argument("level: not today");
  });
  // Opening the recipe (vexp check, run, --dry-run) makes the hooks: the refusal is
  // a recipe error at the hook's table.
  try {
    open(s, r, tiny());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {  // open() throws the diagnostics
    EXPECT_EQ(std::string(e.what()).rfind(r + ":2:1: error: hooks[0]: hook 'refuser'", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("level: not today"), std::string::npos) << e.what();
  }
  // A caller that trains without that check (RunHooks, before the run directory).
  ASSERT_TRUE(s.plan.has_value());
  vexp::TrainOptions opt;
  opt.out_dir = (t.path / "run").string();
  try {
    vexp::train(s, opt);
    FAIL() << "expected an error";
  } catch (const vexp::base::Error& e) {
    EXPECT_EQ(e.kind(), vexp::base::ErrorKind::invalid);
    EXPECT_EQ(std::string(e.what()).rfind(r + ":2:1: hooks[0]: hook 'refuser'", 0), 0u) << e.what();
  }
  EXPECT_FALSE(fs::exists(t.path / "run"));
}

// ---- the ema hook ----

const char* kEma = "[[hooks]]\ntype = \"ema\"\ndecay = 0.9\n";

TEST(TrainerHooks, EmaWritesMetricsWeightsSummaryAndProvenance) {
  TempDir t("ema");
  const std::string r = recipe_with(t.path, kEma);
  const fs::path run = t.path / "run";
  auto o = tiny();
  o.push_back(*vexp::dsl::parse_override("run.keep_checkpoints=1"));
  train(r, run, o);
  // Every eval record has the averaged weights' figures, and they differ from the trained ones'.
  int evals = 0;
  for (const auto& j : records(run))
    if (j["type"] == "eval") {
      ++evals;
      for (const char* k : {"ema_top1", "ema_top5", "ema_loss"}) ASSERT_TRUE(j.contains(k)) << j;
      EXPECT_NE(j["ema_loss"], j["val_loss"]);
    } else {
      EXPECT_FALSE(j.contains("ema_top1"));
    }
  EXPECT_EQ(evals, 2);
  // Beside the last checkpoint (keep_checkpoints = 1: the first one went with its side file).
  const fs::path ema = run / "checkpoints" / "epoch_0002.ema.pt";
  ASSERT_TRUE(fs::exists(ema));
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "epoch_0001.ema.pt"));
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "epoch_0001.pt"));
  // A state dict of every model tensor, equal to the hook's state in the checkpoint.
  const auto sd = vexp::find_state_dict(vexp::load_torch_file(ema.string()), ema.string());
  const auto c = vexp::load_checkpoint((run / "checkpoints" / "epoch_0002.pt").string());
  ASSERT_EQ(sd.size(), c.model.size());
  EXPECT_EQ(sd.front().first, "features.conv1.weight");  // the model's order
  bool some_differ = false;
  for (const auto& [k, v] : sd) {
    ASSERT_TRUE(c.model.count(k)) << k;
    EXPECT_TRUE(at::equal(v, c.hooks.at("0.ema/" + k))) << k;
    if (v.is_floating_point() && !at::equal(v, c.model.at(k))) some_differ = true;
  }
  EXPECT_TRUE(some_differ);
  // summary.json: the last evaluation's figures and the file; provenance: the file and its hash.
  const json s = read_json(run / "summary.json");
  const json last = records(run).back();
  for (const char* k : {"ema_top1", "ema_top5", "ema_loss"}) EXPECT_EQ(s[k], last[k]) << k;
  EXPECT_EQ(s["hook_weights"]["ema"], "checkpoints/epoch_0002.ema.pt");
  const auto prov = lines_of(run / "provenance.jsonl");
  ASSERT_EQ(prov.size(), 1u);
  const json p = json::parse(prov[0]);
  EXPECT_EQ(p["weights"]["ema"]["path"], fs::absolute(ema).string());
  EXPECT_EQ(p["weights"]["ema"]["sha256"].get<std::string>().size(), 64u);
}

TEST(TrainerHooks, EmaResumeEqualsTheUninterruptedRun) {
  TempDir t("ema_resume");
  const std::string r = recipe_with(t.path, "[[hooks]]\ntype = \"ema\"\ndecay = 0.9\nwarmup = true\nevery = 2\n");
  train(r, t.path / "full", tiny(3));
  {
    FaultEnv env("sigint@step=9");
    EXPECT_THROW(train(r, t.path / "split", tiny(3)), vexp::InterruptedError);
  }
  EXPECT_TRUE(fs::exists(t.path / "split" / "checkpoints" / "epoch_0001_step_000003.ema.pt"));
  train(r, t.path / "split", tiny(3), /*resume=*/true);
  const auto a = records(t.path / "full"), b = records(t.path / "split");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* k : {"type", "global_step", "loss", "top1", "val_loss", "ema_top1", "ema_top5", "ema_loss"})
      EXPECT_EQ(a[i].value(k, json()), b[i].value(k, json())) << i << " " << k;
  for (const char* f : {"epoch_0003.pt", "epoch_0003.ema.pt"}) {
    const auto fa = vexp::find_state_dict(vexp::load_torch_file((t.path / "full/checkpoints" / f).string()), f);
    const auto fb = vexp::find_state_dict(vexp::load_torch_file((t.path / "split/checkpoints" / f).string()), f);
    ASSERT_EQ(fa.size(), fb.size()) << f;
    for (size_t i = 0; i < fa.size(); ++i) {
      EXPECT_EQ(fa[i].first, fb[i].first);
      EXPECT_TRUE(at::equal(fa[i].second, fb[i].second)) << f << " " << fa[i].first;
    }
  }
  const json sa = read_json(t.path / "full" / "summary.json"), sb = read_json(t.path / "split" / "summary.json");
  for (const char* k : {"top1", "val_loss", "ema_top1", "ema_loss"}) EXPECT_EQ(sa[k], sb[k]) << k;
}

TEST(TrainerHooks, AHookLeavesTheTrainingAsItWas) {
  // The same run with and without the ema hook: the same weights and losses.
  TempDir t("same");
  train(recipe_with(t.path, ""), t.path / "plain", tiny());
  train(recipe_with(t.path, kEma), t.path / "ema", tiny());
  const auto a = vexp::load_checkpoint((t.path / "plain/checkpoints/epoch_0002.pt").string());
  const auto b = vexp::load_checkpoint((t.path / "ema/checkpoints/epoch_0002.pt").string());
  ASSERT_EQ(a.model.size(), b.model.size());
  for (const auto& [k, v] : a.model) EXPECT_TRUE(at::equal(v, b.model.at(k))) << k;
  for (const auto& [k, v] : a.optimizer) EXPECT_TRUE(at::equal(v, b.optimizer.at(k))) << k;
  EXPECT_TRUE(a.hooks.empty());
  const auto ra = records(t.path / "plain"), rb = records(t.path / "ema");
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i)
    for (const char* k : {"loss", "lr", "top1", "top5", "val_loss"}) EXPECT_EQ(ra[i].value(k, json()), rb[i].value(k, json()));
}

}  // namespace
