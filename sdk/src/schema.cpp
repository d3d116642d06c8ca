// Parameter schemas: declaration helpers, value checks and suggestions.
#include "vexp/schema/schema.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>

namespace vexp::schema {

namespace {

// Bounds read best as the user would write them: "1", "0.5", "1e-09".
std::string number_text(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
    return std::to_string(static_cast<int64_t>(d));
  }
  return Value(d).to_toml_inline();
}

// What the user wrote, for "got ..." ("string \"abc\"", "int 3", "table").
std::string describe(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Table: return "a table";
    case Value::Kind::Array: return "an array";
    case Value::Kind::Null: return "nothing";
    default: return std::string(v.kind_name()) + " " + v.to_toml_inline();
  }
}

bool from_text(const Value& v) {
  return v.loc().file.rfind("--set", 0) == 0 || !v.typed_text().empty();
}

// Text typed without TOML types (--set, a whole-string ${VAR}) that reads as a
// number which does not fit: TOML leaves it a string, and "expected int, got
// string" would hide why. Returns the sentence saying so ("" when it is not that).
std::string out_of_range(const Value& v, bool want_float) {
  if (!v.is_string() || !from_text(v)) return "";
  std::string t;
  for (char c : v.as_string()) {
    if (c != '_') t += c;
  }
  size_t i = (!t.empty() && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
  if (i >= t.size()) return "";
  const std::string body = t.substr(i);
  auto all_of = [&](const std::string& s, size_t from, const char* set) {
    return from < s.size() && s.find_first_not_of(set, from) == std::string::npos;
  };
  const bool is_int = all_of(body, 0, "0123456789") ||
                      (body.size() > 2 && body[0] == '0' &&
                       ((body[1] == 'x' && all_of(body, 2, "0123456789abcdefABCDEF")) ||
                        (body[1] == 'o' && all_of(body, 2, "01234567")) || (body[1] == 'b' && all_of(body, 2, "01"))));
  if (is_int) {
    return v.as_string() + " is out of range for a 64-bit integer (-9223372036854775808 to 9223372036854775807)" +
           (want_float ? "; write it with a decimal point or an exponent to give a float" : "");
  }
  if (body.find_first_not_of("0123456789.eE+-") != std::string::npos) return "";
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(t.c_str(), &end);
  if (end && *end == '\0' && errno == ERANGE && std::isinf(d)) {
    return v.as_string() + " is out of range for a double (at most about 1.8e308 in magnitude)";
  }
  return "";
}

// Scalar check for one element type; converts in place where the rules allow.
std::string check_scalar(ParamType t, Value& v) {
  switch (t) {
    case ParamType::Bool:
      if (!v.is_bool()) return "expected bool, got " + describe(v);
      return "";
    case ParamType::Int:
    case ParamType::IntList:
      if (!v.is_int()) {
        const std::string range = out_of_range(v, false);
        return range.empty() ? "expected int, got " + describe(v) : range;
      }
      return "";
    case ParamType::Float:
    case ParamType::FloatList:
      if (v.is_int()) {
        Loc loc = v.loc();
        v = Value(static_cast<double>(v.as_int())).at(std::move(loc));
      }
      if (!v.is_float()) {
        const std::string range = out_of_range(v, true);
        return range.empty() ? "expected float, got " + describe(v) : range;
      }
      return "";
    case ParamType::String:
    case ParamType::StringList:
      if ((v.is_int() || v.is_float() || v.is_bool()) && from_text(v)) {
        Loc loc = v.loc();
        std::string text = v.typed_text().empty() ? v.to_toml_inline() : v.typed_text();
        v = Value(std::move(text)).at(std::move(loc));
      }
      if (!v.is_string()) return "expected string, got " + describe(v);
      return "";
    case ParamType::Table:
      if (!v.is_table()) return "expected a table, got " + describe(v);
      return "";
  }
  return "";
}

std::string check_bounds(const ParamSpec& spec, const Value& v) {
  if (!v.is_number() || (!spec.min && !spec.max)) return "";
  const double x = v.as_double();
  const bool low_ok = !spec.min || (spec.min_exclusive ? x > *spec.min : x >= *spec.min);
  const bool high_ok = !spec.max || (spec.max_exclusive ? x < *spec.max : x <= *spec.max);
  if (low_ok && high_ok) return "";
  std::string want;
  if (spec.min && spec.max) {
    want = std::string("in ") + (spec.min_exclusive ? "(" : "[") + number_text(*spec.min) + ", " +
           number_text(*spec.max) + (spec.max_exclusive ? ")" : "]");
  } else if (spec.min) {
    want = std::string(spec.min_exclusive ? "> " : ">= ") + number_text(*spec.min);
  } else {
    want = std::string(spec.max_exclusive ? "< " : "<= ") + number_text(*spec.max);
  }
  return "must be " + want + ", got " + v.to_toml_inline();
}

std::string check_choices(const ParamSpec& spec, const Value& v) {
  if (spec.choices.empty()) return "";
  for (const auto& c : spec.choices) {
    if (c == v || (c.is_number() && v.is_number() && c.as_double() == v.as_double())) return "";
  }
  std::string list;
  for (size_t i = 0; i < spec.choices.size(); ++i) {
    if (i) list += ", ";
    list += spec.choices[i].to_toml_inline();
  }
  return "must be one of " + list + ", got " + v.to_toml_inline();
}

bool is_list(ParamType t) {
  return t == ParamType::IntList || t == ParamType::FloatList || t == ParamType::StringList;
}

// Levenshtein distance where swapping two neighbours ("depht") also costs one edit.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

}  // namespace

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Bool: return "bool";
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::String: return "string";
    case ParamType::IntList: return "int[]";
    case ParamType::FloatList: return "float[]";
    case ParamType::StringList: return "string[]";
    case ParamType::Table: return "table";
  }
  return "?";
}

ParamSpec& Schema::add(ParamSpec spec) {
  for (auto& existing : params_) {
    if (existing.name == spec.name) {
      existing = std::move(spec);
      return existing;
    }
  }
  params_.push_back(std::move(spec));
  return params_.back();
}

ParamSpec& Schema::boolean(const std::string& name, bool def, const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::Bool;
  s.default_value = Value(def);
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::integer(const std::string& name, int64_t def, const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::Int;
  s.default_value = Value(def);
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::real(const std::string& name, double def, const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::Float;
  s.default_value = Value(def);
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::text(const std::string& name, const std::string& def, const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::String;
  s.default_value = Value(def);
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::int_list(const std::string& name, std::vector<int64_t> def,
                            const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::IntList;
  Value::Array items;
  for (auto x : def) items.emplace_back(x);
  s.default_value = Value::array(std::move(items));
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::real_list(const std::string& name, std::vector<double> def,
                             const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::FloatList;
  Value::Array items;
  for (auto x : def) items.emplace_back(x);
  s.default_value = Value::array(std::move(items));
  s.doc = doc;
  return add(std::move(s));
}

ParamSpec& Schema::text_list(const std::string& name, std::vector<std::string> def,
                             const std::string& doc) {
  ParamSpec s;
  s.name = name;
  s.type = ParamType::StringList;
  Value::Array items;
  for (auto& x : def) items.emplace_back(std::move(x));
  s.default_value = Value::array(std::move(items));
  s.doc = doc;
  return add(std::move(s));
}

const ParamSpec* Schema::find(std::string_view name) const {
  for (const auto& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> Schema::names() const {
  std::vector<std::string> out;
  for (const auto& p : params_) out.push_back(p.name);
  return out;
}

std::string check_value(const ParamSpec& spec, Value& v) {
  if (is_list(spec.type)) {
    if (!v.is_array()) return "expected " + std::string(param_type_name(spec.type)) + ", got " + describe(v);
    auto& items = v.as_array();
    for (size_t i = 0; i < items.size(); ++i) {
      std::string msg = check_scalar(spec.type, items[i]);
      if (msg.empty()) msg = check_bounds(spec, items[i]);
      if (msg.empty()) msg = check_choices(spec, items[i]);
      if (!msg.empty()) return "element " + std::to_string(i) + ": " + msg;
    }
    return "";
  }
  std::string msg = check_scalar(spec.type, v);
  if (msg.empty()) msg = check_bounds(spec, v);
  if (msg.empty()) msg = check_choices(spec, v);
  return msg;
}

Params make_params(const Schema& schema, std::map<std::string, Value> given) {
  std::map<std::string, Value> values;
  for (auto& [key, value] : given) {
    const ParamSpec* spec = schema.find(key);
    if (!spec) {
      std::string msg = "unknown parameter '" + key + "'";
      const std::string hint = did_you_mean(key, schema.names());
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      throw std::invalid_argument(msg);
    }
    Value v = value;
    const std::string problem = check_value(*spec, v);
    if (!problem.empty()) throw std::invalid_argument("parameter '" + key + "': " + problem);
    values[key] = std::move(v);
  }
  for (const auto& spec : schema.params()) {
    if (values.count(spec.name)) continue;
    if (spec.required()) {
      throw std::invalid_argument("missing required parameter '" + spec.name + "'");
    }
    values[spec.name] = spec.default_value;
  }
  return Params(std::move(values));
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    if (c == word) continue;
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace vexp::schema
