// Loading: parse errors, locations, extends/unset merges, --set overrides,
// ${VAR} interpolation and TOML rendering.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "fake_catalog.hpp"
#include "vexp/dsl/recipe.hpp"

namespace vexp::dsl {
namespace {

using testing::TempDir;

// By string_view: a `const std::string&` parameter bound to a literal makes g++ 13+
// warn that the returned reference may dangle (-Wdangling-reference).
const Value& at(const Value& root, std::string_view dotted) {
  const Value* cur = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string key(dotted.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    cur = cur->find(key);
    if (!cur) throw std::out_of_range("no key " + std::string(dotted));
    if (dot == std::string::npos) return *cur;
    start = dot + 1;
  }
}

std::vector<std::string> messages(const Diagnostics& d) {
  std::vector<std::string> out;
  for (const auto& x : d.sorted()) out.push_back(x.str());
  return out;
}

Recipe load_text(const std::string& text, Diagnostics& d, LoadOptions opts = {}) {
  if (!opts.env) opts.env = [](const std::string&) { return std::optional<std::string>(); };
  auto r = load_recipe_text(text, "r.toml", opts, d);
  if (!r) throw std::runtime_error("no tree: " + d.str());
  return *r;
}

// Recipe files are regular files of bounded size: /dev/zero, a FIFO or a directory
// used to be read until memory ran out (or block forever); now each is one located
// error for a base and a RecipeError naming the file for the root.
TEST(Load, RecipeFilesMustBeRegularFilesOfBoundedSize) {
  TempDir dir;
  const std::string fifo = dir.path("pipe.toml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string folder = dir.path("folder.toml");
  std::filesystem::create_directories(folder);
  const std::string big = dir.write("big.toml", "");
  std::filesystem::resize_file(big, kMaxRecipeBytes + 1);  // sparse: instant
  const std::string fits = dir.write("fits.toml", "[run]\nepochs = 2\n" + std::string(1000, '#') + "\n");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"/dev/zero", "is a character device, not a regular file"},
      {fifo, "is a FIFO, not a regular file"},
      {folder, "is a directory"},
      {big, "is 16777217 bytes; a recipe file may have at most 16 MiB (16777216 bytes)"}};
  for (const auto& [path, why] : cases) {
    Diagnostics d;
    auto r = load_recipe_text("extends = \"" + path + "\"\n[run]\nseed = 1\n", dir.path("r.toml"), {}, d);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(messages(d), (std::vector<std::string>{dir.path("r.toml") + ":1:1: error: cannot read base recipe '" +
                                                      path + "': " + why}))
        << path;
    // As the recipe itself: one sentence naming the file.
    try {
      Diagnostics top;
      load_recipe(path, {}, top);
      ADD_FAILURE() << path << " was read as a recipe";
    } catch (const RecipeError& e) {
      EXPECT_EQ(std::string(e.what()), "cannot read recipe '" + path + "': " + why);
    }
  }
  // A file within the limit still loads.
  Diagnostics ok;
  auto r = load_recipe(fits, {}, ok);
  ASSERT_TRUE(r);
  EXPECT_TRUE(ok.items().empty()) << ok.str();
  EXPECT_EQ(at(r->root, "run.epochs").as_int(), 2);
}

// toml++ says "... is not representable in 64 bits" after the number; the
// diagnostic says "out of range" at the number as written.
TEST(Load, NumbersTooLargeForTheirTypeAreOutOfRangeAtTheLiteral) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"[run]\nepochs = 99999999999999999999\n",
       "r.toml:2:10: error: 99999999999999999999 is out of range for a 64-bit integer "
       "(-9223372036854775808 to 9223372036854775807)"},
      {"[run]\nepochs =  -9_223_372_036_854_775_809 # below the minimum\n",
       "r.toml:2:11: error: -9_223_372_036_854_775_809 is out of range for a 64-bit integer "
       "(-9223372036854775808 to 9223372036854775807)"},
      {"[run]\nx = { a = \"\u00fc\u00fc\", b = 99999999999999999999 }\n",  // columns count characters
       "r.toml:2:21: error: 99999999999999999999 is out of range for a 64-bit integer "
       "(-9223372036854775808 to 9223372036854775807)"},
      {"[optim]\nlr = [0.1, 1e999]\n",
       "r.toml:2:12: error: 1e999 is out of range for a double (at most about 1.8e308 in magnitude)"}};
  for (const auto& [text, want] : cases) {
    Diagnostics d;
    EXPECT_FALSE(load_recipe_text(text, "r.toml", {}, d));
    EXPECT_EQ(messages(d), (std::vector<std::string>{want})) << text;
  }
  // The largest and smallest 64-bit integers still load.
  Diagnostics d;
  Recipe r = load_text("[run]\na = 9223372036854775807\nb = -9223372036854775808\n", d);
  EXPECT_EQ(at(r.root, "run.a").as_int(), INT64_MAX);
  EXPECT_EQ(at(r.root, "run.b").as_int(), INT64_MIN);
}

// 200,000 tables used to take minutes (each merged key was found by a linear
// scan); the count here only checks that nothing is lost on the way.
TEST(Load, ManyTablesAllArrive) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "[t" + std::to_string(i) + "]\nx = " + std::to_string(i) + "\n";
  Diagnostics d;
  Recipe r = load_text(text, d);
  ASSERT_EQ(r.root.as_table().size(), 5000u);
  EXPECT_EQ(r.root.as_table()[4321].first, "t4321");
  EXPECT_EQ(at(r.root, "t4321.x").as_int(), 4321);
}

TEST(ParseOverride, SplitsAtTheFirstEquals) {
  auto o = parse_override("a.b=1");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->path, "a.b");
  EXPECT_EQ(o->text, "1");
  auto eq = parse_override("run.name=a=b");
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->path, "run.name");
  EXPECT_EQ(eq->text, "a=b");
  EXPECT_FALSE(parse_override("run.epochs"));
  EXPECT_FALSE(parse_override("=3"));
}

TEST(Load, SyntaxErrorIsADiagnosticWithPosition) {
  Diagnostics d;
  auto r = load_recipe_text("[run]\nepochs = [1,\nname = 2\n", "bad.toml", {}, d);
  EXPECT_FALSE(r);
  ASSERT_EQ(d.items().size(), 1u);
  // toml++ reads `name` as a misspelt `nan` and stops at its third character.
  EXPECT_EQ(d.items()[0].str(), "bad.toml:3:3: error: Error while parsing floating-point: expected 'nan', saw 'nam'");
}

TEST(Load, MissingRootFileThrowsRecipeError) {
  Diagnostics d;
  try {
    load_recipe("/nonexistent/dir/x.toml", {}, d);
    FAIL() << "expected RecipeError";
  } catch (const RecipeError& e) {
    EXPECT_STREQ(e.what(), "cannot read recipe '/nonexistent/dir/x.toml': No such file or directory");
  }
}

TEST(Load, EveryValueKnowsWhereItWasWritten) {
  Diagnostics d;
  Recipe r = load_text(R"([run]
epochs = 3
zeta = "z"
alpha = 1
[[model.node]]
id = "a"
in = ["x", "y"]
insert = { op = "t" }
[[model.node]]
id = "b"
)", d);
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r.root, "run.epochs").loc().str(), "r.toml:2:1");
  EXPECT_EQ(at(r.root, "run").loc().str(), "r.toml:1:1");
  const auto& nodes = at(r.root, "model.node").as_array();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].loc().str(), "r.toml:5:1");  // the [[model.node]] header
  EXPECT_EQ(nodes[1].loc().str(), "r.toml:9:1");
  EXPECT_EQ(nodes[0].find("in")->as_array()[1].loc().str(), "r.toml:7:12");
  EXPECT_EQ(nodes[0].find("insert")->find("op")->loc().str(), "r.toml:8:12");
  // Keys stay in the order they were written (toml++ itself sorts them).
  const auto& run = at(r.root, "run").as_table();
  ASSERT_EQ(run.size(), 3u);
  EXPECT_EQ(run[0].first, "epochs");
  EXPECT_EQ(run[1].first, "zeta");
  EXPECT_EQ(run[2].first, "alpha");
  EXPECT_EQ(r.files, (std::vector<std::string>{"r.toml"}));
}

TEST(Load, DatesAreRejected) {
  Diagnostics d;
  Recipe r = load_text("[run]\nwhen = 2024-01-01\nepochs = 2\n", d);
  EXPECT_EQ(messages(d), (std::vector<std::string>{"r.toml:2:1: error: dates are not supported"}));
  EXPECT_EQ(at(r.root, "run.epochs").as_int(), 2);
  EXPECT_EQ(r.root.find("run")->find("when"), nullptr);
}

TEST(Extends, TablesMergeArraysAndScalarsReplaceLocationsStay) {
  TempDir dir;
  dir.write("base.toml", R"([run]
epochs = 10
seed = 1
[optim]
lr = 0.1
[schedule]
milestones = [20, 40]
[[model.node]]
id = "base_only"
)");
  const std::string child = dir.write("child.toml", R"(extends = "base.toml"
[run]
epochs = 2
[schedule]
milestones = [5]
[[model.node]]
id = "child_node"
)");
  Diagnostics d;
  auto r = load_recipe(child, {}, d);
  ASSERT_TRUE(r);
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r->root, "run.epochs").as_int(), 2);
  EXPECT_EQ(at(r->root, "run.seed").as_int(), 1);
  EXPECT_DOUBLE_EQ(at(r->root, "optim.lr").as_double(), 0.1);
  EXPECT_EQ(at(r->root, "schedule.milestones"), Value::array({Value(5)}));
  ASSERT_EQ(at(r->root, "model.node").as_array().size(), 1u);
  EXPECT_EQ(at(r->root, "model.node").as_array()[0].find("id")->as_string(), "child_node");
  EXPECT_EQ(at(r->root, "run.seed").loc().str(), dir.path("base.toml") + ":3:1");
  EXPECT_EQ(at(r->root, "optim.lr").loc().str(), dir.path("base.toml") + ":5:1");
  EXPECT_EQ(at(r->root, "run.epochs").loc().str(), child + ":3:1");
  EXPECT_EQ(r->root.find("extends"), nullptr);
  EXPECT_EQ(r->files, (std::vector<std::string>{child, dir.path("base.toml")}));
}

TEST(Extends, ChainsAndListsMergeLeftToRight) {
  TempDir dir;
  dir.write("a.toml", "[run]\nseed = 1\nepochs = 1\nlog_every = 1\n");
  dir.write("b.toml", "extends = \"a.toml\"\n[run]\nepochs = 2\n");
  dir.write("c.toml", "[run]\nlog_every = 3\nepochs = 3\n");
  const std::string top = dir.write("top.toml", "extends = [\"b.toml\", \"c.toml\"]\n[run]\nname = \"top\"\n");
  Diagnostics d;
  auto r = load_recipe(top, {}, d);
  ASSERT_TRUE(r);
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r->root, "run.seed").as_int(), 1);       // from a through b
  EXPECT_EQ(at(r->root, "run.epochs").as_int(), 3);     // c is merged after b
  EXPECT_EQ(at(r->root, "run.log_every").as_int(), 3);
  EXPECT_EQ(at(r->root, "run.name").as_string(), "top");
  EXPECT_EQ(r->files, (std::vector<std::string>{top, dir.path("b.toml"), dir.path("a.toml"), dir.path("c.toml")}));
}

TEST(Extends, CycleIsReportedAtTheExtendsValue) {
  TempDir dir;
  const std::string a = dir.write("a.toml", "extends = \"b.toml\"\n[run]\nseed = 1\n");
  const std::string b = dir.write("b.toml", "\n\nextends = \"a.toml\"\n[run]\nepochs = 2\n");
  Diagnostics d;
  auto r = load_recipe(a, {}, d);
  ASSERT_TRUE(r);
  EXPECT_EQ(messages(d), (std::vector<std::string>{b + ":3:1: error: extends cycle: " + a + " -> " + b + " -> " + a}));
  Diagnostics self;
  const std::string s = dir.write("self.toml", "extends = \"self.toml\"\n");
  load_recipe(s, {}, self);
  EXPECT_EQ(messages(self), (std::vector<std::string>{s + ":1:1: error: extends cycle: " + s + " -> " + s}));
}

TEST(Extends, MissingBaseIsReportedAtTheExtendsValue) {
  TempDir dir;
  const std::string child = dir.write("child.toml", "\n\n\nextends = [\"x.toml\"]\n[run]\nseed = 1\n");
  Diagnostics d;
  auto r = load_recipe(child, {}, d);
  ASSERT_TRUE(r);
  EXPECT_EQ(messages(d), (std::vector<std::string>{
                             child + ":4:12: error: cannot read base recipe 'x.toml': No such file or directory"}));
  EXPECT_EQ(at(r->root, "run.seed").as_int(), 1);
}

TEST(Extends, BasePathsAreJoinedToTheIncludingFileAndNormalised) {
  TempDir dir;
  dir.write("recipes/base/common.toml", "[run]\nseed = 7\n");
  dir.write("recipes/quickstart/tsm.toml", "extends = \"../base/common.toml\"\n");
  const auto old = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  Diagnostics d;
  auto r = load_recipe("recipes/quickstart/tsm.toml", {}, d);
  std::filesystem::current_path(old);
  ASSERT_TRUE(r);
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r->root, "run.seed").loc().str(), "recipes/base/common.toml:2:1");
  EXPECT_EQ(r->files, (std::vector<std::string>{"recipes/quickstart/tsm.toml", "recipes/base/common.toml"}));
}

TEST(Unset, DeletesInheritedKeysBeforeTheChildApplies) {
  TempDir dir;
  dir.write("base.toml", R"([optim]
lr = 0.1
fc_lr5 = true
[[model.node]]
id = "a"
[[model.node]]
id = "b"
[[model.rewrite]]
at = "x/*"
)");
  const std::string child = dir.write("child.toml", R"(extends = "base.toml"
unset = ["model.rewrite", "optim.fc_lr5", "optim.lr", "model.node.a", "run.nothing"]
[optim]
lr = 0.5
)");
  Diagnostics d;
  auto r = load_recipe(child, {}, d);
  ASSERT_TRUE(r);
  EXPECT_EQ(messages(d), (std::vector<std::string>{
                             child + ":2:71: warning: unset 'run.nothing' does nothing: no base recipe sets it"}));
  EXPECT_EQ(at(r->root, "optim").find("fc_lr5"), nullptr);
  EXPECT_EQ(at(r->root, "model").find("rewrite"), nullptr);
  EXPECT_DOUBLE_EQ(at(r->root, "optim.lr").as_double(), 0.5);  // unset, then set anew
  ASSERT_EQ(at(r->root, "model.node").as_array().size(), 1u);
  EXPECT_EQ(at(r->root, "model.node").as_array()[0].find("id")->as_string(), "b");
  EXPECT_EQ(r->root.find("unset"), nullptr);
}

LoadOptions with_sets(std::vector<std::string> args) {
  LoadOptions o;
  for (const auto& a : args) o.overrides.push_back(*parse_override(a));
  return o;
}

TEST(Overrides, ParseTomlValuesOrFallBackToStrings) {
  Diagnostics d;
  Recipe r = load_text(testing::kQuickstart, d,
                       with_sets({"run.epochs=5", "optim.lr=0.5", "optim.nesterov=true", "schedule.milestones=[2, 4]",
                                  "run.name=hello world", "run.out=\"quoted\"", "brand.new.key=1"}));
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r.root, "run.epochs"), Value(5));
  EXPECT_EQ(at(r.root, "run.epochs").loc().str(), "--set run.epochs=5");
  EXPECT_EQ(at(r.root, "optim.lr"), Value(0.5));
  EXPECT_EQ(at(r.root, "optim.nesterov"), Value(true));
  EXPECT_EQ(at(r.root, "schedule.milestones"), Value::array({Value(2), Value(4)}));
  EXPECT_EQ(at(r.root, "run.name"), Value("hello world"));
  EXPECT_EQ(at(r.root, "run.out"), Value("quoted"));
  EXPECT_EQ(at(r.root, "brand.new.key"), Value(1));
  // A value that would sneak in a second key stays a string.
  Diagnostics d2;
  Recipe r2 = load_text(testing::kQuickstart, d2, with_sets({"run.name=1\nseed = 3"}));
  EXPECT_EQ(at(r2.root, "run.name"), Value("1\nseed = 3"));
}

TEST(Overrides, IndexArraysOfTablesByIdOrNumber) {
  Diagnostics d;
  Recipe r = load_text(testing::kQuickstart, d,
                       with_sets({"model.node.features.depth=50", "model.node.2.classes=7",
                                  "model.rewrite.0.insert.fold_div=4"}));
  EXPECT_FALSE(d.has_errors()) << d.str();
  const auto& nodes = at(r.root, "model.node").as_array();
  EXPECT_EQ(nodes[1].find("depth")->as_int(), 50);
  EXPECT_EQ(nodes[2].find("classes")->as_int(), 7);
  EXPECT_EQ(at(r.root, "model.rewrite").as_array()[0].find("insert")->find("fold_div")->as_int(), 4);
}

TEST(Overrides, BadPathsAreErrorsAtTheSetArgument) {
  Diagnostics d;
  load_text(testing::kQuickstart, d,
            with_sets({"model.node.7.depth=18", "model.node.featurs.depth=18", "run.epochs.x=1", "a..b=1"}));
  EXPECT_EQ(messages(d), (std::vector<std::string>{
                             "--set a..b=1: error: bad key path 'a..b' (empty part)",
                             "--set model.node.7.depth=18: error: 'model.node' has 4 entries; there is no index 7",
                             "--set model.node.featurs.depth=18: error: 'model.node' has no entry with id 'featurs' "
                             "(did you mean 'features'?)",
                             "--set run.epochs.x=1: error: 'run.epochs' is int 3, not a table",
                         }));
}

LoadOptions with_env(std::map<std::string, std::string> vars) {
  LoadOptions o;
  o.env = [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  return o;
}

TEST(Interpolation, SubstitutesDefaultsEscapesAndRetypes) {
  Diagnostics d;
  Recipe r = load_recipe_text(R"([run]
name = "run-${USER_NAME}-${MISSING:-dflt}"
epochs = "${EPOCHS:-3}"
seed = "${SEED}"
out = "cost $$5 and $HOME"
progress = "${MODE:-plain}"
log_every = "x${EPOCHS:-3}"
[optim]
lr = "${LR:-0.5}"
nesterov = "${NEST:-true}"
)",
                              "r.toml", with_env({{"USER_NAME", "ann"}, {"SEED", "42"}}), d)
                 .value();
  EXPECT_FALSE(d.has_errors()) << d.str();
  EXPECT_EQ(at(r.root, "run.name"), Value("run-ann-dflt"));
  EXPECT_EQ(at(r.root, "run.epochs"), Value(3));
  EXPECT_EQ(at(r.root, "run.epochs").loc().str(), "r.toml:3:1");
  EXPECT_EQ(at(r.root, "run.seed"), Value(42));
  EXPECT_EQ(at(r.root, "run.out"), Value("cost $5 and $HOME"));
  EXPECT_EQ(at(r.root, "run.progress"), Value("plain"));
  EXPECT_EQ(at(r.root, "run.log_every"), Value("x3"));  // not the whole string: stays text
  EXPECT_EQ(at(r.root, "optim.lr"), Value(0.5));
  EXPECT_EQ(at(r.root, "optim.nesterov"), Value(true));
}

// The recipe records each variable it interpolated once (for provenance.jsonl): its
// value in the environment (none when unset) and the value the recipe received.
TEST(Interpolation, RecordsTheVariablesAndTheirValues) {
  Diagnostics d;
  LoadOptions o = with_env({{"ROOT", "/data/k400"}, {"EMPTY", ""}});
  o.overrides = {{"run.out", "\"${OUT_DIR:-runs/x}\""}};
  Recipe r = load_recipe_text(R"([run]
name = "${ROOT}-${EMPTY:-e}"
epochs = "${EPOCHS:-3}"
seed = "$${NOT_A_VARIABLE}"
[data.params]
root = "${ROOT}"
)",
                              "r.toml", o, d)
                 .value();
  EXPECT_FALSE(d.has_errors()) << d.str();
  ASSERT_EQ(r.variables.size(), 4u);
  std::vector<std::string> names;
  for (const auto& v : r.variables) names.push_back(v.name);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"ROOT", "EMPTY", "EPOCHS", "OUT_DIR"}));
  std::map<std::string, Interpolation> by;
  for (const auto& v : r.variables) by[v.name] = v;
  EXPECT_EQ(by["ROOT"].environment, std::optional<std::string>("/data/k400"));
  EXPECT_EQ(by["ROOT"].value, "/data/k400");
  EXPECT_EQ(by["EMPTY"].environment, std::optional<std::string>(""));
  EXPECT_EQ(by["EMPTY"].value, "e");
  EXPECT_FALSE(by["EPOCHS"].environment.has_value());
  EXPECT_EQ(by["EPOCHS"].value, "3");
  EXPECT_EQ(by["EPOCHS"].loc.str(), "r.toml:3:1");
  EXPECT_EQ(by["OUT_DIR"].value, "runs/x");
}

TEST(Interpolation, MissingVariablesAndBadSyntaxAreErrorsAtTheValue) {
  TempDir dir;
  dir.write("base.toml", "[data]\n\ndataset = \"${DATASET}\"\n");
  const std::string child = dir.write("child.toml", "extends = \"base.toml\"\n[run]\nname = \"a${OPEN\"\nout = \"${}\"\n");
  Diagnostics d;
  load_recipe(child, with_env({}), d);
  EXPECT_EQ(messages(d), (std::vector<std::string>{
                             dir.path("base.toml") + ":3:1: error: environment variable 'DATASET' is not set "
                                                     "(write ${DATASET:-default} to give a default)",
                             child + ":3:1: error: unterminated '${' in \"a${OPEN\" (write $$ for a literal '$')",
                             child + ":4:1: error: bad variable name '' in '${}'",
                         }));
}

TEST(Interpolation, AppliesToOverridesToo) {
  Diagnostics d;
  LoadOptions o = with_env({{"N", "9"}});
  o.overrides.push_back(*parse_override("run.epochs=${N}"));
  Recipe r = load_recipe_text("[run]\nepochs = 1\n", "r.toml", o, d).value();
  EXPECT_EQ(at(r.root, "run.epochs"), Value(9));
}

TEST(ToToml, RoundTripsThroughTheParser) {
  Diagnostics d;
  Recipe r = load_text(testing::kQuickstart, d);
  r.root.set("extra", Value::table({{"quoted key", Value("tab\there \"q\" \\ é")},
                                     {"tiny", Value(1e-9)},
                                     {"big", Value(int64_t{9007199254740993})},
                                     {"neg", Value(-0.5)},
                                     {"empty", Value::array()},
                                     {"mixed", Value::array({Value::table({{"a", Value(1)}}), Value(2)})},
                                     {"nested", Value::table({{"deeper", Value::table({{"x", Value(false)}})}})},
                                     {"emptytable", Value::table()}}));
  const std::string text = to_toml(r.root);
  Diagnostics d2;
  auto back = load_recipe_text(text, "back.toml", {}, d2);
  ASSERT_TRUE(back) << d2.str() << "\n" << text;
  EXPECT_FALSE(d2.has_errors()) << d2.str();
  EXPECT_EQ(back->root, r.root) << text;
  EXPECT_NE(text.find("[[model.node]]"), std::string::npos);
  EXPECT_NE(text.find("[model]\ninput = \"clip\"\noutput = \"logits\"\n"), std::string::npos) << text;
}

TEST(ToToml, HashIsStableAndSensitive) {
  Diagnostics d;
  Recipe a = load_text(testing::kQuickstart, d);
  Recipe b = load_text(testing::kQuickstart, d);
  const std::string h = recipe_hash(a.root);
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, recipe_hash(b.root));
  b.root.find("run")->set("epochs", Value(4));
  EXPECT_NE(h, recipe_hash(b.root));
}

}  // namespace
}  // namespace vexp::dsl
