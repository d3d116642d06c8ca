// [[hooks]] in a recipe: each table checked against its hook plugin's schema at
// file:line:col, defaults filled into the plan and resolved.toml; a hook's `name`
// parameter (the ema hook's convention) a word, never shared by two hooks.
#include <gtest/gtest.h>

#include "fake_catalog.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {
namespace {

using testing::FakeCatalog;
using testing::kQuickstart;

// The fake catalog and two hooks: one with a `name` parameter (as ema), one without.
const FakeCatalog& catalog() {
  static const FakeCatalog c = [] {
    FakeCatalog f;
    PluginDecl ema;
    ema.kind = "hook";
    ema.name = "ema";
    ema.schema.real("decay", 0.9998, "decay").at_least(0.0).below(1.0);
    ema.schema.text("name", "ema", "metrics and files");
    f.add(ema);
    PluginDecl trace;
    trace.kind = "hook";
    trace.name = "trace";
    trace.schema.integer("every", 1, "every").at_least(1);
    f.add(trace);
    return f;
  }();
  return c;
}

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

// The quickstart (its own lines first) with `hooks` after it; line numbers are the quickstart's + those of `hooks`.
std::unique_ptr<Checked> check(const std::string& hooks) {
  auto c = std::make_unique<Checked>();
  LoadOptions opts;
  opts.env = [](const std::string&) { return std::optional<std::string>(); };
  c->recipe = load_recipe_text(std::string(kQuickstart) + hooks, "r.toml", opts, c->diags);
  if (c->recipe) c->plan = validate(*c->recipe, catalog(), c->diags);
  return c;
}

// "r.toml:L:1" for the line of `hooks` (appended to the quickstart) that starts with `start`,
// the `nth` such line (from 0).
std::string at(const std::string& hooks, const std::string& start, int nth = 0) {
  const std::string text = std::string(kQuickstart) + hooks;
  int line = 1;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, start.size(), start) == 0 && nth-- == 0) return "r.toml:" + std::to_string(line) + ":1";
    pos = text.find('\n', pos);
    if (pos == std::string::npos) break;
    ++pos;
    ++line;
  }
  throw std::logic_error("no line starts with " + start);
}

TEST(RecipeHooks, AreCheckedAndFilledInTheirOrder) {
  const std::string h = "\n[[hooks]]\ntype = \"trace\"\n\n[[hooks]]\ntype = \"ema\"\ndecay = 0.99\nname = \"ema_fast\"\n";
  auto c = check(h);
  ASSERT_TRUE(c->plan) << c->diags.str();
  ASSERT_EQ(c->plan->hooks.size(), 2u);
  EXPECT_EQ(c->plan->hooks[0].type, "trace");
  EXPECT_EQ(c->plan->hooks[0].params.i64("every"), 1);  // the default
  EXPECT_EQ(c->plan->hooks[1].type, "ema");
  EXPECT_DOUBLE_EQ(c->plan->hooks[1].params.f64("decay"), 0.99);
  EXPECT_EQ(c->plan->hooks[1].params.str("name"), "ema_fast");
  EXPECT_EQ(c->plan->hooks[1].loc.str(), at(h, "[[hooks]]", 1));
  // resolved.toml: the hooks with their defaults.
  EXPECT_NE(to_toml(c->plan->resolved).find("[[hooks]]\ntype = \"trace\"\nevery = 1"), std::string::npos)
      << to_toml(c->plan->resolved);
}

TEST(RecipeHooks, BadParametersAndUnknownHooksAreErrorsAtTheirLine) {
  const std::string h = "\n[[hooks]]\ntype = \"ema\"\ndecay = 1.0\n\n[[hooks]]\ntype = \"emma\"\n\n[[hooks]]\ntype = \"trace\"\nevry = 2\n";
  auto c = check(h);
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(), (std::vector<std::string>{
                               at(h, "decay") + ": error: 'decay' in hooks[0] (hook 'ema'): must be in [0, 1), got 1.0",
                               at(h, "type = \"emma\"") + ": error: unknown hook plugin 'emma' (did you mean 'ema'?); known: ema, trace",
                               at(h, "evry") + ": error: unknown key 'evry' in hooks[2] (hook 'trace') (did you mean 'every'?)",
                           }));
}

TEST(RecipeHooks, NamesAreWordsAndNotShared) {
  const std::string h = "\n[[hooks]]\ntype = \"ema\"\n\n[[hooks]]\ntype = \"ema\"\n\n[[hooks]]\ntype = \"ema\"\nname = \"a.b\"\n"
                        "\n[[hooks]]\ntype = \"trace\"\n";
  auto c = check(h);
  EXPECT_FALSE(c->plan);
  EXPECT_EQ(c->messages(),
            (std::vector<std::string>{
                at(h, "[[hooks]]", 1) + ": error: hooks[1] (hook 'ema'): name = \"ema\" is hooks[0]'s already; give each hook its own "
                           "name (it names the hook's metrics and files)",
                at(h, "name = \"a.b\"") + ": error: hooks[2] (hook 'ema'): name = \"a.b\" must be letters, digits and '_' (at most 64): "
                           "it names the hook's metrics and files",
            }));
  // Two names, and hooks without a name parameter: fine.
  EXPECT_TRUE(check("\n[[hooks]]\ntype = \"ema\"\n[[hooks]]\ntype = \"ema\"\nname = \"ema2\"\n[[hooks]]\ntype = \"trace\"\n"
                    "[[hooks]]\ntype = \"trace\"\n")
                  ->plan);
}

}  // namespace
}  // namespace vexp::dsl
