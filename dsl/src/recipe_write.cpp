// The recipe tree written back as TOML (vexp check --print, resolved.toml, --best-recipe)
// and its hash, which is the hash of that text.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "recipe_tree.hpp"

namespace vexp::dsl {

namespace {

bool bare_key(const std::string& k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return detail::is_identifier_char(c) || c == '-'; });
}

std::string key_text(const std::string& k) { return bare_key(k) ? k : Value(k).to_toml_inline(); }

bool is_array_of_tables(const Value& v) {
  return v.is_array() && !v.as_array().empty() &&
         std::all_of(v.as_array().begin(), v.as_array().end(), [](const Value& e) { return e.is_table(); });
}

void render_table(std::string& out, const Value& table, const std::string& path) {
  for (const auto& [k, v] : table.as_table()) {
    if (v.is_null() || v.is_table() || is_array_of_tables(v)) continue;
    out += key_text(k) + " = " + v.to_toml_inline() + "\n";
  }
  for (const auto& [k, v] : table.as_table()) {
    const std::string sub = path.empty() ? key_text(k) : path + "." + key_text(k);
    if (v.is_table()) {
      out += "\n[" + sub + "]\n";
      render_table(out, v, sub);
    } else if (is_array_of_tables(v)) {
      for (const auto& e : v.as_array()) {
        out += "\n[[" + sub + "]]\n";
        render_table(out, e, sub);
      }
    }
  }
}

}  // namespace

std::string to_toml(const Value& root) {
  if (!root.is_table()) return "";
  std::string out;
  render_table(out, root, "");
  if (!out.empty() && out[0] == '\n') out.erase(0, 1);
  return out;
}

std::string recipe_hash(const Value& root) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : to_toml(root)) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace vexp::dsl
