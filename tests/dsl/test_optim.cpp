// [optim]: `type` names an optimizer plugin, whose own keys sit beside it (checked
// against its schema; another optimizer's key is reported naming that optimizer),
// and [[optim.groups]] choose parameter groups by name globs.
#include <gtest/gtest.h>

#include "fake_catalog.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {
namespace {

using testing::fake_catalog;
using testing::kQuickstart;
using testing::TempDir;

struct Checked {
  std::optional<Recipe> recipe;
  std::optional<RecipePlan> plan;
  Diagnostics diags;
  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const auto& x : diags.sorted()) out.push_back(x.str());
    return out;
  }
};

// The quickstart with its [optim] table (line 12; "lr = 0.01" on line 13) replaced by `optim`.
std::unique_ptr<Checked> check_optim(const std::string& optim, std::vector<std::string> sets = {}) {
  std::string text = kQuickstart;
  const std::string from = "[optim]\nlr = 0.01\n";
  text.replace(text.find(from), from.size(), optim);
  auto c = std::make_unique<Checked>();
  LoadOptions opts;
  opts.env = [](const std::string&) { return std::optional<std::string>(); };
  for (const auto& s : sets) opts.overrides.push_back(*parse_override(s));
  c->recipe = load_recipe_text(text, "r.toml", opts, c->diags);
  if (c->recipe) c->plan = validate(*c->recipe, fake_catalog(), c->diags);
  return c;
}

TEST(Optim, SgdIsTheDefaultWithItsKeysBesideType) {
  auto c = check_optim("[optim]\nlr = 0.01\nmomentum = 0.8\nnesterov = true\n");
  ASSERT_TRUE(c->plan) << ::testing::PrintToString(c->messages());
  const OptimConfig& o = c->plan->optim;
  EXPECT_EQ(o.type, "sgd");
  EXPECT_DOUBLE_EQ(o.params.f64("momentum"), 0.8);
  EXPECT_TRUE(o.params.flag("nesterov"));
  EXPECT_FALSE(o.params.flag("lars"));
  EXPECT_DOUBLE_EQ(o.params.f64("lars_eta"), 0.001);
  EXPECT_EQ(o.section.line, 12);
}

// The resolved [optim] of an SGD recipe is what it was when momentum, nesterov and
// LARS were built-in keys: the same text, so the same recipe hash (a resume checks it).
TEST(Optim, ResolvedSgdKeepsTheOrderOfTheBuiltInKeys) {
  auto c = check_optim("[optim]\nlr = 0.01\nmomentum = 0.9\n");
  ASSERT_TRUE(c->plan);
  std::vector<std::string> keys;
  for (const auto& [k, v] : c->plan->resolved.find("optim")->as_table()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "lr", "base_lr", "base_batch", "lr_scaling", "lars", "lars_eta",
                                            "momentum", "nesterov", "weight_decay", "no_decay_bn_bias", "fc_lr5",
                                            "clip_grad_norm"}));
  // The hash of the whole resolved quickstart before the optimizer became a plugin.
  EXPECT_EQ(recipe_hash(c->plan->resolved), recipe_hash(check_optim("[optim]\nlr = 0.01\n")->plan->resolved));
  const std::string toml = to_toml(c->plan->resolved);
  EXPECT_NE(toml.find("[optim]\ntype = \"sgd\"\nlr = 0.01\nbase_lr = 0.0\nbase_batch = 256\nlr_scaling = \"linear\"\n"
                      "lars = false\nlars_eta = 0.001\nmomentum = 0.9\nnesterov = false\nweight_decay = 0.0001\n"
                      "no_decay_bn_bias = true\nfc_lr5 = false\nclip_grad_norm = 0.0\n"),
            std::string::npos)
      << toml;
}

TEST(Optim, AdamwTakesItsOwnKeys) {
  auto c = check_optim("[optim]\ntype = \"adamw\"\nlr = 0.001\nweight_decay = 0.05\nbetas = [0.9, 0.98]\neps = 1e-6\n");
  ASSERT_TRUE(c->plan) << ::testing::PrintToString(c->messages());
  const OptimConfig& o = c->plan->optim;
  EXPECT_EQ(o.type, "adamw");
  EXPECT_EQ(o.params.f64_list("betas"), (std::vector<double>{0.9, 0.98}));
  EXPECT_DOUBLE_EQ(o.params.f64("eps"), 1e-6);
  EXPECT_FALSE(o.params.flag("amsgrad"));
  EXPECT_FALSE(o.params.has("momentum"));
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.05);
  // Resolved: the host's keys, adamw's after lr_scaling.
  std::vector<std::string> keys;
  for (const auto& [k, v] : c->plan->resolved.find("optim")->as_table()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "lr", "base_lr", "base_batch", "lr_scaling", "betas", "eps",
                                            "amsgrad", "weight_decay", "no_decay_bn_bias", "fc_lr5", "clip_grad_norm"}));
}

TEST(Optim, UnknownOptimizerSuggestsTheClosest) {
  auto c = check_optim("[optim]\ntype = \"adamv\"\nlr = 0.001\n");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(), (std::vector<std::string>{
      "r.toml:13:1: error: unknown optimizer plugin 'adamv' (did you mean 'adamw'?); known: adamw, lamb, sgd"}));
}

TEST(Optim, UnknownOptimizerFromSetIsReportedThere) {
  auto c = check_optim("[optim]\nlr = 0.001\nmomentum = 0.9\n", {"optim.type=rmsprop"});
  EXPECT_FALSE(c->plan);
  ASSERT_EQ(c->messages().size(), 1u) << ::testing::PrintToString(c->messages());
  EXPECT_NE(c->messages()[0].find("error: unknown optimizer plugin 'rmsprop'; known: adamw, lamb, sgd"),
            std::string::npos)
      << c->messages()[0];
  // momentum cannot be told to belong or not to an optimizer that does not exist: one error.
}

TEST(Optim, AnotherOptimizersKeyIsAnErrorNamingIt) {
  auto c = check_optim("[optim]\ntype = \"adamw\"\nlr = 0.001\nmomentum = 0.9\nnesterov = true\n");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(),
            (std::vector<std::string>{
                "r.toml:15:1: error: 'momentum' in [optim] is a parameter of optimizer 'sgd', not of 'adamw' (optim.type "
                "at r.toml:13:1); 'adamw' takes betas, eps, amsgrad",
                "r.toml:16:1: error: 'nesterov' in [optim] is a parameter of optimizer 'sgd', not of 'adamw' (optim.type "
                "at r.toml:13:1); 'adamw' takes betas, eps, amsgrad"}));
  // A key two optimizers take names both.
  auto l = check_optim("[optim]\ntype = \"sgd\"\nbetas = [0.9, 0.99]\n");
  EXPECT_EQ(l->messages(), (std::vector<std::string>{
      "r.toml:14:1: error: 'betas' in [optim] is a parameter of optimizer plugins 'adamw', 'lamb', not of 'sgd' "
      "(optim.type at r.toml:13:1); 'sgd' takes lars, lars_eta, momentum, nesterov"}));
}

TEST(Optim, InheritedKeyOfAnotherOptimizerSaysToUnsetIt) {
  TempDir dir;
  const std::string base = dir.write("base.toml", "[optim]\nlr = 0.1\nmomentum = 0.9\n");
  std::string child_text = std::string("extends = \"base.toml\"\n") + kQuickstart;
  child_text.replace(child_text.find("lr = 0.01"), 9, "type = \"lamb\"");
  const std::string child = dir.write("child.toml", child_text);
  Diagnostics d;
  auto recipe = load_recipe(child, {}, d);
  ASSERT_TRUE(recipe);
  EXPECT_FALSE(validate(*recipe, fake_catalog(), d));
  ASSERT_EQ(d.sorted().size(), 1u);
  EXPECT_EQ(d.sorted()[0].str(),
            base + ":3:1: error: 'momentum' in [optim] is a parameter of optimizer 'sgd', not of 'lamb' (optim.type at " +
                child + ":14:1); 'lamb' takes betas, eps, bias_correction, always_adapt, trust_clip (inherited through "
                        "extends: add \"optim.momentum\" to unset)");
  // With the unset, the child is valid.
  const std::string fixed = dir.write("fixed.toml", "unset = [\"optim.momentum\"]\n" + child_text);
  Diagnostics d2;
  auto r2 = load_recipe(fixed, {}, d2);
  ASSERT_TRUE(r2);
  EXPECT_TRUE(validate(*r2, fake_catalog(), d2)) << d2.sorted().at(0).str();
}

TEST(Optim, UnknownKeysAndBadValuesAreReportedAtTheirLine) {
  auto c = check_optim("[optim]\ntype = \"adamw\"\nbetas = [0.9, 1.5]\namsgrd = true\nlr = 0.001\n");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(), (std::vector<std::string>{
      "r.toml:14:1: error: 'betas' in [optim]: element 1: must be in [0, 1), got 1.5",
      "r.toml:15:1: error: unknown key 'amsgrd' in [optim] (did you mean 'amsgrad'?)"}));
  // The sweep's message for a momentum out of range is the same as before.
  auto m = check_optim("[optim]\nmomentum = 1.5\n");
  EXPECT_EQ(m->messages(), (std::vector<std::string>{
      "r.toml:13:1: error: 'momentum' in [optim]: must be in [0, 0.999999], got 1.5"}));
}

TEST(Optim, GroupsAreReadInOrder) {
  auto c = check_optim(
      "[optim]\nlr = 0.1\nweight_decay = 0.05\n"
      "[[optim.groups]]\nname = \"no_decay\"\nmatch = [\"*.bias\", \"*bn*\"]\nweight_decay = 0.0\n"
      "[[optim.groups]]\nmatch = \"head.*\"\nlr_mult = 10\n");
  ASSERT_TRUE(c->plan) << ::testing::PrintToString(c->messages());
  const auto& g = c->plan->optim.groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].name, "no_decay");
  EXPECT_EQ(g[0].match, (std::vector<std::string>{"*.bias", "*bn*"}));
  EXPECT_EQ(g[0].match_locs[1].str(), "r.toml:17:20");
  EXPECT_DOUBLE_EQ(g[0].weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(g[0].lr_mult, 1.0);
  EXPECT_EQ(g[0].loc.line, 15);
  EXPECT_EQ(g[1].name, "group2");  // the default name
  EXPECT_EQ(g[1].match, (std::vector<std::string>{"head.*"}));
  EXPECT_DOUBLE_EQ(g[1].lr_mult, 10.0);
  EXPECT_DOUBLE_EQ(g[1].weight_decay, 0.05);  // optim.weight_decay
  // The resolved tree shows them with every default filled, and validates again.
  const Value* groups = c->plan->resolved.find("optim")->find("groups");
  ASSERT_TRUE(groups && groups->is_array());
  EXPECT_EQ(groups->as_array()[1].find("weight_decay")->as_double(), 0.05);
  EXPECT_EQ(groups->as_array()[1].find("name")->as_string(), "group2");
  Diagnostics d;
  LoadOptions opts;
  auto again = load_recipe_text(to_toml(c->plan->resolved), "resolved.toml", opts, d);
  ASSERT_TRUE(again);
  auto p2 = validate(*again, fake_catalog(), d);
  ASSERT_TRUE(p2);
  EXPECT_EQ(to_toml(p2->resolved), to_toml(c->plan->resolved));
}

TEST(Optim, GroupProblemsAreReportedWhereWritten) {
  auto c = check_optim(
      "[optim]\nlr = 0.1\n"
      "[[optim.groups]]\nname = \"a\"\nmatch = []\n"            // 14-16
      "[[optim.groups]]\nname = \"a\"\nmatch = [\"x\"]\n"       // 17-19
      "[[optim.groups]]\nmatch = [\"z\"]\nlr_mult = -1\n"       // 20-22
      "[[optim.groups]]\nname = \"b\"\nmatch = [\"y\"]\nwd = 0\n"  // 23-26
      "[[optim.groups]]\nname = \"c\"\n");                      // 27-28
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(),
            (std::vector<std::string>{
                "r.toml:16:1: error: 'match' in optim.groups[0]: needs at least one glob (e.g. match = [\"*.bias\", "
                "\"*bn*\"])",
                "r.toml:18:1: error: optim.groups[1]: group name 'a' is already used by the group at r.toml:15:1 (each "
                "group needs its own name)",
                "r.toml:22:1: error: 'lr_mult' in optim.groups[2]: must be >= 0, got -1.0",
                "r.toml:26:1: error: unknown key 'wd' in optim.groups[3]; known keys: name, match, lr_mult, weight_decay",
                "r.toml:27:1: error: optim.groups[4] needs 'match'"}));
  auto e = check_optim("[optim]\nlr = 0.1\n[[optim.groups]]\nmatch = [\"\"]\n");
  EXPECT_EQ(e->messages(), (std::vector<std::string>{
      "r.toml:15:10: error: 'match' in optim.groups[0]: an empty glob matches no parameter"}));
  auto n = check_optim("[optim]\nlr = 0.1\ngroups = 3\n");
  EXPECT_EQ(n->messages(), (std::vector<std::string>{
      "r.toml:14:1: error: optim.groups must be a list of tables ([[optim.groups]] with name, match, lr_mult, "
      "weight_decay), got int 3"}));
}

TEST(Optim, APluginParameterNamedLikeAHostKeyIsRefused) {
  testing::FakeCatalog catalog;
  PluginDecl d;
  d.kind = "optimizer";
  d.name = "greedy";
  d.schema.real("lr", 1.0, "its own learning rate");
  d.schema.real("rho", 0.5, "fine");
  catalog.add(d);
  std::string text = kQuickstart;
  text.replace(text.find("lr = 0.01"), 9, "type = \"greedy\"");
  Diagnostics diags;
  LoadOptions opts;
  auto recipe = load_recipe_text(text, "r.toml", opts, diags);
  ASSERT_TRUE(recipe);
  EXPECT_FALSE(validate(*recipe, catalog, diags));
  ASSERT_EQ(diags.sorted().size(), 1u);
  EXPECT_NE(diags.sorted()[0].str().find("r.toml:13:1: error: optimizer plugin 'greedy' declares lr, which [optim] "
                                         "keeps for the host (type, lr, base_lr"),
            std::string::npos)
      << diags.sorted()[0].str();
}

}  // namespace
}  // namespace vexp::dsl
