// The trainer end to end on the quickstart recipe, shrunk to seconds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "checkpoint.hpp"
#include "trainer.hpp"
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
  if (!vexp::open_recipe(s, path, o)) throw std::runtime_error(s.diags.str());
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
    vexp::Session s;
    open(s, kRecipe);
    vexp::TrainOptions opt;
    opt.out_dir = split.string();
    opt.stop_after_epochs = 1;
    auto r = vexp::train(s, opt);
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
    if (la[i]["type"] == "step") EXPECT_EQ(la[i]["loss"], lb[i]["loss"]) << i;
    if (la[i]["type"] == "eval") EXPECT_EQ(la[i]["top1"], lb[i]["top1"]) << i;
  }
  auto ca = vexp::load_checkpoint((full / "checkpoints" / "epoch_0002.pt").string());
  auto cb = vexp::load_checkpoint((split / "checkpoints" / "epoch_0002.pt").string());
  ASSERT_EQ(ca.model.size(), cb.model.size());
  for (const auto& [k, v] : ca.model) EXPECT_TRUE(at::equal(v, cb.model.at(k))) << k;
  fs::remove_all(full);
  fs::remove_all(split);
}

TEST(Trainer, ResumeRefusesAChangedRecipe) {
  auto dir = fresh_dir("changed");
  {
    vexp::Session s;
    open(s, kRecipe);
    vexp::TrainOptions opt;
    opt.out_dir = dir.string();
    opt.stop_after_epochs = 1;
    vexp::train(s, opt);
  }
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
  s.host.builtin_registrar("test").add<vexp::Layer>(
      "op", d, [](const vexp::Params& p) { return std::make_shared<Poison>(p.i64("after")); });
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
    if (v.is_floating_point()) EXPECT_TRUE(at::isfinite(v).all().item<bool>()) << k;
  fs::remove_all(dir);
}

}  // namespace
