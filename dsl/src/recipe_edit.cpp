// The recipe tree edited: key paths (array entries by index or id), `unset`, the
// merge of a recipe over its bases, `--set` overrides and ${VAR} interpolation.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "recipe_tree.hpp"
#include "vexp/base/text.hpp"
#include "vexp/schema/schema.hpp"

namespace vexp::dsl {
namespace detail {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The element of an array of tables named by `seg`: a 0-based index or an `id`.
// Sets `problem` when there is none.
long array_index(const Value& array, const std::string& seg, const std::string& where,
                 std::string& problem) {
  const auto& items = array.as_array();
  if (all_digits(seg)) {
    const unsigned long long idx = seg.size() > 18 ? ~0ULL : std::stoull(seg);
    if (idx < items.size()) return static_cast<long>(idx);
    problem = "'" + where + "' has " + std::to_string(items.size()) + " entries; there is no index " + seg;
    return -1;
  }
  std::vector<std::string> ids;
  for (size_t i = 0; i < items.size(); ++i) {
    const Value* id = items[i].find("id");
    if (id && id->is_string()) {
      if (id->as_string() == seg) return static_cast<long>(i);
      ids.push_back(id->as_string());
    }
  }
  problem = "'" + where + "' has no entry with id '" + seg + "'";
  const std::string hint = did_you_mean(seg, ids);
  if (!hint.empty()) problem += " (did you mean '" + hint + "'?)";
  return -1;
}

std::string join_path(const std::vector<std::string>& segs, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < segs.size(); ++i) {
    if (i) s += ".";
    s += segs[i];
  }
  return s;
}

// Walks to the value at segs[0..n) without creating anything; null when absent.
Value* walk(Value& root, const std::vector<std::string>& segs, size_t n) {
  Value* cur = &root;
  for (size_t i = 0; i < n; ++i) {
    if (cur->is_table()) {
      cur = cur->find(segs[i]);
    } else if (cur->is_array()) {
      std::string ignored;
      const long idx = array_index(*cur, segs[i], "", ignored);
      cur = idx < 0 ? nullptr : &cur->as_array()[static_cast<size_t>(idx)];
    } else {
      cur = nullptr;
    }
    if (!cur) return nullptr;
  }
  return cur;
}

}  // namespace

bool erase_path(Value& root, const std::string& path) {
  const auto segs = split(path, '.');
  if (segs.empty()) return false;
  Value* parent = walk(root, segs, segs.size() - 1);
  if (!parent) return false;
  if (parent->is_table()) return parent->erase(segs.back());
  if (parent->is_array()) {
    std::string ignored;
    const long idx = array_index(*parent, segs.back(), "", ignored);
    if (idx < 0) return false;
    parent->as_array().erase(parent->as_array().begin() + idx);
    return true;
  }
  return false;
}

// Tables merge key by key; everything else (arrays of tables included) replaces.
// Keys are looked up through an index, not Value::find (a linear scan), so that a
// table with 200,000 keys merges in linear time.
void merge_into(Value& base, Value child) {
  base.set_loc(child.loc());
  Value::Table& into = base.as_table();
  std::unordered_map<std::string, size_t> index;
  index.reserve(into.size() + child.as_table().size());
  for (size_t i = 0; i < into.size(); ++i) index.emplace(into[i].first, i);
  for (auto& [key, value] : child.as_table()) {
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, into.size());
      into.emplace_back(std::move(key), std::move(value));
      continue;
    }
    Value& existing = into[it->second].second;
    if (existing.is_table() && value.is_table()) {
      merge_into(existing, std::move(value));
    } else {
      existing = std::move(value);
    }
  }
}

void apply_override(Value& root, const Override& o, Diagnostics& diags) {
  // The value is quoted in every message about it: a cut of it, escaped (a 100 KB
  // value would otherwise fill the terminal once per message).
  const Loc loc{"--set " + o.path + "=" + base::printable(o.text, 64), 0, 0};
  const auto segs = split(o.path, '.');
  for (const auto& s : segs) {
    if (s.empty()) {
      diags.error(loc, "bad key path '" + o.path + "' (empty part)");
      return;
    }
  }
  Value value;
  if (auto parsed = parse_value_text(o.text, loc)) {
    value = std::move(*parsed);
  } else {
    value = Value(o.text).at(loc);
  }
  Value* cur = &root;
  for (size_t i = 0; i < segs.size(); ++i) {
    const bool last = i + 1 == segs.size();
    if (cur->is_table()) {
      if (last) {
        cur->set(segs[i], std::move(value));
        return;
      }
      Value* next = cur->find(segs[i]);
      if (!next) next = &cur->set(segs[i], Value::table().at(loc));
      cur = next;
    } else if (cur->is_array()) {
      std::string problem;
      const long idx = array_index(*cur, segs[i], join_path(segs, i), problem);
      if (idx < 0) {
        diags.error(loc, problem);
        return;
      }
      Value& element = cur->as_array()[static_cast<size_t>(idx)];
      if (last) {
        element = std::move(value);
        return;
      }
      cur = &element;
    } else {
      diags.error(loc, "'" + join_path(segs, i) + "' is " + cur->kind_name() +
                           " " + cur->to_toml_inline() + ", not a table");
      return;
    }
  }
}

namespace {

// Expands ${VAR}, ${VAR:-default} and $$ in `s`; nullopt after reporting a problem.
std::optional<std::string> expand(const std::string& s, const Loc& loc, const EnvLookup& env,
                                  Diagnostics& diags, std::vector<Interpolation>& used) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    if (s[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (s[i + 1] != '{') {
      out += s[i];
      continue;
    }
    const size_t close = s.find('}', i + 2);
    if (close == std::string::npos) {
      diags.error(loc, "unterminated '${' in \"" + s + "\" (write $$ for a literal '$')");
      return std::nullopt;
    }
    const std::string inner = s.substr(i + 2, close - i - 2);
    const size_t dash = inner.find(":-");
    const std::string name = inner.substr(0, dash);
    const bool valid_name = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            std::all_of(name.begin(), name.end(), is_identifier_char);
    if (!valid_name) {
      diags.error(loc, "bad variable name '" + name + "' in '${" + inner + "}'");
      return std::nullopt;
    }
    std::optional<std::string> found = env(name);
    const std::optional<std::string> in_environment = found;
    if (!found || found->empty()) {
      if (dash != std::string::npos) {
        found = inner.substr(dash + 2);
      } else if (!found) {
        diags.error(loc, "environment variable '" + name + "' is not set (write ${" + name +
                             ":-default} to give a default)");
        return std::nullopt;
      }
    }
    if (std::none_of(used.begin(), used.end(), [&](const Interpolation& u) { return u.name == name; }))
      used.push_back({name, in_environment, *found, loc});
    out += *found;
    i = close;
  }
  return out;
}

}  // namespace

void interpolate(Value& v, const EnvLookup& env, Diagnostics& diags, std::vector<Interpolation>& used) {
  if (v.is_array()) {
    for (auto& e : v.as_array()) interpolate(e, env, diags, used);
    return;
  }
  if (v.is_table()) {
    for (auto& [k, e] : v.as_table()) interpolate(e, env, diags, used);
    return;
  }
  if (!v.is_string()) return;
  const std::string& s = v.as_string();
  if (s.find('$') == std::string::npos) return;
  auto expanded = expand(s, v.loc(), env, diags, used);
  if (!expanded) return;
  const bool whole = s.size() > 3 && s.compare(0, 2, "${") == 0 && s.find('}') == s.size() - 1;
  Loc loc = v.loc();
  if (whole) {
    if (auto typed = parse_value_text(*expanded, loc)) {
      if (typed->is_bool() || typed->is_number()) {
        typed->set_loc(loc);
        v = std::move(*typed);
        return;
      }
    }
  }
  v = Value(std::move(*expanded)).at(std::move(loc));
  // A whole ${VAR} is typed text: a schema check may read it as such (a number too
  // large for its type is "out of range", not "a string").
  if (whole) v.set_typed_text(v.as_string());
}

std::optional<std::string> getenv_lookup(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace detail

std::optional<Override> parse_override(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) return std::nullopt;
  Override o;
  o.path = detail::trim(arg.substr(0, eq));
  o.text = arg.substr(eq + 1);
  if (o.path.empty()) return std::nullopt;
  return o;
}

}  // namespace vexp::dsl
