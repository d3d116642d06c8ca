// Glob matching of rewrite patterns: '*', '?' and [abc] / [!a-z] classes
// within one path segment; '*' does not cross '/'.
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {

namespace {

// One [abc] / [!a-z] class or a single character; advances `pi` past it.
bool match_one(const std::string& p, size_t& pi, char c) {
  if (p[pi] == '?') {
    ++pi;
    return true;
  }
  if (p[pi] == '[') {
    size_t j = pi + 1;
    const bool negate = j < p.size() && (p[j] == '!' || p[j] == '^');
    if (negate) ++j;
    const size_t first = j;
    if (j < p.size() && p[j] == ']') ++j;  // a leading ']' is literal
    while (j < p.size() && p[j] != ']') ++j;
    if (j < p.size()) {
      bool hit = false;
      for (size_t k = first; k < j; ++k) {
        if (k + 2 < j && p[k + 1] == '-') {
          if (c >= p[k] && c <= p[k + 2]) hit = true;
          k += 2;
        } else if (p[k] == c) {
          hit = true;
        }
      }
      pi = j + 1;
      return hit != negate;
    }
    // No closing ']': the '[' is an ordinary character.
  }
  return p[pi++] == c;
}

// Glob within one path segment (no '/'): greedy '*' with backtracking.
bool match_segment(const std::string& p, const std::string& t) {
  size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
      continue;
    }
    size_t next = pi;
    if (pi < p.size() && match_one(p, next, t[ti])) {
      pi = next;
      ++ti;
      continue;
    }
    if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string> split_slash(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '/') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  const auto p = split_slash(pattern);
  const auto t = split_slash(text);
  if (p.size() != t.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!match_segment(p[i], t[i])) return false;
  }
  return true;
}

}  // namespace vexp::dsl
