// The training rig (rig.hpp): what the trainer and both benchmarks build around the
// step, from the recipe's plan. One process with the local comm; the plans say how
// many ranks they are for (the reducer is made, never run, for two).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "vexp/base/error.hpp"
#include "vexp/comm.hpp"
#include "vexp/dsl/diagnostics.hpp"
#include "vexp/loss.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/rig.hpp"
#include "vexp/runtime/session.hpp"

namespace {

const std::string kRecipe = std::string(VEXP_SOURCE_DIR) + "/recipes/quickstart/tsm_motion.toml";

// The quickstart recipe shrunk (as test_trainer.cpp's), with `more` overrides.
void open(vexp::Session& s, const std::vector<std::string>& more, bool must_be_valid = true) {
  std::vector<vexp::dsl::Override> o;
  for (const char* t : {"data.params.train_clips=48", "data.params.val_clips=16", "data.params.size=16",
                        "data.params.frames=4", "data.params.classes=4", "dist.batch_per_gpu=8", "run.epochs=2",
                        "run.progress=\"none\"", "run.threads=1"})
    o.push_back(*vexp::dsl::parse_override(t));
  for (const auto& t : more) o.push_back(*vexp::dsl::parse_override(t));
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  if (!problems.empty()) throw std::runtime_error(problems.front());
  vexp::OpenOptions options;
  options.load_plugins = false;
  options.overrides = std::move(o);
  if (!vexp::open_recipe(s, kRecipe, options) && must_be_valid) throw std::runtime_error(s.diags.str());
}

struct Built {
  vexp::Session s;
  std::shared_ptr<vexp::Comm> comm;
  std::unique_ptr<vexp::Rig> rig;
  vexp::DistPlan dp;
};

// The recipe with `more`, its rig, and the plan of `ranks` ranks (not started).
std::unique_ptr<Built> build(const std::vector<std::string>& more, int64_t ranks, vexp::RigOptions ro = {}) {
  auto b = std::make_unique<Built>();
  open(b->s, more);
  const vexp::dsl::RecipePlan& plan = *b->s.plan;
  b->comm = b->s.host.make<vexp::Comm>("comm", plan.comm, plan.comm_params);
  at::manual_seed(0);
  b->rig = std::make_unique<vexp::Rig>(plan, b->s.host, std::make_shared<vexp::ModelGraph>(plan, b->s.host), b->comm, ro);
  b->dp = vexp::make_dist_plan(plan, ranks, 48, b->rig->grad_numels());
  return b;
}

TEST(Rig, ReducerHasTheStepRecipesBucketSizeAndCompression) {
  auto b = build({"dist.world_size=2", "dist.bucket_mb=0.0625", "dist.compression=\"fp16\""}, 2);
  EXPECT_TRUE(vexp::Rig::uses_reducer(b->dp));
  vexp::TrainStep& step = b->rig->start(b->dp);
  const vexp::Reducer* red = b->rig->reducer();
  ASSERT_NE(red, nullptr);
  EXPECT_DOUBLE_EQ(red->options().bucket_mb, 0.0625);
  EXPECT_EQ(red->options().compression, "fp16");
  EXPECT_TRUE(red->options().prescaled);  // the step's loss carries 1/ranks
  // 176 K parameters of 2 bytes on the wire in buckets of 64 KiB: more than one.
  EXPECT_GT(red->bucket_members().size(), 1u);
  EXPECT_EQ(step.options().ranks, 2);
  EXPECT_EQ(step.options().world, 2);
  EXPECT_FALSE(step.options().exact);
  EXPECT_EQ(&b->rig->step(), &step);
  EXPECT_THROW(b->rig->start(b->dp), std::logic_error);  // once
}

TEST(Rig, DefaultReducerSettings) {
  auto b = build({"dist.world_size=2"}, 2);
  b->rig->start(b->dp);
  ASSERT_NE(b->rig->reducer(), nullptr);
  EXPECT_DOUBLE_EQ(b->rig->reducer()->options().bucket_mb, 25);
  EXPECT_EQ(b->rig->reducer()->options().compression, "none");
}

TEST(Rig, ExactReductionTakesNoReducer) {
  // Two ranks: the exact sum is TrainStep's own, no bucketed reducer.
  auto two = build({"dist.world_size=2", "dist.reduction=\"exact\"", "dist.bucket_mb=0.5"}, 2);
  EXPECT_FALSE(vexp::Rig::uses_reducer(two->dp));
  // One rank emulating both GPUs (a Comm of one rank can run it): no reducer, the
  // exact sum with the recipe's message size.
  auto one = build({"dist.world_size=2", "dist.reduction=\"exact\"", "dist.bucket_mb=0.5"}, 1);
  vexp::TrainStep& step = one->rig->start(one->dp);
  EXPECT_EQ(one->rig->reducer(), nullptr);
  EXPECT_TRUE(step.options().exact);
  EXPECT_DOUBLE_EQ(step.options().bucket_mb, 0.5);
  EXPECT_EQ(step.options().micro, 2);
  EXPECT_EQ(step.options().world, 2);
}

TEST(Rig, OneRankTakesNoReducer) {
  auto b = build({}, 1);
  EXPECT_FALSE(vexp::Rig::uses_reducer(b->dp));
  b->rig->start(b->dp);
  EXPECT_EQ(b->rig->reducer(), nullptr);
  EXPECT_THROW(vexp::Rig(*b->s.plan, b->s.host, nullptr, b->comm, {}), std::logic_error);
}

TEST(Rig, OptimizerScalerAndStepOptionsAreTheRecipes) {
  vexp::RigOptions ro;
  ro.precision = vexp::Precision::Fp16;  // the scaler only: no step is run
  ro.sync_phases = true;
  auto b = build({"optim.lars=true", "optim.lars_eta=0.002", "optim.clip_grad_norm=5", "run.seed=7",
                  "optim.no_decay_bn_bias=true"},
                 1, ro);
  vexp::Rig& rig = *b->rig;
  // The sgd plugin, given [optim]'s own keys (LARS) and the groups.
  EXPECT_TRUE(b->s.plan->optim.params.flag("lars"));
  EXPECT_DOUBLE_EQ(b->s.plan->optim.params.f64("lars_eta"), 0.002);
  EXPECT_TRUE(rig.scaler().enabled());
  size_t in_groups = 0;
  for (const auto& g : rig.optimizer().groups()) in_groups += g.params.size();
  EXPECT_EQ(in_groups, rig.params().size());
  std::vector<int64_t> numels;
  for (const auto& p : rig.params()) numels.push_back(p.numel());
  EXPECT_EQ(rig.grad_numels(), numels);
  EXPECT_TRUE(rig.model().is_training());
  const vexp::StepOptions so = rig.step_options(b->dp);
  EXPECT_EQ(so.seed, 7u);
  EXPECT_DOUBLE_EQ(so.clip_grad_norm, 5);
  EXPECT_EQ(so.precision, vexp::Precision::Fp16);
  EXPECT_TRUE(so.sync_phases);
  EXPECT_EQ(so.rank, 0);

  auto plain = build({}, 1);
  EXPECT_FALSE(plain->s.plan->optim.params.flag("lars"));
  EXPECT_FALSE(plain->rig->scaler().enabled());
}

TEST(Rig, LaysOutTheModel) {
  vexp::RigOptions ro;
  ro.memory_format = vexp::MemoryFormat::ChannelsLast;
  auto b = build({}, 1, ro);
  EXPECT_EQ(b->rig->memory_format(), vexp::MemoryFormat::ChannelsLast);
  bool any = false;
  for (const auto& p : b->rig->params())
    if (p.dim() == 4) any = any || p.is_contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(any);
}

TEST(Rig, StepsTrain) {
  auto b = build({}, 1);
  vexp::TrainStep& step = b->rig->start(b->dp);
  const at::Tensor before = b->rig->params().front().clone();
  at::manual_seed(1);
  const vexp::Batch batch{at::randn({8, 4, 1, 16, 16}), at::randint(0, 4, {8}, at::kLong)};
  const double loss = step.run(0, 0.1, [&](int64_t) { return batch; });
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(at::equal(before, b->rig->params().front()));
}

// ---- the objective (objective.hpp): the loss plugin and the batch transforms ----

const char* kMixup = "data.batch_transforms=[{ type = \"mixup\", alpha = 0.4 }, { type = \"cutmix\" }]";

TEST(Rig, DefaultObjectiveIsTheFormerCrossEntropy) {
  auto b = build({}, 1);
  const vexp::Objective& o = b->rig->objective();
  EXPECT_EQ(o.loss_name(), "cross_entropy");
  EXPECT_FALSE(o.has_batch_transforms());
  at::manual_seed(3);
  vexp::Batch batch{at::randn({8, 4, 1, 16, 16}), at::randint(0, 4, {8}, at::kLong)};
  o.transform(batch, 0, 0);
  EXPECT_FALSE(batch.targets.defined());  // no batch transform: the labels are the targets
  const at::Tensor logits = at::randn({8, 4});
  EXPECT_TRUE(at::equal(o.loss(logits, batch), at::cross_entropy_loss(logits, batch.labels)));
}

TEST(Rig, BatchTransformsDrawFromSeedStepAndMicroBatch) {
  auto b = build({kMixup, "loss.type=\"label_smoothing\""}, 1);
  auto b2 = build({kMixup}, 1);
  auto other_seed = build({kMixup, "run.seed=1"}, 1);
  const vexp::Objective& o = b->rig->objective();
  EXPECT_EQ(o.loss_name(), "label_smoothing");
  EXPECT_TRUE(o.has_batch_transforms());
  EXPECT_EQ(o.classes(), 4);
  at::manual_seed(3);
  const vexp::Batch batch{at::randn({8, 4, 1, 16, 16}), at::randint(0, 4, {8}, at::kLong)};
  const at::Tensor clips = batch.clips.clone();
  auto run = [&](const vexp::Objective& obj, int64_t step, int64_t micro) {
    vexp::Batch x = batch;
    obj.transform(x, step, micro);
    return x;
  };
  const vexp::Batch a = run(o, 5, 1);
  EXPECT_TRUE(at::equal(batch.clips, clips));  // the loader's clips are not written into
  ASSERT_TRUE(a.targets.defined());
  EXPECT_EQ(a.targets.sizes(), (at::IntArrayRef{8, 4}));
  EXPECT_TRUE(at::allclose(a.targets.sum(1), at::ones({8}), 0, 1e-6));
  EXPECT_FALSE(at::equal(a.targets, at::one_hot(batch.labels, 4).to(at::kFloat)));
  // A function of (run.seed, step, micro-batch): the same in another rig (another
  // rank, a resumed run), different for another step, micro-batch or seed.
  const vexp::Batch same = run(b2->rig->objective(), 5, 1);
  EXPECT_TRUE(at::equal(same.clips, a.clips));
  EXPECT_TRUE(at::equal(same.targets, a.targets));
  EXPECT_FALSE(at::equal(run(o, 6, 1).targets, a.targets));
  EXPECT_FALSE(at::equal(run(o, 5, 0).targets, a.targets));
  EXPECT_FALSE(at::equal(run(other_seed->rig->objective(), 5, 1).targets, a.targets));
  // The loss gets the soft targets.
  const at::Tensor logits = at::randn({8, 4});
  EXPECT_TRUE(at::equal(o.loss(logits, a), at::cross_entropy_loss(logits, a.targets, {}, at::Reduction::Mean, -100, 0.1)));
}

TEST(Rig, StepsTrainWithMixup) {
  auto b = build({kMixup, "loss.type=\"soft_target_cross_entropy\""}, 1);
  vexp::TrainStep& step = b->rig->start(b->dp);
  const at::Tensor before = b->rig->params().front().clone();
  at::manual_seed(1);
  const vexp::Batch batch{at::randn({8, 4, 1, 16, 16}), at::randint(0, 4, {8}, at::kLong)};
  const double loss = step.run(0, 0.1, [&](int64_t) { return batch; });
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(at::equal(before, b->rig->params().front()));
}

// A loss that takes class labels only.
struct HardOnly : vexp::Loss {
  at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) override {
    return at::cross_entropy_loss(logits, target);
  }
};

TEST(Rig, ALossWithoutSoftTargetsBehindABatchTransformIsRefused) {
  auto with_hard_loss = [](vexp::Session& s, const std::vector<std::string>& more) {
    vexp::PluginDecl d;
    d.name = "hard_only";
    d.doc = "labels only (test)";
    s.host.builtin_registrar("<test>").add_loss(std::move(d), [](const vexp::Params&) { return std::make_shared<HardOnly>(); });
    open(s, more, false);
  };
  vexp::Session ok;
  with_hard_loss(ok, {"loss.type=\"hard_only\""});
  EXPECT_FALSE(ok.diags.has_errors()) << ok.diags.str();  // no batch transform: fine
  vexp::Session s;
  with_hard_loss(s, {"loss.type=\"hard_only\"", kMixup});
  ASSERT_EQ(s.diags.error_count(), 1u) << s.diags.str();
  const vexp::dsl::Diagnostic& d = s.diags.items().front();
  EXPECT_EQ(d.loc.file, std::string("--set ") + kMixup);  // the batch transforms' entry, where it was written
  EXPECT_NE(d.message.find("batch transform 'mixup' makes soft targets [N, classes] and loss 'hard_only'"),
            std::string::npos) << d.message;
  EXPECT_NE(d.message.find("takes class labels only"), std::string::npos) << d.message;
  // The rig refuses the same recipe (a caller that skipped open_recipe's check).
  ASSERT_TRUE(s.plan.has_value());
  try {
    vexp::Objective o(*s.plan, s.host);
    FAIL() << "made an objective that cannot train";
  } catch (const vexp::base::Error& e) {
    EXPECT_EQ(e.kind(), vexp::base::ErrorKind::invalid);
    EXPECT_NE(std::string(e.what()).find("makes soft targets"), std::string::npos) << e.what();
  }
}

// ---- parameter groups ([[optim.groups]] by name glob, then the default rule) -------------

size_t group_size(const vexp::ParamGroups& g, const std::string& name) {
  for (const auto& pg : g.groups)
    if (pg.name == name) return pg.names.size();
  return 0;
}

const vexp::ParamGroup* group_of(const vexp::ParamGroups& g, const std::string& param) {
  for (const auto& pg : g.groups)
    for (const auto& n : pg.names)
      if (n == param) return &pg;
  return nullptr;
}

TEST(ParamGroups, DefaultRuleIsTodaysDecayNoDecayAndFcLr5) {
  auto b = build({"optim.fc_lr5=true", "optim.weight_decay=0.001"}, 1);
  const vexp::ParamGroups& g = b->rig->param_groups();
  EXPECT_EQ(g.recipe_groups, 0u);
  // ResNet-18: 20 convolution weights (dim 4), 20 BatchNorms (40 tensors of dim 1);
  // the classifier's fc.weight and fc.bias.
  EXPECT_EQ(group_size(g, "decay"), 20u);
  EXPECT_EQ(group_size(g, "no_decay"), 40u);
  EXPECT_EQ(group_size(g, "fc_weight"), 1u);
  EXPECT_EQ(group_size(g, "fc_bias"), 1u);
  EXPECT_EQ(group_of(g, "head.fc.weight")->lr_mult, 5.0);
  EXPECT_EQ(group_of(g, "head.fc.weight")->weight_decay, 0.001);
  EXPECT_EQ(group_of(g, "head.fc.bias")->lr_mult, 10.0);
  EXPECT_EQ(group_of(g, "head.fc.bias")->weight_decay, 0.0);
  EXPECT_EQ(group_of(g, "features.bn1.weight")->name, "no_decay");
  EXPECT_EQ(group_of(g, "features.conv1.weight")->name, "decay");
  size_t n = 0;
  for (const auto& pg : g.groups) n += pg.params.size();
  EXPECT_EQ(n, g.trainable.size());
  EXPECT_EQ(g.trainable.size(), b->rig->params().size());
  EXPECT_TRUE(g.warnings.empty());
}

TEST(ParamGroups, RecipeGroupsByGlobFirstMatchWins) {
  auto b = build({"optim.groups=[{name = \"bn\", match = [\"*bn*\"], weight_decay = 0.0}, "
                  "{name = \"head\", match = [\"head.*\"], lr_mult = 10.0}, "
                  "{name = \"late\", match = [\"features.layer4.*\"], weight_decay = 0.5, lr_mult = 0.1}, "
                  "{name = \"biases\", match = \"*.bias\", weight_decay = 0.0}]",
                  "optim.weight_decay=0.001"},
                 1);
  const vexp::ParamGroups& g = b->rig->param_groups();
  ASSERT_EQ(g.recipe_groups, 4u);
  EXPECT_EQ(g.groups[0].name, "bn");
  EXPECT_EQ(g.groups[1].name, "head");
  EXPECT_EQ(g.groups[2].name, "late");
  // Every tensor of a BatchNorm named bn (features.layer4's too: the first group
  // wins): 17 of the 20; torchvision names the other three downsample.1.
  EXPECT_EQ(group_size(g, "bn"), 34u);
  EXPECT_EQ(group_of(g, "features.layer4.1.bn2.weight")->name, "bn");
  EXPECT_EQ(group_of(g, "features.layer4.1.conv2.weight")->name, "late");
  EXPECT_EQ(group_of(g, "features.layer4.1.conv2.weight")->lr_mult, 0.1);
  EXPECT_EQ(group_of(g, "features.layer4.1.conv2.weight")->weight_decay, 0.5);
  EXPECT_EQ(group_of(g, "head.fc.weight")->name, "head");
  EXPECT_EQ(group_of(g, "head.fc.weight")->lr_mult, 10.0);
  EXPECT_EQ(group_of(g, "head.fc.weight")->weight_decay, 0.001);  // optim.weight_decay
  EXPECT_EQ(group_of(g, "head.fc.bias")->name, "head");
  // The rest: "biases" takes the downsample BatchNorms' biases of layer2 and layer3
  // (layer4's are "late"'s), the default rule their weights (no decay: one dimension)
  // and the convolutions (decay).
  EXPECT_EQ(group_size(g, "biases"), 2u);
  EXPECT_EQ(group_of(g, "features.layer2.0.downsample.1.bias")->name, "biases");
  EXPECT_EQ(group_of(g, "features.layer2.0.downsample.1.weight")->name, "no_decay");
  EXPECT_EQ(group_size(g, "no_decay"), 2u);
  EXPECT_EQ(group_of(g, "features.conv1.weight")->name, "decay");
  EXPECT_TRUE(g.warnings.empty());
  // A glob that matches only what earlier groups took: said, not an error; its group
  // stays, empty.
  auto shadow = build({"optim.groups=[{name = \"bn\", match = \"*bn*\"}, {name = \"again\", match = [\"*.bn1.*\"]}]"},
                      1);
  const vexp::ParamGroups& s = shadow->rig->param_groups();
  EXPECT_EQ(group_size(s, "again"), 0u);
  EXPECT_EQ(s.groups[1].name, "again");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].loc.file.rfind("--set", 0), 0u);
  EXPECT_NE(s.warnings[0].message.find("optim.groups[1] ('again'): '*.bn1.*' matches only parameters that an earlier "
                                       "group takes"),
            std::string::npos)
      << s.warnings[0].message;
  size_t n = 0;
  for (const auto& pg : g.groups) n += pg.params.size();
  EXPECT_EQ(n, g.trainable.size());
  // The optimizer got them.
  EXPECT_EQ(b->rig->optimizer().groups().size(), g.groups.size());
  const std::vector<std::string> table = vexp::param_groups_table(g);
  ASSERT_EQ(table.size(), g.groups.size() + 1);
  EXPECT_NE(table[1].find("bn"), std::string::npos);
  EXPECT_NE(table[1].find("optim.groups[0] from --set"), std::string::npos) << table[1];
  EXPECT_NE(table[5].find("default rule: weight decay"), std::string::npos) << table[5];
  EXPECT_NE(table[6].find("default rule: optim.no_decay_bn_bias"), std::string::npos) << table[6];
}

TEST(ParamGroups, AGlobMatchingNoParameterIsAnErrorAtItsLine) {
  try {
    build({"optim.groups=[{name = \"x\", match = [\"*.bias\", \"*bnn*\"]}, {match = \"fc.*\"}]"}, 1);
    FAIL() << "no error";
  } catch (const vexp::base::Error& e) {
    EXPECT_EQ(e.kind(), vexp::base::ErrorKind::invalid);
    const std::string m = e.what();
    EXPECT_NE(m.find("optim.groups[0] ('x'): '*bnn*' matches no trainable parameter of the model"), std::string::npos)
        << m;
    EXPECT_NE(m.find("such as features.conv1.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("; also "), std::string::npos) << m;
    EXPECT_NE(m.find("optim.groups[1] ('group2'): 'fc.*' matches none"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
}

TEST(ParamGroups, AdamwIsTheRecipesOptimizer) {
  // The whole table: the quickstart's [optim] writes sgd's momentum.
  auto b = build({"optim={ type = \"adamw\", lr = 0.001, weight_decay = 0.05, betas = [0.8, 0.99] }"}, 1);
  vexp::TrainStep& step = b->rig->start(b->dp);
  EXPECT_TRUE(b->rig->optimizer().state().empty());
  at::manual_seed(1);
  const vexp::Batch batch{at::randn({8, 4, 1, 16, 16}), at::randint(0, 4, {8}, at::kLong)};
  step.run(0, 0.001, [&](int64_t) { return batch; });
  // Moments and a step count per trainable parameter.
  const auto state = b->rig->optimizer().state();
  EXPECT_EQ(state.size(), 3 * b->rig->params().size());
  EXPECT_EQ(state.at("step/head.fc.weight").item<int64_t>(), 1);
  EXPECT_TRUE(state.count("exp_avg/features.conv1.weight"));
  // The gradients are zeroed after the step.
  for (const auto& p : b->rig->params())
    if (p.grad().defined()) {
      EXPECT_EQ(p.grad().abs().sum().item<double>(), 0.0);
    }
}

}  // namespace
