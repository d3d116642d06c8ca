// Seeded mutation test: thousands of broken recipes must produce diagnostics,
// never a crash or an escaping exception.
#include <gtest/gtest.h>

#include <random>

#include "fake_catalog.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {
namespace {

const char* const kSecondSeed = R"(extends = "fuzz_base_that_does_not_exist.toml"
unset = ["model.rewrite", "optim.fc_lr5"]
[run]
name = "${RUN_NAME:-fuzz}"
epochs = "${EPOCHS:-2}"
out = "cost $$5"
[data]
dataset = "synthetic_motion"
params = { frames = 4, size = 32, classes = 3 }
[schedule]
type = "step"
milestones = [1, 2]
gamma = 0.5
[plugins]
paths = ["plugins", "/abs"]
[model]
output = "out"
[[model.node]]
id = "f"
op = "fold_time"
in = "clip"
[[model.node]]
id = "b"
op = "resnet"
in = ["f"]
depth = 50
[[model.node]]
id = "h"
op = "classifier"
in = "b"
classes = 3
dropout = 0.1
[[model.node]]
id = "out"
op = "segment_consensus"
in = "h"
mode = "max"
[[model.rewrite]]
at = "b/layer[1-3]/block?/block_in"
insert = { op = "temporal_shift", segments = 4, fold_div = 4 }
)";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string mutate(std::string text) {
    const int rounds = 1 + pick(4);
    for (int i = 0; i < rounds; ++i) text = once(std::move(text));
    return text;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  size_t pos(const std::string& s) { return s.empty() ? 0 : static_cast<size_t>(pick(static_cast<int>(s.size()) + 1)); }

  std::string token() {
    static const std::vector<std::string> tokens{
        "[", "]", "\"", "=", "${", "}", "[[", "]]", "{", ",", ".", "'", "#", "\n", "\\", "$$", "${X}", "${X:-",
        "99999999999999999999", "-9223372036854775808", "1e999", "0x7fffffffffffffff", "nan", "-inf", "true",
        "\"\"\"", "[[model.node]]\n", "[[model.rewrite]]\n", "[model]\n", "[run]\n", "extends = \"x.toml\"\n",
        "unset = [\"run\"]\n", "in = [\"a\", \"b\"]\n", "id = \"f\"\n", "op = \"resnet\"\n", "at = \"*/*\"\n",
        "2024-01-01", "\xff\xfe", "\x01", "\t", " = 1\n", "a.b.c = 1\n"};
    return tokens[static_cast<size_t>(pick(static_cast<int>(tokens.size())))];
  }

  std::string deep() {
    const int depth = 50 + pick(400);
    switch (pick(3)) {
      case 0: return "deep = " + std::string(depth, '[') + std::string(depth, ']') + "\n";
      case 1: {
        std::string key = "k";
        for (int i = 0; i < depth; ++i) key += ".k";
        return key + " = 1\n";
      }
      default: {
        std::string v;
        for (int i = 0; i < depth; ++i) v += "{ a = ";
        v += "1";
        for (int i = 0; i < depth; ++i) v += " }";
        return "inl = " + v + "\n";
      }
    }
  }

  std::string once(std::string text) {
    auto lines = lines_of(text);
    const size_t n = lines.size();
    auto line = [&] { return static_cast<size_t>(pick(static_cast<int>(n))); };
    switch (pick(10)) {
      case 0:
        lines.erase(lines.begin() + static_cast<long>(line()));
        return join_lines(lines);
      case 1: {
        const size_t i = line();
        lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
        return join_lines(lines);
      }
      case 2:
        std::swap(lines[line()], lines[line()]);
        return join_lines(lines);
      case 3:
        if (!text.empty()) text[pos(text) % text.size()] = static_cast<char>(pick(256));
        return text;
      case 4:
      case 5:
        return text.insert(pos(text), token());
      case 6: {
        const size_t i = line();
        lines.insert(lines.begin() + static_cast<long>(i), deep());
        return join_lines(lines);
      }
      case 7:
        return text.substr(0, pos(text));
      case 8: {
        // Replace a value with a token.
        std::string& l = lines[line()];
        const size_t eq = l.find('=');
        if (eq != std::string::npos) l = l.substr(0, eq + 1) + " " + token();
        return join_lines(lines);
      }
      default:
        if (!text.empty()) text.erase(pos(text) % text.size(), 1 + static_cast<size_t>(pick(8)));
        return text;
    }
  }

  std::mt19937 rng_;
};

TEST(Fuzz, MutatedRecipesNeverCrashOrThrow) {
  const std::vector<std::string> seeds{testing::kQuickstart, kSecondSeed};
  Mutator mutator(20240601u);
  LoadOptions opts;
  opts.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "X") return std::string("7");
    return std::nullopt;
  };
  opts.overrides.push_back({"model.node.features.depth", "50"});
  opts.overrides.push_back({"model.node.0.in", "clip"});
  int with_errors = 0, valid = 0;
  constexpr int kCases = 3000;
  for (int i = 0; i < kCases; ++i) {
    const std::string text = mutator.mutate(seeds[static_cast<size_t>(i) % seeds.size()]);
    Diagnostics diags;
    try {
      auto recipe = load_recipe_text(text, "fuzz.toml", opts, diags);
      if (recipe) {
        auto plan = validate(*recipe, testing::fake_catalog(), diags);
        const std::string rendered = to_toml(recipe->root);
        Diagnostics again;
        auto back = load_recipe_text(rendered, "again.toml", {}, again);
        ASSERT_TRUE(back) << "to_toml output does not parse:\n" << rendered << "\nfrom:\n" << text;
        if (rendered.find('$') == std::string::npos) {
          ASSERT_EQ(back->root, recipe->root) << rendered;
        }
        if (plan) {
          ++valid;
          EXPECT_EQ(recipe_hash(plan->resolved).size(), 16u);
        }
      }
    } catch (const std::exception& e) {
      FAIL() << "case " << i << " threw " << e.what() << "\n" << text;
    } catch (...) {
      FAIL() << "case " << i << " threw a non-exception\n" << text;
    }
    if (diags.has_errors()) ++with_errors;
    for (const auto& d : diags.items()) {
      ASSERT_FALSE(d.message.empty()) << "case " << i << " at " << d.loc.str() << "\n" << text;
      ASSERT_FALSE(d.str().empty());
    }
  }
  // The mutations must actually break recipes (and leave some intact).
  EXPECT_GT(with_errors, kCases / 3);
  EXPECT_GT(valid, 0);
}

}  // namespace
}  // namespace vexp::dsl
