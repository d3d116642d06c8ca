// The typed configuration (config.hpp): every field takes its section's schema
// default when the recipe does not write the key, the written (or --set) value
// when it does, and the places errors point at are where the values were written.
#include <gtest/gtest.h>

#include "fake_catalog.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {
namespace {

using testing::fake_catalog;
using testing::kQuickstart;

std::optional<RecipePlan> plan_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  LoadOptions opts;
  opts.env = [](const std::string&) { return std::optional<std::string>(); };
  for (const auto& s : sets) opts.overrides.push_back(*parse_override(s));
  Diagnostics diags;
  auto recipe = load_recipe_text(text, "r.toml", opts, diags);
  std::optional<RecipePlan> plan;
  if (recipe) plan = validate(*recipe, fake_catalog(), diags);
  EXPECT_FALSE(diags.has_errors()) << diags.str();
  return plan;
}

const Value& schema_default(const std::string& section, const std::string& key) {
  for (const auto& [name, schema] : builtin_sections()) {
    if (name != section) continue;
    const ParamSpec* spec = schema.find(key);
    if (!spec) throw std::out_of_range("no key " + section + "." + key);
    return spec->default_value;
  }
  throw std::out_of_range("no section " + section);
}
int64_t int_default(const std::string& s, const std::string& k) { return schema_default(s, k).as_int(); }
double real_default(const std::string& s, const std::string& k) { return schema_default(s, k).as_double(); }
bool flag_default(const std::string& s, const std::string& k) { return schema_default(s, k).as_bool(); }
std::string text_default(const std::string& s, const std::string& k) { return schema_default(s, k).as_string(); }

// The quickstart writes run.name, run.epochs, dist.batch_per_gpu and optim.lr only.
TEST(Config, KeysNotWrittenTakeTheSchemaDefaults) {
  const auto p = plan_of(kQuickstart);
  ASSERT_TRUE(p);
  const RunConfig& r = p->run;
  EXPECT_EQ(r.seed, int_default("run", "seed"));
  EXPECT_EQ(r.eval_every, int_default("run", "eval_every"));
  EXPECT_EQ(r.log_every, int_default("run", "log_every"));
  EXPECT_EQ(r.threads, int_default("run", "threads"));
  EXPECT_EQ(r.checkpoint_every, int_default("run", "checkpoint_every"));
  EXPECT_EQ(r.progress, text_default("run", "progress"));
  EXPECT_EQ(r.out, text_default("run", "out"));
  EXPECT_EQ(r.eval_batch, int_default("run", "eval_batch"));
  EXPECT_EQ(r.device, text_default("run", "device"));
  EXPECT_EQ(r.precision, text_default("run", "precision"));
  EXPECT_EQ(r.memory_format, text_default("run", "memory_format"));
  EXPECT_DOUBLE_EQ(r.divergence_factor, real_default("run", "divergence_factor"));
  EXPECT_EQ(r.noise_scale_every, int_default("run", "noise_scale_every"));
  EXPECT_DOUBLE_EQ(r.noise_scale_ema, real_default("run", "noise_scale_ema"));
  EXPECT_EQ(p->data.workers, int_default("data", "workers"));
  EXPECT_EQ(p->data.prefetch, int_default("data", "prefetch"));
  EXPECT_EQ(p->data.train_size, int_default("data", "train_size"));
  const DistConfig& d = p->dist;
  EXPECT_EQ(d.world_size, int_default("dist", "world_size"));
  EXPECT_EQ(d.accum_steps, int_default("dist", "accum_steps"));
  EXPECT_DOUBLE_EQ(d.bucket_mb, real_default("dist", "bucket_mb"));
  EXPECT_EQ(d.compression, text_default("dist", "compression"));
  EXPECT_EQ(d.reduction, text_default("dist", "reduction"));
  EXPECT_DOUBLE_EQ(d.timeout_s, real_default("dist", "timeout_s"));
  const OptimConfig& o = p->optim;
  EXPECT_EQ(o.type, text_default("optim", "type"));
  EXPECT_DOUBLE_EQ(o.base_lr, real_default("optim", "base_lr"));
  EXPECT_EQ(o.base_batch, int_default("optim", "base_batch"));
  EXPECT_EQ(o.lr_scaling, text_default("optim", "lr_scaling"));
  // The optimizer's own keys: the sgd plugin's schema defaults.
  EXPECT_FALSE(o.params.flag("lars"));
  EXPECT_DOUBLE_EQ(o.params.f64("lars_eta"), 0.001);
  EXPECT_DOUBLE_EQ(o.params.f64("momentum"), 0.9);
  EXPECT_FALSE(o.params.flag("nesterov"));
  EXPECT_TRUE(o.groups.empty());
  EXPECT_DOUBLE_EQ(o.weight_decay, real_default("optim", "weight_decay"));
  EXPECT_EQ(o.no_decay_bn_bias, flag_default("optim", "no_decay_bn_bias"));
  EXPECT_EQ(o.fc_lr5, flag_default("optim", "fc_lr5"));
  EXPECT_DOUBLE_EQ(o.clip_grad_norm, real_default("optim", "clip_grad_norm"));
  const ScheduleConfig& s = p->schedule;
  EXPECT_EQ(s.type, text_default("schedule", "type"));
  EXPECT_DOUBLE_EQ(s.warmup_epochs, real_default("schedule", "warmup_epochs"));
  EXPECT_DOUBLE_EQ(s.warmup_start, real_default("schedule", "warmup_start"));
  EXPECT_TRUE(s.milestones.empty());
  EXPECT_DOUBLE_EQ(s.gamma, real_default("schedule", "gamma"));
  EXPECT_DOUBLE_EQ(s.min_lr, real_default("schedule", "min_lr"));
  // The documented defaults of a few that the runtime depends on.
  EXPECT_EQ(r.log_every, 20);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(d.world_size, 1);
  EXPECT_EQ(s.type, "cosine");
}

TEST(Config, WrittenAndSetValuesArrive) {
  const auto p = plan_of(kQuickstart,
                         {"run.seed=7", "run.eval_every=2", "run.log_every=5", "run.threads=3", "run.checkpoint_every=0",
                          "run.progress=plain", "run.out=/tmp/x", "run.eval_batch=16", "run.device=auto",
                          "run.precision=bf16", "run.memory_format=contiguous", "run.divergence_factor=0",
                          "run.noise_scale_every=5", "run.noise_scale_ema=0.9", "data.workers=0", "data.prefetch=9", "data.train_size=640", "dist.world_size=8",
                          "dist.accum_steps=2", "dist.bucket_mb=1.5", "dist.compression=bf16", "dist.reduction=fast", "dist.timeout_s=30",
                          "optim.base_lr=0.1", "optim.base_batch=64", "optim.lr_scaling=sqrt", "optim.lars=true",
                          "optim.lars_eta=0.002", "optim.momentum=0.5", "optim.nesterov=true", "optim.weight_decay=0",
                          "optim.no_decay_bn_bias=false", "optim.fc_lr5=true", "optim.clip_grad_norm=20",
                          "schedule.type=step", "schedule.warmup_epochs=0.5", "schedule.warmup_start=0.1",
                          "schedule.milestones=[1, 2]", "schedule.gamma=0.5", "schedule.min_lr=0.001"});
  ASSERT_TRUE(p);
  const RunConfig& r = p->run;
  EXPECT_EQ(r.name, "tsm_quick");
  EXPECT_EQ(r.epochs, 3);
  EXPECT_EQ(r.seed, 7);
  EXPECT_EQ(r.eval_every, 2);
  EXPECT_EQ(r.log_every, 5);
  EXPECT_EQ(r.threads, 3);
  EXPECT_EQ(r.checkpoint_every, 0);
  EXPECT_EQ(r.progress, "plain");
  EXPECT_EQ(r.out, "/tmp/x");
  EXPECT_EQ(r.eval_batch, 16);
  EXPECT_EQ(r.device, "auto");
  EXPECT_EQ(r.precision, "bf16");
  EXPECT_EQ(r.memory_format, "contiguous");
  EXPECT_DOUBLE_EQ(r.divergence_factor, 0);
  EXPECT_EQ(r.noise_scale_every, 5);
  EXPECT_DOUBLE_EQ(r.noise_scale_ema, 0.9);
  EXPECT_EQ(p->data.workers, 0);
  EXPECT_EQ(p->data.prefetch, 9);
  EXPECT_EQ(p->data.train_size, 640);
  const DistConfig& d = p->dist;
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.batch_per_gpu, 4);
  EXPECT_EQ(d.accum_steps, 2);
  EXPECT_DOUBLE_EQ(d.bucket_mb, 1.5);
  EXPECT_EQ(d.compression, "bf16");
  EXPECT_EQ(d.reduction, "fast");
  EXPECT_DOUBLE_EQ(d.timeout_s, 30);
  const OptimConfig& o = p->optim;
  EXPECT_DOUBLE_EQ(o.lr, 0.01);
  EXPECT_DOUBLE_EQ(o.base_lr, 0.1);
  EXPECT_EQ(o.base_batch, 64);
  EXPECT_EQ(o.lr_scaling, "sqrt");
  EXPECT_TRUE(o.params.flag("lars"));
  EXPECT_DOUBLE_EQ(o.params.f64("lars_eta"), 0.002);
  EXPECT_DOUBLE_EQ(o.params.f64("momentum"), 0.5);
  EXPECT_TRUE(o.params.flag("nesterov"));
  EXPECT_DOUBLE_EQ(o.weight_decay, 0);
  EXPECT_FALSE(o.no_decay_bn_bias);
  EXPECT_TRUE(o.fc_lr5);
  EXPECT_DOUBLE_EQ(o.clip_grad_norm, 20);
  const ScheduleConfig& s = p->schedule;
  EXPECT_EQ(s.type, "step");
  EXPECT_DOUBLE_EQ(s.warmup_epochs, 0.5);
  EXPECT_DOUBLE_EQ(s.warmup_start, 0.1);
  EXPECT_EQ(s.milestones, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(s.gamma, 0.5);
  EXPECT_DOUBLE_EQ(s.min_lr, 0.001);
}

TEST(Config, LocationsAreWhereTheValuesWereWritten) {
  std::string text = kQuickstart;
  text.replace(text.find("epochs = 3\n"), 11, "epochs = 3\ndevice = \"cpu\"\n");  // line 4
  const auto p = plan_of(text);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->run.section.str(), "r.toml:1:1");
  EXPECT_EQ(p->run.device_loc.str(), "r.toml:4:1");
  EXPECT_FALSE(p->run.precision_loc.known());  // the default: written nowhere
  EXPECT_EQ(p->dist.batch_per_gpu_loc.str(), "r.toml:11:1");

  const auto set = plan_of(kQuickstart, {"dist.batch_per_gpu=2", "run.precision=bf16"});
  ASSERT_TRUE(set);
  EXPECT_EQ(set->dist.batch_per_gpu, 2);
  EXPECT_EQ(set->dist.batch_per_gpu_loc.file, "--set dist.batch_per_gpu=2");
  EXPECT_EQ(set->run.precision_loc.file, "--set run.precision=bf16");
}

// The context validation gave the plugins' shape hooks is the plan's, for the
// runtime's builds: batch_per_gpu, frames and classes, and the model input.
TEST(Config, GraphContextAndInputShapeAreRecorded) {
  const auto p = plan_of(kQuickstart, {"dist.batch_per_gpu=3"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->context.batch, 3);
  ASSERT_EQ(p->data_facts.clip.size(), 4u);
  EXPECT_EQ(p->context.frames, 8);
  EXPECT_EQ(p->context.classes, 10);
  Shape want{3};
  want.insert(want.end(), p->data_facts.clip.begin(), p->data_facts.clip.end());
  EXPECT_EQ(p->input_shape, want);
  EXPECT_EQ(p->input_shape[1], 8);
  EXPECT_EQ(p->input_shape[3], 64);
}

// run.noise_scale_every compares the GPUs' gradients with their mean: refused on
// one GPU, at the key (here its --set), accepted from two (ranks or emulated).
TEST(Config, NoiseScaleNeedsTwoGpus) {
  LoadOptions opts;
  opts.env = [](const std::string&) { return std::optional<std::string>(); };
  opts.overrides.push_back(*parse_override("run.noise_scale_every=10"));
  opts.overrides.push_back(*parse_override("dist.world_size=1"));
  Diagnostics diags;
  auto recipe = load_recipe_text(kQuickstart, "r.toml", opts, diags);
  ASSERT_TRUE(recipe);
  EXPECT_FALSE(validate(*recipe, fake_catalog(), diags));
  EXPECT_NE(diags.str().find("run.noise_scale_every = 10 measures the gradient noise scale"), std::string::npos)
      << diags.str();
  EXPECT_NE(diags.str().find("needs at least two GPUs or emulated GPUs per step"), std::string::npos) << diags.str();
  EXPECT_NE(diags.str().find("--set"), std::string::npos) << diags.str();
  const auto p = plan_of(kQuickstart, {"run.noise_scale_every=10", "dist.world_size=2"});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->run.noise_scale_every, 10);
}

}  // namespace
}  // namespace vexp::dsl
