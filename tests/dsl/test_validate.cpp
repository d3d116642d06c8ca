// Validation: section and plugin schemas, the model graph, rewrites and shapes.
// Every expected diagnostic names the exact file:line:col a user would jump to.
#include <gtest/gtest.h>

#include <filesystem>

#include "fake_catalog.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {
namespace {

using testing::fake_catalog;
using testing::kQuickstart;
using testing::TempDir;

std::vector<std::string> messages(const Diagnostics& d) {
  std::vector<std::string> out;
  for (const auto& x : d.sorted()) out.push_back(x.str());
  return out;
}

// Replaces one exact snippet of the quickstart (keeping line numbers where it can).
std::string quickstart_with(const std::string& from, const std::string& to) {
  std::string text = kQuickstart;
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("snippet not in quickstart: " + from);
  return text.replace(at, from.size(), to);
}

// 1-based column of `needle` in line `line` of `text`.
int col_of(const std::string& text, int line, const std::string& needle) {
  size_t start = 0;
  for (int i = 1; i < line; ++i) start = text.find('\n', start) + 1;
  return static_cast<int>(text.find(needle, start) - start) + 1;
}

struct Checked {
  std::optional<Recipe> recipe;
  std::optional<RecipePlan> plan;
  Diagnostics diags;
};

std::unique_ptr<Checked> check(const std::string& text, LoadOptions opts = {}) {
  auto c = std::make_unique<Checked>();
  if (!opts.env) opts.env = [](const std::string&) { return std::optional<std::string>(); };
  c->recipe = load_recipe_text(text, "r.toml", opts, c->diags);
  if (c->recipe) c->plan = validate(*c->recipe, fake_catalog(), c->diags);
  return c;
}

const Value& at(const Value& root, std::initializer_list<const char*> keys) {
  const Value* cur = &root;
  for (const char* k : keys) {
    cur = cur->find(k);
    if (!cur) throw std::out_of_range(std::string("no key ") + k);
  }
  return *cur;
}

TEST(Validate, QuickstartProducesAFullPlan) {
  auto c = check(kQuickstart);
  ASSERT_TRUE(c->plan) << c->diags.str();
  EXPECT_TRUE(c->diags.items().empty()) << c->diags.str();
  const RecipePlan& p = *c->plan;
  std::vector<std::string> ids, kinds;
  for (const auto& n : p.nodes) {
    ids.push_back(n.id);
    kinds.push_back(n.kind);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"frames", "features", "head", "logits"}));
  EXPECT_EQ(kinds, (std::vector<std::string>{"op", "backbone", "op", "op"}));
  EXPECT_EQ(p.nodes[1].params.i64("depth"), 18);
  EXPECT_EQ(p.nodes[1].params.str("stem"), "imagenet");  // defaults filled
  EXPECT_FALSE(p.nodes[1].params.flag("zero_init_residual"));
  EXPECT_EQ(p.nodes[1].loc.str(), "r.toml:24:1");
  EXPECT_EQ(p.nodes[1].inputs, (std::vector<std::string>{"frames"}));
  EXPECT_EQ(p.nodes[1].output_shape, (Shape{32, 512, 2, 2}));  // the last feature map, not pooled
  EXPECT_EQ(p.nodes[2].output_shape, (Shape{32, 10}));
  EXPECT_EQ(p.nodes[3].output_shape, (Shape{4, 10}));
  EXPECT_EQ(p.dataset, "synthetic_motion");
  EXPECT_EQ(p.dataset_params.i64("clips"), 64);
  EXPECT_EQ(p.comm, "local");
  EXPECT_DOUBLE_EQ(p.comm_params.f64("timeout_s"), 60.0);
  EXPECT_EQ(p.data_facts.clip, (Shape{8, 3, 64, 64}));
  EXPECT_EQ(p.data_facts.classes, 10);
  EXPECT_EQ(p.run.log_every, 20);
  EXPECT_EQ(p.run.progress, "auto");
  EXPECT_DOUBLE_EQ(p.optim.lr, 0.01);
  EXPECT_EQ(p.optim.type, "sgd");
  EXPECT_DOUBLE_EQ(p.optim.params.f64("momentum"), 0.9);
  EXPECT_EQ(p.schedule.type, "cosine");
  EXPECT_EQ(p.model_input, "clip");
  EXPECT_EQ(p.model_output, "logits");
  ASSERT_EQ(p.rewrites.size(), 1u);
  EXPECT_EQ(p.rewrites[0].op, "temporal_shift");
  ASSERT_EQ(p.inserts.size(), 8u);  // resnet18: 2 blocks in each of 4 layers
  EXPECT_EQ(p.inserts[0].node, "features");
  EXPECT_EQ(p.inserts[0].point, "layer1/block0/residual_in");
  EXPECT_EQ(p.inserts[7].point, "layer4/block1/residual_in");
  EXPECT_EQ(p.inserts[0].kind, "op");
  EXPECT_EQ(p.inserts[0].params.i64("fold_div"), 8);
  EXPECT_EQ(p.inserts[0].loc.str(), "r.toml:41:1");
  EXPECT_EQ(p.inserts[0].point_shape, (Shape{32, 64, 16, 16}));
  EXPECT_EQ(p.inserts[2].point_shape, (Shape{32, 64, 16, 16}));  // layer2 block0 reads layer1's output
  EXPECT_EQ(p.inserts[3].point_shape, (Shape{32, 128, 8, 8}));
}

TEST(Validate, ResolvedTreeHasEveryDefaultAndValidatesAgain) {
  auto c = check(kQuickstart);
  ASSERT_TRUE(c->plan) << c->diags.str();
  const Value& r = c->plan->resolved;
  EXPECT_EQ(at(r, {"run", "log_every"}), Value(20));
  EXPECT_EQ(at(r, {"run", "epochs"}), Value(3));
  EXPECT_EQ(at(r, {"run", "epochs"}).loc().str(), "r.toml:3:1");
  EXPECT_EQ(at(r, {"optim", "lr"}), Value(0.01));
  EXPECT_EQ(at(r, {"optim", "no_decay_bn_bias"}), Value(true));
  EXPECT_EQ(at(r, {"schedule", "gamma"}), Value(0.1));
  EXPECT_EQ(at(r, {"data", "params", "clips"}), Value(64));
  EXPECT_EQ(at(r, {"dist", "params", "timeout_s"}), Value(60.0));
  EXPECT_EQ(at(r, {"plugins", "paths"}), Value::array());
  const auto& nodes = at(r, {"model", "node"}).as_array();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(*nodes[1].find("zero_init_residual"), Value(false));
  EXPECT_EQ(*nodes[1].find("stem"), Value("imagenet"));
  EXPECT_EQ(nodes[1].find("pretrained"), nullptr);  // a graph key, set only when the recipe sets it
  EXPECT_EQ(*nodes[3].find("mode"), Value("avg"));
  EXPECT_EQ(*nodes[2].find("dropout"), Value(0.5));
  const auto& insert = *at(r, {"model", "rewrite"}).as_array()[0].find("insert");
  EXPECT_EQ(*insert.find("op"), Value("temporal_shift"));
  EXPECT_EQ(*insert.find("fold_div"), Value(8));

  auto again = check(to_toml(r));
  ASSERT_TRUE(again->plan) << again->diags.str() << to_toml(r);
  EXPECT_EQ(again->plan->resolved, r);
  EXPECT_EQ(recipe_hash(again->plan->resolved), recipe_hash(r));
}

TEST(Validate, SectionProblemsAreAllReportedWhereWritten) {
  auto c = check(R"([run]
epochs = 0
progress = "fancy"
name = 5
[optm]
lr = 1
[optim]
lrr = 0.1
momentum = "high"
[schedule]
gamma = 0.0
milestones = [10, "x"]
[data]
workers = 1
[model]
output = "x"
)");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:2:1: error: 'epochs' in [run]: must be >= 1, got 0",
      "r.toml:3:1: error: 'progress' in [run]: must be one of \"auto\", \"bar\", \"plain\", \"none\", got \"fancy\"",
      "r.toml:4:1: error: 'name' in [run]: expected string, got int 5",
      "r.toml:5:1: error: unknown section 'optm' (did you mean 'optim'?)",
      "r.toml:8:1: error: unknown key 'lrr' in [optim] (did you mean 'lr'?)",
      "r.toml:9:1: error: 'momentum' in [optim]: expected float, got string \"high\"",
      "r.toml:11:1: error: 'gamma' in [schedule]: must be in (0, 1], got 0.0",
      "r.toml:12:1: error: 'milestones' in [schedule]: element 1: expected int, got string \"x\"",
      "r.toml:13:1: error: [data] needs 'dataset'",
      "r.toml:16:1: error: model output 'x' is not a node id (the model has no [[model.node]] tables)",
  }));
}

TEST(Validate, MissingSectionsUseTheFileStart) {
  auto c = check("[run]\nepochs = 2\n");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:1:1: error: [data] needs 'dataset'",
      "r.toml:1:1: error: [model] needs 'output'",
  }));
}

TEST(Validate, InheritedValuesAreReportedInTheBaseFile) {
  TempDir dir;
  const std::string base = dir.write("base.toml", "[optim]\nlr = 500.0\nmomentum = 0.5\n");
  std::string child_text = std::string("extends = \"base.toml\"\n") + kQuickstart;
  // The child sets its own [optim] lr; drop it so that the base's value stays.
  child_text.replace(child_text.find("lr = 0.01"), 9, "nesterov = true");
  const std::string child = dir.write("child.toml", child_text);
  Diagnostics d;
  auto recipe = load_recipe(child, {}, d);
  ASSERT_TRUE(recipe);
  EXPECT_FALSE(validate(*recipe, fake_catalog(), d));
  EXPECT_EQ(messages(d), (std::vector<std::string>{
      base + ":2:1: error: 'lr' in [optim]: must be in [1e-09, 100], got 500.0"}));
}

// `pretrained` is a graph key of every node (the resnet plugin declares no such
// parameter): a file path relative to the recipe, resolved and checked here.
TEST(Validate, PretrainedIsANodeKeyNotAPluginParameter) {
  TempDir dir;
  const std::string weights = dir.write("weights/r18.pth", "not really weights");
  std::string text = quickstart_with("depth = 18", "depth = 18\npretrained = \"weights/r18.pth\"");
  Diagnostics d;
  auto recipe = load_recipe(dir.write("r.toml", text), {}, d);
  ASSERT_TRUE(recipe) << d.str();
  auto plan = validate(*recipe, fake_catalog(), d);
  ASSERT_TRUE(plan) << d.str();
  EXPECT_EQ(std::filesystem::path(plan->nodes[1].pretrained), std::filesystem::path(weights));
  EXPECT_FALSE(plan->nodes[1].params.has("pretrained"));

  text = quickstart_with("depth = 18", "depth = 18\npretrained = \"missing.pth\"");
  Diagnostics missing;
  recipe = load_recipe(dir.write("m.toml", text), {}, missing);
  ASSERT_TRUE(recipe) << missing.str();
  EXPECT_FALSE(validate(*recipe, fake_catalog(), missing));
  EXPECT_EQ(messages(missing), (std::vector<std::string>{
      dir.path("m.toml") + ":29:1: error: 'pretrained' in node 'features': no such file '" +
      dir.path("missing.pth") + "'"}));

  // An empty path (an unset `${VAR:-}`) leaves the node as initialised, and says where.
  text = quickstart_with("depth = 18", "depth = 18\npretrained = \"${VEXP_TEST_UNSET_WEIGHTS:-}\"");
  Diagnostics empty;
  recipe = load_recipe(dir.write("e.toml", text), {}, empty);
  ASSERT_TRUE(recipe) << empty.str();
  plan = validate(*recipe, fake_catalog(), empty);
  ASSERT_TRUE(plan) << empty.str();
  EXPECT_TRUE(plan->nodes[1].pretrained.empty());
  EXPECT_EQ(plan->nodes[1].pretrained_empty.str(), dir.path("e.toml") + ":29:1");
  EXPECT_FALSE(plan->nodes[0].pretrained_empty.known());
}

TEST(Validate, UnknownPluginsListTheKnownOnes) {
  const std::string text = quickstart_with(
      "dataset = \"synthetic_motion\"\nparams = { frames = 8, size = 64, classes = 10 }",
      "dataset = \"synthetic_motoin\"\nparams = { frames = 8, size = 64, classes = 10 }");
  auto c = check(text);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:6:1: error: unknown dataset plugin 'synthetic_motoin' (did you mean 'synthetic_motion'?); "
      "known: kinetics, synthetic_motion"}));

  auto op = check(quickstart_with("op = \"resnet\"", "op = \"resnt\""));
  EXPECT_EQ(messages(op->diags), (std::vector<std::string>{
      "r.toml:26:1: error: unknown op 'resnt' (did you mean 'resnet'?); known: classifier, downsample, fold_time, "
      "resnet, segment_consensus, temporal_shift"}));

  auto comm = check(quickstart_with("batch_per_gpu = 4", "batch_per_gpu = 4\nbackend = \"gloo\""));
  EXPECT_EQ(messages(comm->diags), (std::vector<std::string>{
      "r.toml:11:1: error: unknown comm plugin 'gloo'; known: local, mpi"}));
}

TEST(Validate, PluginParamsAreCheckedAgainstThePluginSchema) {
  const std::string line = "params = { frame = 8, size = 8, classes = 10 }";
  auto c = check(quickstart_with("params = { frames = 8, size = 64, classes = 10 }", line));
  const std::string where = "[data.params] of dataset 'synthetic_motion'";
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:7:" + std::to_string(col_of(line, 1, "frame")) + ": error: unknown key 'frame' in " + where +
          " (did you mean 'frames'?)",
      "r.toml:7:" + std::to_string(col_of(line, 1, "size")) + ": error: 'size' in " + where +
          ": must be >= 16, got 8"}));

  auto comm = check(quickstart_with("batch_per_gpu = 4", "batch_per_gpu = 4\nparams = { timeout = 5 }"));
  EXPECT_EQ(messages(comm->diags), (std::vector<std::string>{
      "r.toml:11:12: error: unknown key 'timeout' in [dist.params] of comm 'local' (did you mean 'timeout_s'?)"}));

  auto kinetics = check(quickstart_with("dataset = \"synthetic_motion\"\nparams = { frames = 8, size = 64, classes = 10 }",
                                        "dataset = \"kinetics\"\nparams = {}"));
  EXPECT_EQ(messages(kinetics->diags), (std::vector<std::string>{
      "r.toml:7:1: error: [data.params] of dataset 'kinetics' needs 'root'"}));
}

TEST(Validate, NodeParamsAreCheckedAgainstTheOpSchema) {
  auto c = check(quickstart_with("depth = 18", "depht = 18"));
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:28:1: error: unknown key 'depht' in node 'features' (resnet) (did you mean 'depth'?)"}));
  auto range = check(quickstart_with("depth = 18", "depth = 20"));
  EXPECT_EQ(messages(range->diags), (std::vector<std::string>{
      "r.toml:28:1: error: 'depth' in node 'features' (resnet): must be one of 18, 34, 50, 101, 152, got 20"}));
  // classes = 0 (the default) takes the dataset's classes.
  auto dataset_classes = check(quickstart_with("classes = 10\n", "\n"));
  ASSERT_TRUE(dataset_classes->plan) << dataset_classes->diags.str();
  EXPECT_TRUE(dataset_classes->diags.items().empty()) << dataset_classes->diags.str();
  EXPECT_EQ(dataset_classes->plan->nodes[2].params.i64("classes"), 0);
  EXPECT_EQ(dataset_classes->plan->nodes[2].output_shape, (Shape{32, 10}));
  auto negative = check(quickstart_with("classes = 10\n", "classes = -1\n"));
  EXPECT_EQ(messages(negative->diags), (std::vector<std::string>{
      "r.toml:34:1: error: 'classes' in node 'head' (classifier): must be >= 0, got -1"}));
}

TEST(Validate, NodeTablesNeedIdOpAndIn) {
  auto c = check(R"([data]
dataset = "synthetic_motion"
[model]
output = "b"
[[model.node]]
op = "fold_time"
in = "clip"
[[model.node]]
id = "b"
in = 3
[[model.node]]
id = "2x"
op = "fold_time"
in = "clip"
[[model.node]]
id = "b"
op = "fold_time"
in = "clip"
[[model.node]]
id = "clip"
op = "fold_time"
in = []
)");
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:5:1: error: [[model.node]] needs 'id'",
      "r.toml:8:1: error: node 'b' needs 'op'",
      "r.toml:10:1: error: 'in' in node 'b': expected a node id or a non-empty array of node ids, got int 3",
      "r.toml:12:1: error: node id '2x' is not an identifier (letters, digits and '_', not starting with a digit)",
      "r.toml:16:1: error: duplicate node id 'b' (first defined at r.toml:9:1)",
      "r.toml:20:1: error: node id 'clip' is the name of the model input",
      "r.toml:22:1: error: 'in' in [[model.node]] at r.toml:19:1: expected a node id or a non-empty array of node "
      "ids, got an array",
  }));

  auto single = check("[data]\ndataset = \"synthetic_motion\"\n[model]\noutput = \"a\"\n[model.node]\nid = \"a\"\n");
  EXPECT_EQ(messages(single->diags), (std::vector<std::string>{
      "r.toml:4:1: error: model output 'a' is not a node id (the model has no [[model.node]] tables)",
      "r.toml:5:1: error: model.node must be an array of tables (write [[model.node]]), got a table",
  }));
}

TEST(Validate, DanglingEdgesSuggestTheClosestNode) {
  auto c = check(quickstart_with("in = \"features\"", "in = [\"features\", \"featurs\"]"));
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:33:19: error: node 'head' reads 'featurs', which is not a node or the model input "
      "(did you mean 'features'?)"}));
  // Only the broken edge is reported, not the nodes upstream of it as "not used".
  auto only = check(quickstart_with("in = \"features\"", "in = \"featurs\""));
  EXPECT_EQ(messages(only->diags), (std::vector<std::string>{
      "r.toml:33:1: error: node 'head' reads 'featurs', which is not a node or the model input "
      "(did you mean 'features'?)"}));
}

TEST(Validate, CyclesAreReportedWithTheirPath) {
  auto c = check(R"([data]
dataset = "synthetic_motion"
[model]
output = "head"
[[model.node]]
id = "b"
op = "fold_time"
in = "a"
[[model.node]]
id = "a"
op = "fold_time"
in = ["clip", "b"]
[[model.node]]
id = "head"
op = "segment_consensus"
in = "a"
)");
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:5:1: error: model graph has a cycle: b -> a -> b"}));

  auto self = check(quickstart_with("in = \"head\"", "in = \"logits\""));
  EXPECT_EQ(messages(self->diags), (std::vector<std::string>{
      "r.toml:19:1: warning: node 'frames' is not used: the model output 'logits' does not depend on it",
      "r.toml:24:1: warning: node 'features' is not used: the model output 'logits' does not depend on it",
      "r.toml:30:1: warning: node 'head' is not used: the model output 'logits' does not depend on it",
      "r.toml:36:1: error: model graph has a cycle: logits -> logits",
  }));
}

TEST(Validate, NodesAreInTopologicalOrderWithTiesInFileOrder) {
  auto c = check(R"([data]
dataset = "synthetic_motion"
params = { size = 32 }
[model]
output = "logits"
[[model.node]]
id = "logits"
op = "segment_consensus"
in = "head"
[[model.node]]
id = "head"
op = "classifier"
in = "feat"
classes = 10
[[model.node]]
id = "side"
op = "fold_time"
in = "clip"
[[model.node]]
id = "feat"
op = "resnet"
in = "frames"
depth = 18
[[model.node]]
id = "frames"
op = "fold_time"
in = "clip"
)");
  ASSERT_TRUE(c->plan) << c->diags.str();
  std::vector<std::string> ids;
  for (const auto& n : c->plan->nodes) ids.push_back(n.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"side", "frames", "feat", "head", "logits"}));
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:15:1: warning: node 'side' is not used: the model output 'logits' does not depend on it"}));
  EXPECT_EQ(c->plan->nodes.back().output_shape, (Shape{8, 10}));
}

TEST(Validate, RewriteMatchingNothingSuggestsAPattern) {
  auto c = check(quickstart_with("features/layer*/block*/residual_in", "features/layr*/block*/residual_in"));
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:42:1: error: rewrite pattern 'features/layr*/block*/residual_in' matches no insertion point "
      "(did you mean 'features/layer*/block*/residual_in'?) (points look like 'features/layer1/block0/block_in', "
      "'features/layer1/block0/residual_in', 'features/layer1/block0/block_out', ...)"}));
}

TEST(Validate, RewritesExpandInRuleOrderThenPointOrder) {
  auto c = check(quickstart_with(
      "at = \"features/layer*/block*/residual_in\"\ninsert = { op = \"temporal_shift\", segments = 8, fold_div = 8 }",
      "at = \"features/layer[34]/block1/block_out\"\ninsert = { op = \"temporal_shift\" }\n"
      "[[model.rewrite]]\nat = \"features/layer1/block?/block_in\"\ninsert = { op = \"temporal_shift\", fold_div = 4 }"));
  ASSERT_TRUE(c->plan) << c->diags.str();
  std::vector<std::string> points;
  for (const auto& i : c->plan->inserts) points.push_back(i.point + " " + std::to_string(i.params.i64("fold_div")));
  EXPECT_EQ(points, (std::vector<std::string>{"layer3/block1/block_out 8", "layer4/block1/block_out 8",
                                              "layer1/block0/block_in 4", "layer1/block1/block_in 4"}));
  EXPECT_EQ(c->plan->inserts[2].loc.str(), "r.toml:44:1");
  EXPECT_EQ(c->plan->inserts[0].point_shape, (Shape{32, 256, 4, 4}));
  EXPECT_EQ(c->plan->rewrites.size(), 2u);
}

TEST(Validate, RewriteInsertsAreCheckedLikeNodes) {
  const std::string line = "insert = { op = \"temporal_shfit\", segments = 8, fold_div = 8 }";
  auto c = check(quickstart_with("insert = { op = \"temporal_shift\", segments = 8, fold_div = 8 }", line));
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:43:12: error: unknown op 'temporal_shfit' (did you mean 'temporal_shift'?); known: classifier, "
      "downsample, fold_time, resnet, segment_consensus, temporal_shift"}));

  const std::string bad = "insert = { op = \"temporal_shift\", segments = 8, fold_div = 0, shift = 1 }";
  auto p = check(quickstart_with("insert = { op = \"temporal_shift\", segments = 8, fold_div = 8 }", bad));
  const std::string where = "the insert of rewrite 'features/layer*/block*/residual_in' (temporal_shift)";
  EXPECT_EQ(messages(p->diags), (std::vector<std::string>{
      "r.toml:43:" + std::to_string(col_of(bad, 1, "fold_div")) + ": error: 'fold_div' in " + where +
          ": must be >= 1, got 0",
      "r.toml:43:" + std::to_string(col_of(bad, 1, "shift =")) + ": error: unknown key 'shift' in " + where +
          "; known keys: segments, fold_div, mode"}));

  auto keys = check(quickstart_with("at = \"features", "where = 1\nat = \"features"));
  EXPECT_EQ(messages(keys->diags), (std::vector<std::string>{
      "r.toml:42:1: error: unknown key 'where' in [[model.rewrite]]; a rewrite has 'at' and 'insert'"}));
}

TEST(Validate, ShapeErrorsFromInsertedOperators) {
  auto c = check(quickstart_with("fold_div = 8", "fold_div = 128"));
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(messages(c->diags), (std::vector<std::string>{
      "r.toml:41:1: error: rewrite at 'features/layer1/block0/residual_in' (temporal_shift): 64 channels < "
      "fold_div 128: no channel would move",
      "r.toml:41:1: error: rewrite at 'features/layer1/block1/residual_in' (temporal_shift): 64 channels < "
      "fold_div 128: no channel would move",
      "r.toml:41:1: error: rewrite at 'features/layer2/block0/residual_in' (temporal_shift): 64 channels < "
      "fold_div 128: no channel would move",
  }));

  auto many = check(quickstart_with("fold_div = 8", "fold_div = 256"));
  EXPECT_EQ(many->diags.error_count(), 3u);
  EXPECT_EQ(messages(many->diags).back(),
            "r.toml:41:1: note: rewrite 'features/layer*/block*/residual_in': 2 more insertion points fail the "
            "same check (not shown)");

  auto changes = check(quickstart_with(
      "at = \"features/layer*/block*/residual_in\"\ninsert = { op = \"temporal_shift\", segments = 8, fold_div = 8 }",
      "at = \"features/layer1/block0/residual_in\"\ninsert = { op = \"downsample\" }"));
  EXPECT_EQ(messages(changes->diags), (std::vector<std::string>{
      "r.toml:41:1: error: rewrite at 'features/layer1/block0/residual_in' (downsample) changes the shape from "
      "[32, 64, 16, 16] to [32, 64, 8, 8]; an inserted operator must keep it"}));
}

TEST(Validate, ShapeErrorsFromNodesAndTheOutput) {
  auto node = check(quickstart_with("in = \"features\"", "in = \"clip\""));
  EXPECT_EQ(messages(node->diags), (std::vector<std::string>{
      "r.toml:19:1: warning: node 'frames' is not used: the model output 'logits' does not depend on it",
      "r.toml:24:1: warning: node 'features' is not used: the model output 'logits' does not depend on it",
      "r.toml:30:1: error: node 'head' (classifier): expects an input [M, C, H, W] or [M, C], got [4, 8, 3, 64, 64]",
  }));

  auto out = check(quickstart_with("classes = 10\n", "classes = 7\n"));
  EXPECT_EQ(messages(out->diags), (std::vector<std::string>{
      "r.toml:17:1: error: model output 'logits' has shape [4, 7] but training needs [batch, classes] = [4, 10]"}));

  auto facts = check(quickstart_with("classes = 10 }", "classes = 5000 }"));
  EXPECT_EQ(messages(facts->diags), (std::vector<std::string>{
      "r.toml:7:1: error: dataset 'synthetic_motion': at most 1000 classes"}));
}

TEST(Validate, SetTextBecomesAStringWhereAStringIsExpected) {
  LoadOptions o;
  o.overrides.push_back(*parse_override("run.name=007"));
  o.overrides.push_back(*parse_override("dist.batch_per_gpu=2"));
  auto c = check(kQuickstart, o);
  ASSERT_TRUE(c->plan) << c->diags.str();
  EXPECT_EQ(c->plan->run.name, "007");
  EXPECT_EQ(c->plan->dist.batch_per_gpu, 2);
  EXPECT_EQ(c->plan->nodes.back().output_shape, (Shape{2, 10}));

  LoadOptions bad;
  bad.overrides.push_back(*parse_override("run.epochs=many"));
  auto b = check(kQuickstart, bad);
  EXPECT_EQ(messages(b->diags), (std::vector<std::string>{
      "--set run.epochs=many: error: 'epochs' in [run]: expected int, got string \"many\""}));
}

// run.name is one folder name under runs/: "../../x" or "/abs" used to put the run
// outside runs/. Each bad name is an error at the value; --set is checked alike.
TEST(Validate, RunNameIsOneFolderName) {
  const int line = 2;
  for (const std::string& bad : std::vector<std::string>{"../../x", "/tmp/abs", "a/b", ".", "..", "tab\there", std::string(256, 'n')}) {
    const std::string written = Value(bad).to_toml_inline();
    auto c = check(quickstart_with("name = \"tsm_quick\"", "name = " + written));
    EXPECT_FALSE(c->plan) << bad;
    const auto m = messages(c->diags);
    ASSERT_EQ(m.size(), 1u) << bad << ": " << c->diags.str();
    // A long name is quoted as its first 64 bytes and its size (#27 item 15).
    const std::string shown =
        written.size() > 64 ? written.substr(0, 64) + "... (" + std::to_string(written.size()) + " bytes)" : written;
    EXPECT_EQ(m[0].rfind("r.toml:" + std::to_string(line) + ":1: error: run.name " + shown + " ", 0), 0u) << m[0];
    EXPECT_NE(m[0].find("use --out or run.out to choose another folder"), std::string::npos) << m[0];
  }
  LoadOptions o;
  o.overrides.push_back(*parse_override("run.name=../x"));
  auto s = check(kQuickstart, o);
  EXPECT_FALSE(s->plan);
  EXPECT_EQ(messages(s->diags),
            (std::vector<std::string>{"--set run.name=../x: error: run.name \"../x\" contains '/'; a run name is one "
                                      "folder name under runs/ (use --out or run.out to choose another folder)"}));
  // Good names, and no name at all (the recipe file's stem), still pass.
  for (const std::string& good : std::vector<std::string>{"tsm", "run-2.v1", "..x", "with space", "ü"}) {
    auto g = check(quickstart_with("name = \"tsm_quick\"", "name = " + Value(good).to_toml_inline()));
    EXPECT_TRUE(g->plan) << good << ": " << g->diags.str();
  }
  auto unnamed = check(quickstart_with("name = \"tsm_quick\"\n", ""));
  ASSERT_TRUE(unnamed->plan) << unnamed->diags.str();
  EXPECT_EQ(unnamed->plan->run.name, "");
}

// A number too large for its type, typed after --set or through a whole ${VAR},
// says so instead of "expected int, got string".
TEST(Validate, SetNumbersOutOfRangeSaySo) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run.epochs=99999999999999999999",
       "'epochs' in [run]: 99999999999999999999 is out of range for a 64-bit integer "
       "(-9223372036854775808 to 9223372036854775807)"},
      {"run.seed=-99999999999999999999",
       "'seed' in [run]: -99999999999999999999 is out of range for a 64-bit integer "
       "(-9223372036854775808 to 9223372036854775807)"},
      {"optim.lr=1e999", "'lr' in [optim]: 1e999 is out of range for a double (at most about 1.8e308 in magnitude)"},
      {"optim.lr=99999999999999999999",
       "'lr' in [optim]: 99999999999999999999 is out of range for a 64-bit integer (-9223372036854775808 to "
       "9223372036854775807); write it with a decimal point or an exponent to give a float"},
      {"run.epochs=12abc", "'epochs' in [run]: expected int, got string \"12abc\""}};
  for (const auto& [set, want] : cases) {
    LoadOptions o;
    o.overrides.push_back(*parse_override(set));
    auto c = check(kQuickstart, o);
    EXPECT_EQ(messages(c->diags), (std::vector<std::string>{"--set " + set + ": error: " + want})) << set;
  }
  // The same text from a whole ${VAR}, at the place the recipe wrote it.
  LoadOptions env;
  env.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "EPOCHS") return std::string("99999999999999999999");
    return std::nullopt;
  };
  auto e = check(quickstart_with("epochs = 3", "epochs = \"${EPOCHS}\""), env);
  EXPECT_EQ(messages(e->diags),
            (std::vector<std::string>{"r.toml:3:1: error: 'epochs' in [run]: 99999999999999999999 is out of range for "
                                      "a 64-bit integer (-9223372036854775808 to 9223372036854775807)"}));
  // A quoted string in a file stays a string.
  auto q = check(quickstart_with("epochs = 3", "epochs = \"99999999999999999999\""));
  EXPECT_EQ(messages(q->diags), (std::vector<std::string>{
      "r.toml:3:1: error: 'epochs' in [run]: expected int, got string \"99999999999999999999\""}));
}

// A dataset's check_data sentence that starts with a parameter's name is placed
// at that parameter's value (else at [data.params]).
TEST(Validate, DataProblemsNamingAParameterAreReportedAtIt) {
  testing::FakeCatalog catalog;
  PluginDecl d = *fake_catalog().find("dataset", "synthetic_motion");
  d.schema.text("train_list", "train.txt", "List file");
  d.check_data = [](const Params& p) {
    if (p.str("train_list") == "dir") throw std::runtime_error("train_list: list file '/data/dir' is a directory, not a file");
    throw std::runtime_error("root '/data' does not exist");
  };
  catalog.add(d);
  auto run = [&](const std::string& params) {
    auto c = std::make_unique<Checked>();
    c->recipe = load_recipe_text(quickstart_with("params = { frames = 8, size = 64, classes = 10 }", params), "r.toml",
                                 {}, c->diags);
    if (c->recipe) c->plan = validate(*c->recipe, catalog, c->diags);
    return c;
  };
  auto dir = run("params = { frames = 8, size = 64, classes = 10, train_list = \"dir\" }");
  EXPECT_EQ(messages(dir->diags), (std::vector<std::string>{
      "r.toml:7:49: error: dataset 'synthetic_motion': train_list: list file '/data/dir' is a directory, not a file"}));
  auto other = run("params = { frames = 8, size = 64, classes = 10 }");
  EXPECT_EQ(messages(other->diags), (std::vector<std::string>{
      "r.toml:7:1: error: dataset 'synthetic_motion': root '/data' does not exist"}));
}

TEST(Validate, PluginPathsAreRelativeToTheFileThatNamesThem) {
  TempDir dir;
  dir.write("base/common.toml", "[plugins]\npaths = [\"../plugins\", \"/opt/vexp/p\", \"more\"]\n");
  const std::string child = dir.write("child.toml", std::string("extends = \"base/common.toml\"\n") + kQuickstart);
  Diagnostics d;
  auto recipe = load_recipe(child, {}, d);
  ASSERT_TRUE(recipe);
  const std::vector<std::string> want{dir.path("plugins"), "/opt/vexp/p", dir.path("base/more")};
  EXPECT_EQ(plugin_paths(*recipe), want);
  auto plan = validate(*recipe, fake_catalog(), d);
  ASSERT_TRUE(plan) << d.str();
  EXPECT_EQ(plan->plugin_paths, want);
  EXPECT_EQ(at(plan->resolved, {"plugins", "paths"}).as_array()[0].as_string(), want[0]);
}

TEST(GlobMatch, StarDoesNotCrossSlashes) {
  EXPECT_TRUE(glob_match("features/layer*/block*/residual_in", "features/layer1/block0/residual_in"));
  EXPECT_FALSE(glob_match("features/*", "features/layer1/block0"));
  EXPECT_TRUE(glob_match("features/*/*/*", "features/layer1/block0/x"));
  EXPECT_TRUE(glob_match("*", "abc"));
  EXPECT_TRUE(glob_match("a*", "a"));
  EXPECT_TRUE(glob_match("*_in", "residual_in"));
  EXPECT_FALSE(glob_match("*_in", "block_out"));
  EXPECT_TRUE(glob_match("block?", "block7"));
  EXPECT_FALSE(glob_match("block?", "block10"));
  EXPECT_TRUE(glob_match("layer[12]", "layer2"));
  EXPECT_FALSE(glob_match("layer[12]", "layer3"));
  EXPECT_TRUE(glob_match("block[0-9]", "block5"));
  EXPECT_FALSE(glob_match("block[0-9]", "blockx"));
  EXPECT_TRUE(glob_match("block[!0]", "block1"));
  EXPECT_FALSE(glob_match("block[!0]", "block0"));
  EXPECT_TRUE(glob_match("a[b", "a[b"));  // unterminated class is literal
  EXPECT_FALSE(glob_match("a?c", "a/c"));
  EXPECT_TRUE(glob_match("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(glob_match("*a*b*c*", "xxaxxcxxbxx"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "a"));
}

TEST(ShapeStr, MarksUnknownDimensions) {
  EXPECT_EQ(shape_str({8, 3, 224, 224}), "[8, 3, 224, 224]");
  EXPECT_EQ(shape_str({-1, 10}), "[?, 10]");
  EXPECT_EQ(shape_str({}), "[]");
}

TEST(BuiltinSections, KeepTheNamesTheTrainerReads) {
  std::vector<std::string> names;
  for (const auto& [name, schema] : builtin_sections()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"run", "data", "dist", "optim", "schedule", "plugins", "model", "loss"}));
  const Schema& run = builtin_sections()[0].second;
  EXPECT_EQ(run.names(), (std::vector<std::string>{"name", "seed", "epochs", "eval_every", "log_every", "threads",
                                                   "checkpoint_every", "keep_checkpoints", "progress", "out", "eval_batch", "device",
                                                   "precision", "memory_format", "divergence_factor", "noise_scale_every",
                                                   "noise_scale_ema"}));
  const Schema& optim = builtin_sections()[3].second;
  EXPECT_EQ(optim.find("weight_decay")->default_value, Value(1e-4));
  EXPECT_TRUE(builtin_sections()[1].second.find("dataset")->required());
  EXPECT_TRUE(builtin_sections()[6].second.find("output")->required());
}

}  // namespace
}  // namespace vexp::dsl
