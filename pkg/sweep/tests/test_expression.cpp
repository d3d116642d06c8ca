// [sweep.derived] expressions: values, the nesting bound, bounded messages, and a
// deterministic mutation run over the seed corpus (pkg/sweep/tests/expr_corpus), the
// part of the libFuzzer target (fuzz_sweep_expr.cpp) that runs in every ctest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "expr_driver.hpp"
#include "vexp/sweep/expression.hpp"

namespace {

using vexp::sweep::eval_expr;
using vexp::sweep::testing::fuzz_vars;
using vexp::sweep::testing::run_one_expression;

std::string error_of(const std::string& text) {
  try {
    eval_expr(text, fuzz_vars());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SweepExpression, Evaluates) {
  EXPECT_DOUBLE_EQ(eval_expr("${base_lr} * ${global_batch} / 256", fuzz_vars()), 0.1);
  EXPECT_DOUBLE_EQ(eval_expr("2 ^ 3 ^ 2", fuzz_vars()), 512);  // right-associative
  EXPECT_DOUBLE_EQ(eval_expr("-(2 ^ -1)", fuzz_vars()), -0.5);
  EXPECT_DOUBLE_EQ(eval_expr("min(3, max(1, 2), 5)", fuzz_vars()), 2);
}

TEST(SweepExpression, NestingIsBounded) {
  // 50,000 parentheses overflowed the stack of `vexp sweep --dry-run` (SIGSEGV).
  const std::string deep = std::string(50000, '(') + "1" + std::string(50000, ')');
  const std::string m = error_of(deep);
  EXPECT_NE(m.find("nested more than 100 levels"), std::string::npos) << m;
  EXPECT_LT(m.size(), 400u) << "the message quotes the whole expression";
  EXPECT_NE(error_of(std::string(50000, '-') + "1").find("nested more than"), std::string::npos);
  EXPECT_NE(error_of("2" + std::string(20000, '^') + "2").find("at character"), std::string::npos);
  std::string powers = "2";
  for (int i = 0; i < 20000; ++i) powers += "^2";
  EXPECT_NE(error_of(powers).find("nested more than"), std::string::npos);
  std::string calls;
  for (int i = 0; i < 20000; ++i) calls += "abs(";
  EXPECT_NE(error_of(calls + "1" + std::string(20000, ')')).find("nested more than"), std::string::npos);
  // Deep but within the bound: a value.
  EXPECT_DOUBLE_EQ(eval_expr(std::string(40, '(') + "7" + std::string(40, ')'), fuzz_vars()), 7);
}

TEST(SweepExpression, MessagesAreOneBoundedLine) {
  const std::string m = error_of("1 + \x1b]0;title\x07 " + std::string(10000, 'x'));
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LT(m.size(), 400u);
  EXPECT_NE(error_of("${nope}").find("unknown variable 'nope'"), std::string::npos);
}

bool eval_ok(const std::string& text) {
  try {
    eval_expr(text, fuzz_vars());
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

std::vector<std::string> seed_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(VEXP_SWEEP_EXPR_CORPUS)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  std::sort(seeds.begin(), seeds.end());  // directory order is not stable
  return seeds;
}

// Byte-level mutations in the spirit of libFuzzer's: flips, inserts of the
// grammar's own tokens, deletions, repeats and splices, from a fixed seed.
std::string mutate(std::string s, const std::vector<std::string>& seeds, std::mt19937& rng) {
  static const std::vector<std::string> tokens{"(", ")", "${", "}", "^", "-", "+", "*", "/", ",", ".", "e", "e308",
                                               "1e-308", "0", "sqrt(", "log(", "pow(", "min(", "max(", "exp(",
                                               "${base_lr}", "${nope", "\x1b", "\xff", " ", "9999999999999999999"};
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n ? n - 1 : 0)(rng); };
  const int steps = 1 + static_cast<int>(pick(4));
  for (int k = 0; k < steps; ++k) {
    const size_t at = pick(s.size() + 1);
    switch (pick(6)) {
      case 0:
        if (!s.empty()) s[std::min(at, s.size() - 1)] = static_cast<char>(pick(256));
        break;
      case 1: s.insert(std::min(at, s.size()), tokens[pick(tokens.size())]); break;
      case 2:
        if (!s.empty()) s.erase(std::min(at, s.size() - 1), 1 + pick(4));
        break;
      case 3: {  // a token repeated: deep nesting, long chains
        const std::string& t = tokens[pick(tokens.size())];
        std::string run;
        for (size_t i = 0, n = 1 + pick(300); i < n; ++i) run += t;
        s.insert(std::min(at, s.size()), run);
        break;
      }
      case 4: {
        const std::string& other = seeds[pick(seeds.size())];
        s = s.substr(0, std::min(at, s.size())) + other.substr(pick(other.size() + 1));
        break;
      }
      default: s = s + s.substr(0, pick(s.size() + 1)); break;
    }
  }
  return s.size() > 100000 ? s.substr(0, 100000) : s;
}

TEST(SweepExpression, MutatedExpressionsNeverCrash) {
  const std::vector<std::string> seeds = seed_corpus();
  ASSERT_GE(seeds.size(), 5u) << "the seed corpus " << VEXP_SWEEP_EXPR_CORPUS << " is missing";
  std::mt19937 rng(20261203u);
  int values = 0, errors = 0;
  constexpr int kCases = 20000;
  for (int i = 0; i < kCases; ++i) {
    const std::string text = mutate(seeds[static_cast<size_t>(i) % seeds.size()], seeds, rng);
    std::string problem;
    ASSERT_TRUE(run_one_expression(text, &problem)) << problem << " for: " << text.substr(0, 200);
    (eval_ok(text) ? values : errors)++;
  }
  // Both outcomes are exercised: the mutations are neither all fatal nor all harmless.
  EXPECT_GT(values, kCases / 50);
  EXPECT_GT(errors, kCases / 50);
  std::printf("sweep expressions: %d mutated cases, %d values, %d errors\n", kCases, values, errors);
}

}  // namespace
