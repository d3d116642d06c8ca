// The arithmetic of derived sweep values ([sweep.derived]): numbers, ${name}
// variables, + - * / ^, parentheses, unary minus and the functions min, max, pow,
// sqrt, log, log2, exp, round, floor, ceil, abs.
#pragma once

#include <map>
#include <string>

namespace vexp::sweep {

// The value of `text` with `vars`; throws std::runtime_error with a one-line
// message naming the expression and the character where it went wrong.
double eval_expr(const std::string& text, const std::map<std::string, double>& vars);

}  // namespace vexp::sweep
