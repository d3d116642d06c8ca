#include "vexp/sweep/expression.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "vexp/base/error.hpp"
#include "vexp/base/text.hpp"
#include "vexp/schema/schema.hpp"

namespace vexp::sweep {

namespace {

// Deeper nesting than any hand-written formula: each level is a C++ stack frame,
// and 50,000 '(' would overflow the stack (docs/sweeps.md).
constexpr int kMaxDepth = 100;

class Parser {
 public:
  Parser(const std::string& s, const std::map<std::string, double>& vars) : s_(s), vars_(vars) {}
  double parse() {
    double v = sum();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + base::printable(s_.substr(i_, 1)) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw base::failure("in expression \"" + base::printable(s_, 80) + "\" at character " + std::to_string(i_ + 1) + ": " + what);
  }
  // Counts one level of nesting for the life of the scope: parentheses, function
  // arguments, unary signs and exponents each recurse.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth)
        p_.fail("nested more than " + std::to_string(kMaxDepth) + " levels deep (parentheses, signs, ^)");
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  double sum() {
    Nest nest(*this);
    double v = product();
    for (;;) {
      if (take('+')) v += product();
      else if (take('-')) v -= product();
      else return v;
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      if (take('*')) v *= unary();
      else if (take('/')) {
        double d = unary();
        if (d == 0) fail("division by zero");
        v /= d;
      } else return v;
    }
  }
  double unary() {
    Nest nest(*this);
    if (take('-')) return -unary();
    if (take('+')) return unary();
    return power();
  }
  double power() {
    double b = atom();
    if (take('^')) return std::pow(b, unary());  // right-associative
    return b;
  }
  double atom() {
    skip();
    if (i_ >= s_.size()) fail("expression ends too early");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      double v = sum();
      if (!take(')')) fail("missing ')'");
      return v;
    }
    if (c == '$') {
      if (i_ + 1 >= s_.size() || s_[i_ + 1] != '{') fail("expected '${name}'");
      const size_t close = s_.find('}', i_ + 2);
      if (close == std::string::npos) fail("unterminated '${'");
      const std::string name = s_.substr(i_ + 2, close - i_ - 2);
      auto it = vars_.find(name);
      if (it == vars_.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : vars_) names.push_back(k);
        std::string dym = dsl::did_you_mean(name, names);
        fail("unknown variable '" + base::printable(name, 64) + "'" + (dym.empty() ? "" : " (did you mean '" + dym + "'?)"));
      }
      i_ = close + 1;
      return it->second;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.c_str() + i_;
      char* end = nullptr;
      double v = std::strtod(begin, &end);
      if (end == begin) fail("bad number");
      i_ += static_cast<size_t>(end - begin);
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
      const std::string fn = s_.substr(i_, j - i_);
      i_ = j;
      if (!take('(')) fail("'" + base::printable(fn, 64) + "' is not a function call (variables are written ${name})");
      std::vector<double> args{sum()};
      while (take(',')) args.push_back(sum());
      if (!take(')')) fail("missing ')' after the arguments of " + base::printable(fn, 64));
      auto need = [&](size_t n) {
        if (args.size() != n) fail(base::printable(fn, 64) + " takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s"));
      };
      if (fn == "min" || fn == "max") {
        double v = args[0];
        for (double a : args) v = fn == "min" ? std::min(v, a) : std::max(v, a);
        return v;
      }
      if (fn == "pow") { need(2); return std::pow(args[0], args[1]); }
      need(1);
      if (fn == "sqrt") { if (args[0] < 0) fail("sqrt of a negative number"); return std::sqrt(args[0]); }
      if (fn == "log") { if (args[0] <= 0) fail("log of a non-positive number"); return std::log(args[0]); }
      if (fn == "log2") { if (args[0] <= 0) fail("log2 of a non-positive number"); return std::log2(args[0]); }
      if (fn == "exp") return std::exp(args[0]);
      if (fn == "round") return std::round(args[0]);
      if (fn == "floor") return std::floor(args[0]);
      if (fn == "ceil") return std::ceil(args[0]);
      if (fn == "abs") return std::fabs(args[0]);
      fail("unknown function '" + base::printable(fn, 64) + "' (known: min, max, pow, sqrt, log, log2, exp, round, floor, ceil, abs)");
    }
    fail("unexpected '" + base::printable(std::string(1, c)) + "'");
  }

  const std::string& s_;
  const std::map<std::string, double>& vars_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

double eval_expr(const std::string& text, const std::map<std::string, double>& vars) {
  double v = Parser(text, vars).parse();
  if (!std::isfinite(v)) throw base::failure("expression \"" + base::printable(text, 80) + "\" is not a finite number");
  return v;
}

}  // namespace vexp::sweep
