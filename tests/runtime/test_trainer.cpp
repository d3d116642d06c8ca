// The trainer end to end on the quickstart recipe, shrunk to seconds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/trainer.hpp"
#include "vexp/layer.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kRecipe = std::string(VEXP_SOURCE_DIR) + "/recipes/quickstart/tsm_motion.toml";

std::vector<vexp::dsl::Override> tiny() {
  std::vector<vexp::dsl::Override> o;
  for (const char* s : {"data.params.train_clips=48", "data.params.val_clips=16", "data.params.size=16",
                        "data.params.frames=4", "data.params.classes=4", "dist.batch_per_gpu=8", "run.epochs=2",
                        "run.progress=\"none\"", "run.threads=1"})
    o.push_back(*vexp::dsl::parse_override(s));
  return o;
}

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("vexp_trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// Throws (failing the test with the reason) when plugins or the recipe do not load.
void open(vexp::Session& s, const std::string& path, std::vector<vexp::dsl::Override> o = tiny()) {
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  if (!problems.empty()) throw std::runtime_error(problems.front());
  vexp::OpenOptions options;
  options.load_plugins = false;  // only the test's plugin folder
  options.overrides = std::move(o);
  if (!vexp::open_recipe(s, path, options)) throw std::runtime_error(s.diags.str());
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j;
  in >> j;
  return j;
}

std::vector<json> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// Trains the first epoch of kRecipe (with `o`) into `dir` and stops: a run to resume.
vexp::TrainResult train_first_epoch(const fs::path& dir, std::vector<vexp::dsl::Override> o = tiny()) {
  vexp::Session s;
  open(s, kRecipe, std::move(o));
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  opt.stop_after_epochs = 1;
  return vexp::train(s, opt);
}

// The two runs' checkpoint `file` holds the same model, tensor for tensor.
void expect_same_weights(const fs::path& a, const fs::path& b, const std::string& file, const std::string& context = "") {
  auto ca = vexp::load_checkpoint((a / "checkpoints" / file).string());
  auto cb = vexp::load_checkpoint((b / "checkpoints" / file).string());
  ASSERT_EQ(ca.model.size(), cb.model.size()) << context;
  for (const auto& [k, v] : ca.model) EXPECT_TRUE(at::equal(v, cb.model.at(k))) << k << context;
}

TEST(Trainer, WritesTheRunDirectory) {
  vexp::Session s;
  open(s, kRecipe);
  auto dir = fresh_dir("rundir");
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  auto r = vexp::train(s, opt);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.steps, 2 * (48 / 8));
  EXPECT_TRUE(fs::exists(dir / "resolved.toml"));
  EXPECT_TRUE(fs::exists(dir / "checkpoints" / "epoch_0002.pt"));
  json summary = read_json(dir / "summary.json");
  for (const char* k : {"top1", "top5", "epochs", "steps", "clips_per_s", "wall_s", "params", "flops_per_clip"})
    EXPECT_TRUE(summary.contains(k)) << k;
  EXPECT_GE(summary["top1"].get<double>(), 0.0);
  EXPECT_LE(summary["top1"].get<double>(), 1.0);
  EXPECT_GT(summary["flops_per_clip"].get<double>(), 0.0);
  auto lines = read_lines(dir / "metrics.jsonl");
  int evals = 0;
  for (const auto& l : lines) evals += l["type"] == "eval";
  EXPECT_EQ(evals, 2);
  // A second run into the same directory is refused: nothing is overwritten.
  vexp::Session again;
  open(again, kRecipe);
  EXPECT_THROW(vexp::train(again, opt), std::runtime_error);
  fs::remove_all(dir);
}

TEST(Trainer, ResumeGivesTheUninterruptedResult) {
  auto full = fresh_dir("full"), split = fresh_dir("split");
  {
    vexp::Session s;
    open(s, kRecipe);
    vexp::TrainOptions opt;
    opt.out_dir = full.string();
    vexp::train(s, opt);
  }
  {
    auto r = train_first_epoch(split);
    EXPECT_FALSE(r.finished);
    EXPECT_FALSE(fs::exists(split / "summary.json"));
  }
  {
    vexp::Session s;
    open(s, kRecipe);
    vexp::TrainOptions opt;
    opt.out_dir = split.string();
    opt.resume = true;
    auto r = vexp::train(s, opt);
    EXPECT_TRUE(r.finished);
  }
  json a = read_json(full / "summary.json"), b = read_json(split / "summary.json");
  for (const char* k : {"top1", "top5", "val_loss", "steps", "epochs"}) EXPECT_EQ(a[k], b[k]) << k;
  auto la = read_lines(full / "metrics.jsonl"), lb = read_lines(split / "metrics.jsonl");
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i]["type"], lb[i]["type"]);
    EXPECT_EQ(la[i]["global_step"], lb[i]["global_step"]);
    if (la[i]["type"] == "step") {
      EXPECT_EQ(la[i]["loss"], lb[i]["loss"]) << i;
    }
    if (la[i]["type"] == "eval") {
      EXPECT_EQ(la[i]["top1"], lb[i]["top1"]) << i;
    }
  }
  expect_same_weights(full, split, "epoch_0002.pt");
  fs::remove_all(full);
  fs::remove_all(split);
}

TEST(Trainer, ResumeRefusesAChangedRecipe) {
  auto dir = fresh_dir("changed");
  train_first_epoch(dir);
  vexp::Session s;
  auto o = tiny();
  o.push_back(*vexp::dsl::parse_override("optim.lr=0.05"));
  open(s, kRecipe, o);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  opt.resume = true;
  try {
    vexp::train(s, opt);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("recipe changed"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// An op that turns its input into NaN after `after` training forwards.
class Poison : public vexp::Layer {
 public:
  explicit Poison(int64_t after) : after_(after) {}
  at::Tensor forward(const std::vector<at::Tensor>& in, const vexp::ForwardContext&) override {
    if (is_training() && ++calls_ > after_) return in[0] * std::numeric_limits<float>::quiet_NaN();
    return in[0];
  }

 private:
  int64_t after_, calls_ = 0;
};

TEST(Trainer, NanLossStopsAndKeepsTheLastGoodCheckpoint) {
  auto dir = fresh_dir("nan");
  fs::create_directories(dir);
  std::ofstream(dir / "poisoned.toml") << "extends = \"" << kRecipe << "\"\n"
                                       << "[[model.rewrite]]\nat = \"features/layer4/block1/block_out\"\n"
                                       << "insert = { op = \"poison\", after = 8 }\n";
  vexp::Session s;
  vexp::PluginDecl d;
  d.name = "poison";
  d.doc = "Turns activations into NaN after some steps (test only).";
  d.schema.integer("after", 0, "Forwards before poisoning");
  s.host.builtin_registrar("test").add_op(
      d, [](const vexp::Params& p) { return std::make_shared<Poison>(p.i64("after")); });
  open(s, (dir / "poisoned.toml").string());
  vexp::TrainOptions opt;
  opt.out_dir = (dir / "run").string();
  try {
    vexp::train(s, opt);
    FAIL() << "expected DivergedError";
  } catch (const vexp::DivergedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("NaN"), std::string::npos) << m;
    EXPECT_NE(m.find("epoch 2"), std::string::npos) << m;
    EXPECT_NE(m.find("epoch_0001.pt"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir / "run" / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / "epoch_0002.pt"));
  auto c = vexp::load_checkpoint((dir / "run" / "checkpoints" / "epoch_0001.pt").string());
  for (const auto& [k, v] : c.model)
    if (v.is_floating_point()) {
      EXPECT_TRUE(at::isfinite(v).all().item<bool>()) << k;
    }
  fs::remove_all(dir);
}

// VEXP_TEST_FAULT (test-only fault injection) for the duration of a scope.
struct FaultEnv {
  explicit FaultEnv(const char* spec) { ::setenv("VEXP_TEST_FAULT", spec, 1); }
  ~FaultEnv() { ::unsetenv("VEXP_TEST_FAULT"); }
};

std::string diverged_message(const std::string& name, const char* fault, std::vector<vexp::dsl::Override> o = tiny()) {
  auto dir = fresh_dir(name);
  FaultEnv env(fault);
  vexp::Session s;
  open(s, kRecipe, o);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  std::string m;
  try {
    vexp::train(s, opt);
    ADD_FAILURE() << fault << ": expected DivergedError";
  } catch (const vexp::DivergedError& e) {
    m = e.what();
  }
  // Diverged: no summary claims a top-1.
  EXPECT_FALSE(fs::exists(dir / "summary.json")) << fault;
  fs::remove_all(dir);
  return m;
}

TEST(Trainer, NanValidationLossIsDivergence) {
  std::string m = diverged_message("nanval", "nan_val@epoch=1");
  EXPECT_NE(m.find("validation loss became NaN after epoch 1"), std::string::npos) << m;
  EXPECT_NE(m.find("no checkpoint was written yet"), std::string::npos) << m;
  m = diverged_message("nanval2", "nan_val@epoch=2");
  EXPECT_NE(m.find("after epoch 2; the last good checkpoint is"), std::string::npos) << m;
  EXPECT_NE(m.find("epoch_0001.pt"), std::string::npos) << m;
}

TEST(Trainer, NonFiniteTrainingLossIsDivergence) {
  std::string m = diverged_message("nanloss", "nan_loss@step=3");
  EXPECT_NE(m.find("loss became NaN at epoch 1, step 3"), std::string::npos) << m;
}

TEST(Trainer, LossGrowthIsDivergence) {
  // Steps 9.. observed 1e6 times larger: the window of steps 7-12 (log_every 25:
  // one line per epoch of 6 steps) is far above 1000 x the first loss.
  std::string m = diverged_message("grow", "grow_loss@step=9");
  EXPECT_NE(m.find("training loss grew to"), std::string::npos) << m;
  EXPECT_NE(m.find("mean of steps 7-12, epoch 2"), std::string::npos) << m;
  EXPECT_NE(m.find("run.divergence_factor = 1000"), std::string::npos) << m;
  // A lower factor catches a smaller growth; 0 turns the check off.
  auto o = tiny();
  o.push_back(*vexp::dsl::parse_override("run.divergence_factor=0"));
  auto dir = fresh_dir("grow_off");
  {
    FaultEnv env("grow_loss@step=9");
    vexp::Session s;
    open(s, kRecipe, o);
    vexp::TrainOptions opt;
    opt.out_dir = dir.string();
    EXPECT_TRUE(vexp::train(s, opt).finished);
  }
  fs::remove_all(dir);
}

TEST(Trainer, BadFaultSpecIsRefused) {
  auto dir = fresh_dir("badfault");
  FaultEnv env("nan_loss@epoch=3");
  vexp::Session s;
  open(s, kRecipe);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  EXPECT_THROW(vexp::train(s, opt), std::runtime_error);
  fs::remove_all(dir);
}

// Runs the tiny recipe (3 epochs) into `dir`; returns the result.
vexp::TrainResult run3(const fs::path& dir, bool resume = false, const std::string& from = "") {
  auto o = tiny();
  o.push_back(*vexp::dsl::parse_override("run.epochs=3"));
  o.push_back(*vexp::dsl::parse_override("run.log_every=4"));
  vexp::Session s;
  open(s, kRecipe, o);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  opt.resume = resume;
  opt.resume_from = from;
  return vexp::train(s, opt);
}

void expect_same_runs(const fs::path& full, const fs::path& split) {
  json a = read_json(full / "summary.json"), b = read_json(split / "summary.json");
  for (const char* k : {"top1", "top5", "val_loss", "steps", "epochs", "skipped_samples"}) EXPECT_EQ(a[k], b[k]) << k;
  auto la = read_lines(full / "metrics.jsonl"), lb = read_lines(split / "metrics.jsonl");
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i]["type"], lb[i]["type"]) << i;
    EXPECT_EQ(la[i]["global_step"], lb[i]["global_step"]) << i;
    if (la[i]["type"] == "step") {
      EXPECT_EQ(la[i]["loss"], lb[i]["loss"]) << i;
    }
    if (la[i]["type"] == "eval") {
      EXPECT_EQ(la[i]["val_loss"], lb[i]["val_loss"]) << i;
    }
  }
}

TEST(Trainer, InterruptMidEpochResumesToTheUninterruptedResult) {
  auto full = fresh_dir("int_full"), split = fresh_dir("int_split");
  run3(full);
  {
    // SIGINT during global step 9 (step 3 of epoch 2): the step finishes, a
    // checkpoint of 1 epoch + 3 steps is written, the run reports the interruption.
    FaultEnv env("sigint@step=9");
    try {
      run3(split);
      FAIL() << "expected InterruptedError";
    } catch (const vexp::InterruptedError& e) {
      EXPECT_NE(std::string(e.what()).find("stopped after step 3/6 of epoch 2/3 (global step 9)"), std::string::npos)
          << e.what();
      EXPECT_EQ(fs::path(e.checkpoint).filename(), "epoch_0001_step_000003.pt");
      EXPECT_TRUE(fs::exists(e.checkpoint));
    }
    EXPECT_FALSE(vexp::stop_requested());  // the request was honoured
  }
  EXPECT_FALSE(fs::exists(split / "summary.json"));
  // A later run in this process is not stopped by the earlier signal.
  auto r = run3(split, /*resume=*/true);
  EXPECT_TRUE(r.finished);
  expect_same_runs(full, split);
  json b = read_json(split / "summary.json");
  EXPECT_GE(b["wall_s"].get<double>(), b["train_s"].get<double>());
  fs::remove_all(full);
  fs::remove_all(split);
}

TEST(Trainer, InterruptAtTheEndOfAnEpochEvaluatesOnResume) {
  auto full = fresh_dir("inte_full"), split = fresh_dir("inte_split");
  run3(full);
  {
    FaultEnv env("sigint@step=6");
    EXPECT_THROW(run3(split), vexp::InterruptedError);
  }
  EXPECT_TRUE(fs::exists(split / "checkpoints" / "epoch_0000_step_000006.pt"));
  run3(split, true);
  expect_same_runs(full, split);
  fs::remove_all(full);
  fs::remove_all(split);
}

// 44 clips, global batch 8: 5.5 steps per epoch. Epoch 1 is steps 1-6 (its
// 6th takes 4 clips of epoch 2's shuffle), epoch 2 steps 7-11, epoch 3 steps
// 12-17 (the 17th fills up from a 4th shuffle): 17 steps, 136 clips.
vexp::TrainResult run_uneven(const fs::path& dir, bool resume = false) {
  auto o = tiny();
  for (const char* x : {"data.params.train_clips=44", "run.epochs=3", "run.log_every=1"})
    o.push_back(*vexp::dsl::parse_override(x));
  vexp::Session s;
  open(s, kRecipe, o);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  opt.resume = resume;
  return vexp::train(s, opt);
}

TEST(Trainer, UnevenEpochsSeeEveryClipAndResumeExactlyAtTheirBoundaries) {
  auto full = fresh_dir("uneven_full");
  auto r = run_uneven(full);
  EXPECT_EQ(r.steps, 17);
  // Each epoch's steps, as logged: (epoch, step of the epoch, global step).
  std::vector<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (const auto& l : read_lines(full / "metrics.jsonl"))
    if (l["type"] == "step") {
      seen.emplace_back(l["epoch"].get<int64_t>(), l["step"].get<int64_t>(), l["global_step"].get<int64_t>());
      EXPECT_DOUBLE_EQ(l["epochs_trained"].get<double>(), l["global_step"].get<double>() * 8 / 44);
    }
  ASSERT_EQ(seen.size(), 17u);
  EXPECT_EQ(seen[5], std::make_tuple(int64_t(1), int64_t(6), int64_t(6)));
  EXPECT_EQ(seen[6], std::make_tuple(int64_t(2), int64_t(1), int64_t(7)));
  EXPECT_EQ(seen[10], std::make_tuple(int64_t(2), int64_t(5), int64_t(11)));
  EXPECT_EQ(seen[16], std::make_tuple(int64_t(3), int64_t(6), int64_t(17)));
  // Evaluations after the epochs' last steps.
  std::vector<int64_t> evals;
  for (const auto& l : read_lines(full / "metrics.jsonl"))
    if (l["type"] == "eval") evals.push_back(l["global_step"].get<int64_t>());
  EXPECT_EQ(evals, (std::vector<int64_t>{6, 11, 17}));
  // Interrupted in the step that crosses into epoch 2, in epoch 2's first, in
  // the last step of epoch 2 and in the run's last (filled) step.
  for (const auto& [stop_at, file, message] :
       std::vector<std::tuple<int, const char*, const char*>>{
           {6, "epoch_0000_step_000006.pt", "step 6/6 of epoch 1/3 (global step 6)"},
           {7, "epoch_0001_step_000001.pt", "step 1/5 of epoch 2/3 (global step 7)"},
           {11, "epoch_0001_step_000005.pt", "step 5/5 of epoch 2/3 (global step 11)"},
           {17, "epoch_0002_step_000006.pt", "step 6/6 of epoch 3/3 (global step 17)"}}) {
    auto split = fresh_dir("uneven_" + std::to_string(stop_at));
    {
      FaultEnv env(("sigint@step=" + std::to_string(stop_at)).c_str());
      try {
        run_uneven(split);
        ADD_FAILURE() << "expected InterruptedError at " << stop_at;
      } catch (const vexp::InterruptedError& e) {
        EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        EXPECT_EQ(fs::path(e.checkpoint).filename(), file);
      }
    }
    run_uneven(split, true);
    expect_same_runs(full, split);
    expect_same_weights(full, split, "epoch_0003.pt", " (interrupted at " + std::to_string(stop_at) + ")");
    fs::remove_all(split);
  }
  fs::remove_all(full);
}

// A checkpoint written by the vexp that rounded steps per epoch down, or on
// another number of training clips: the steps do not line up, so no resume.
TEST(Trainer, ResumeRefusesACheckpointOfAnotherStream) {
  auto dir = fresh_dir("stream");
  train_first_epoch(dir);
  const std::string path = (dir / "checkpoints" / "epoch_0001.pt").string();
  const vexp::Checkpoint good = vexp::load_checkpoint(path);
  for (const auto& [key, value, expected] : std::vector<std::tuple<const char*, json, const char*>>{
           {"sampling", nullptr, "written by an earlier vexp whose epochs dropped the clips of their last partial global batch"},
           {"epoch_clips", 40, "it was trained on 40 training clips per epoch, the training split now has 48"},
           {"global_step", 5, "stopped at step 0 of epoch 2 (global step 5), which is not a step of this run's epochs"}}) {
    vexp::Checkpoint c = good;
    json meta = json::parse(c.meta_json);
    if (value.is_null()) meta.erase(key);
    else meta[key] = value;
    c.meta_json = meta.dump();
    vexp::save_checkpoint(path, c);
    vexp::Session s;
    open(s, kRecipe);
    vexp::TrainOptions opt;
    opt.out_dir = dir.string();
    opt.resume = true;
    try {
      vexp::train(s, opt);
      ADD_FAILURE() << "resumed from a checkpoint with another " << key;
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(expected), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  fs::remove_all(dir);
}

TEST(Trainer, WallTimeCoversEveryInvocation) {
  auto dir = fresh_dir("wall");
  train_first_epoch(dir);
  auto c = vexp::load_checkpoint((dir / "checkpoints" / "epoch_0001.pt").string());
  json meta = json::parse(c.meta_json);
  const double first_wall = meta["wall_time_s"].get<double>();
  EXPECT_GE(first_wall, meta["train_time_s"].get<double>());
  vexp::Session s;
  open(s, kRecipe);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  opt.resume = true;
  auto r = vexp::train(s, opt);
  json b = read_json(dir / "summary.json");
  EXPECT_GE(b["wall_s"].get<double>(), b["train_s"].get<double>());
  EXPECT_GT(b["wall_s"].get<double>(), first_wall);
  EXPECT_DOUBLE_EQ(r.wall_s, b["wall_s"].get<double>());
  fs::remove_all(dir);
}

TEST(Trainer, ResumeSkipsACorruptCheckpointAndKeepsIt) {
  auto full = fresh_dir("cor_full"), split = fresh_dir("cor_split");
  run3(full);
  {
    auto o = tiny();
    o.push_back(*vexp::dsl::parse_override("run.epochs=3"));
    o.push_back(*vexp::dsl::parse_override("run.log_every=4"));
    vexp::Session s;
    open(s, kRecipe, o);
    vexp::TrainOptions opt;
    opt.out_dir = split.string();
    opt.stop_after_epochs = 2;
    vexp::train(s, opt);
  }
  const fs::path bad = split / "checkpoints" / "epoch_0002.pt";
  fs::resize_file(bad, fs::file_size(bad) / 2);  // a torn write
  const auto size = fs::file_size(bad);
  run3(split, true);
  ASSERT_TRUE(fs::exists(split / "checkpoints" / "epoch_0002.pt.corrupt"));
  EXPECT_EQ(fs::file_size(split / "checkpoints" / "epoch_0002.pt.corrupt"), size);
  expect_same_runs(full, split);
  fs::remove_all(full);
  fs::remove_all(split);
}

TEST(Trainer, ResumeFromNamesTheCheckpoint) {
  auto a = fresh_dir("from_a"), b = fresh_dir("from_b");
  {
    auto o = tiny();
    o.push_back(*vexp::dsl::parse_override("run.epochs=3"));
    o.push_back(*vexp::dsl::parse_override("run.log_every=4"));
    train_first_epoch(a, o);
  }
  // Into a fresh directory, from another run's checkpoint.
  auto r = run3(b, false, (a / "checkpoints" / "epoch_0001.pt").string());
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.steps, 18);
  // A file that is not there.
  try {
    run3(fresh_dir("from_c"), false, (a / "nope.pt").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.pt': no such checkpoint file"), std::string::npos) << e.what();
  }
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Trainer, CheckpointOfAnotherModelSaysSo) {
  auto dir = fresh_dir("arch");
  train_first_epoch(dir);
  auto o = tiny();
  o.push_back(*vexp::dsl::parse_override("data.params.classes=6"));  // another classifier shape
  vexp::Session s;
  open(s, kRecipe, o);
  vexp::TrainOptions opt;
  opt.out_dir = (dir / "other").string();
  opt.resume_from = (dir / "checkpoints" / "epoch_0001.pt").string();
  try {
    vexp::train(s, opt);
    FAIL();
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("belongs to another model"), std::string::npos) << m;
    EXPECT_NE(m.find("2 of the model's"), std::string::npos) << m;  // classifier weight and bias
    EXPECT_NE(m.find("[6, 64] in the model, [4, 64] in the checkpoint"), std::string::npos) << m;
    EXPECT_EQ(m.find("recipe changed"), std::string::npos) << m;
  }
  fs::remove_all(dir);
}

TEST(Trainer, StaleFailureRecordsAreSetAside) {
  auto dir = fresh_dir("stale");
  fs::create_directories(dir / "failures");
  std::ofstream(dir / "failures" / "rank_1.txt") << "comm mpi: an earlier failed start\n";
  fs::last_write_time(dir / "failures" / "rank_1.txt", fs::file_time_type::clock::now() - std::chrono::hours(1));
  vexp::Session s;
  open(s, kRecipe);
  vexp::TrainOptions opt;
  opt.out_dir = dir.string();
  EXPECT_TRUE(vexp::train(s, opt).finished);
  EXPECT_FALSE(fs::exists(dir / "failures" / "rank_1.txt"));
  EXPECT_TRUE(fs::exists(dir / "failures" / "previous" / "rank_1.txt"));
  fs::remove_all(dir);
}

}  // namespace
