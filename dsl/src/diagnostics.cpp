// Collected recipe problems and their compiler-style rendering.
#include "vexp/dsl/diagnostics.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "vexp/base/text.hpp"

namespace vexp::dsl {

namespace {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

}  // namespace

std::string Diagnostic::str() const {
  std::string out;
  if (loc.known()) out = loc.str() + ": ";
  return base::printable(out + severity_name(severity) + ": " + message, 4096);
}

void Diagnostics::error(const Loc& loc, std::string message) {
  items_.push_back({Severity::Error, loc, std::move(message)});
}

void Diagnostics::warning(const Loc& loc, std::string message) {
  items_.push_back({Severity::Warning, loc, std::move(message)});
}

void Diagnostics::note(const Loc& loc, std::string message) {
  items_.push_back({Severity::Note, loc, std::move(message)});
}

bool Diagnostics::has_errors() const { return error_count() > 0; }

size_t Diagnostics::error_count() const {
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(), [](const Diagnostic& d) {
    return d.severity == Severity::Error;
  }));
}

std::vector<Diagnostic> Diagnostics::sorted(size_t max_shown) const {
  std::vector<Diagnostic> out;
  out.reserve(items_.size());
  std::set<std::tuple<int, std::string, int, int, std::string>> seen;
  for (const auto& d : items_) {
    auto key = std::make_tuple(static_cast<int>(d.severity), d.loc.file, d.loc.line, d.loc.col, d.message);
    if (seen.insert(std::move(key)).second) out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.loc.file, a.loc.line, a.loc.col) < std::tie(b.loc.file, b.loc.line, b.loc.col);
  });
  if (out.size() <= max_shown) return out;
  size_t counts[3] = {0, 0, 0};
  for (size_t i = max_shown; i < out.size(); ++i) ++counts[static_cast<int>(out[i].severity)];
  out.resize(max_shown);
  std::string more;
  auto add = [&more](size_t n, const char* one, const char* many) {
    if (n == 0) return;
    more += (more.empty() ? "" : ", ") + std::to_string(n) + " more " + (n == 1 ? one : many);
  };
  add(counts[static_cast<int>(Severity::Error)], "error", "errors");
  add(counts[static_cast<int>(Severity::Warning)], "warning", "warnings");
  add(counts[static_cast<int>(Severity::Note)], "note", "notes");
  out.push_back({Severity::Note, Loc{}, "... and " + more + " (not shown)"});
  return out;
}

std::string Diagnostics::str(size_t max_shown) const {
  std::string out;
  for (const auto& d : sorted(max_shown)) out += d.str() + "\n";
  return out;
}

}  // namespace vexp::dsl
