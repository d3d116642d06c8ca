// Loading a recipe: toml++ parse, `extends` chains and `unset`, then the `--set`
// overrides and ${VAR} interpolation of recipe_edit.cpp. toml++ stays inside this file.
#include "vexp/dsl/recipe.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/schema/schema.hpp"
#include "recipe_tree.hpp"

namespace vexp::dsl {

namespace fs = std::filesystem;

using detail::apply_override;
using detail::erase_path;
using detail::getenv_lookup;
using detail::EnvLookup;
using detail::interpolate;
using detail::merge_into;
using detail::parse_value_text;
using detail::trim;

namespace {

// Deeper trees are refused so that every recursive walk stays far from the stack limit.
constexpr int kMaxDepth = 128;

Loc loc_of(const toml::source_region& r, const std::string& file) {
  return Loc{file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
}

void set_loc_deep(Value& v, const Loc& loc) {
  v.set_loc(loc);
  if (v.is_array()) {
    for (auto& e : v.as_array()) set_loc_deep(e, loc);
  } else if (v.is_table()) {
    for (auto& [k, e] : v.as_table()) set_loc_deep(e, loc);
  }
}

// toml++ tree -> Value, with positions. Returns false for a value that cannot be
// represented (dates, too deep); the caller drops it after the error.
bool convert(const toml::node& n, Loc loc, const std::string& file, int depth, Diagnostics& diags,
             Value& out) {
  if (depth > kMaxDepth) {
    diags.error(loc, "values nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return false;
  }
  if (const auto* t = n.as_table()) {
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [k, v] : *t) entries.emplace_back(&k, &v);
    // toml++ keeps keys sorted; the file's order is the order the user wrote.
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      const auto& ra = a.first->source().begin;
      const auto& rb = b.first->source().begin;
      return std::tie(ra.line, ra.column) < std::tie(rb.line, rb.column);
    });
    Value table = Value::table();
    table.set_loc(std::move(loc));
    for (const auto& [key, node] : entries) {
      Loc child_loc = loc_of(key->source(), file);
      const auto* sub = node->as_table();
      if (child_loc.line == 0 || (sub && !sub->is_inline())) child_loc = loc_of(node->source(), file);
      Value child;
      if (convert(*node, std::move(child_loc), file, depth + 1, diags, child)) {
        table.as_table().emplace_back(std::string(key->str()), std::move(child));
      }
    }
    out = std::move(table);
    return true;
  }
  if (const auto* a = n.as_array()) {
    Value array = Value::array();
    array.set_loc(std::move(loc));
    for (const auto& e : *a) {
      Value child;
      if (convert(e, loc_of(e.source(), file), file, depth + 1, diags, child)) {
        array.as_array().push_back(std::move(child));
      }
    }
    out = std::move(array);
    return true;
  }
  if (const auto* s = n.as_string()) {
    out = Value(s->get()).at(std::move(loc));
    return true;
  }
  if (const auto* i = n.as_integer()) {
    out = Value(static_cast<int64_t>(i->get())).at(std::move(loc));
    return true;
  }
  if (const auto* d = n.as_floating_point()) {
    out = Value(d->get()).at(std::move(loc));
    return true;
  }
  if (const auto* b = n.as_boolean()) {
    out = Value(b->get()).at(std::move(loc));
    return true;
  }
  diags.error(loc, "dates are not supported");
  return false;
}

// toml++ reports a number too large for its type as "Error while parsing decimal
// integer: '...' is not representable in 64 bits" (or "... could not be
// interpreted as a value" for 1e999), placed after the literal. Says instead that
// the number is out of range, at the literal as written (sign, '_' and all).
void number_range_message(const std::string& text, Loc& loc, std::string& message) {
  const bool int_range = message.find("is not representable in 64 bits") != std::string::npos;
  const bool float_bad = message.rfind("Error while parsing floating-point", 0) == 0 &&
                         message.find("could not be interpreted as a value") != std::string::npos;
  const size_t q1 = message.find('\'');
  const size_t q2 = q1 == std::string::npos ? q1 : message.find('\'', q1 + 1);
  if ((!int_range && !float_bad) || q2 == std::string::npos) return;
  const std::string quoted = message.substr(q1 + 1, q2 - q1 - 1);  // without sign and '_'
  std::string literal = quoted;
  int col = loc.col;
  // The literal as written ends just before toml++'s position (columns count
  // characters, not bytes).
  auto continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; };
  size_t begin = 0;
  for (int line = 1; line < loc.line && begin != std::string::npos; ++line) {
    begin = text.find('\n', begin);
    if (begin != std::string::npos) ++begin;
  }
  size_t end = begin;
  for (int c = 1; end != std::string::npos && c < loc.col; ++c) {
    if (end >= text.size()) {
      end = std::string::npos;
      break;
    }
    ++end;
    while (end < text.size() && continuation(text[end])) ++end;
  }
  if (end != std::string::npos && loc.col >= 1) {
    auto literal_char = [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-';
    };
    size_t start = end;
    while (start > begin && literal_char(text[start - 1])) --start;
    const std::string written = text.substr(start, end - start);
    std::string bare;
    for (char c : written) {
      if (c != '_') bare += c;
    }
    if (!bare.empty() && (bare[0] == '+' || bare[0] == '-')) bare.erase(0, 1);
    if (bare == quoted) {
      literal = written;
      col = 1 + static_cast<int>(std::count_if(text.begin() + static_cast<long>(begin),
                                               text.begin() + static_cast<long>(start),
                                               [&](char c) { return !continuation(c); }));
    }
  }
  if (int_range) {
    message = literal + " is out of range for a 64-bit integer (-9223372036854775808 to 9223372036854775807)";
  } else {
    std::string digits;
    for (char c : quoted) {
      if (c != '_') digits += c;
    }
    errno = 0;
    const double d = std::strtod(digits.c_str(), nullptr);
    if (errno != ERANGE || !std::isinf(d)) return;
    message = literal + " is out of range for a double (at most about 1.8e308 in magnitude)";
  }
  loc.col = col;
}

std::string mib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// Reads a recipe file: a regular file of at most kMaxRecipeBytes, through base's
// bounded reader (devices, FIFOs and directories refused before reading, a FIFO
// opened without waiting for a writer, a file that grows past the limit refused),
// its failure worded for the recipe's diagnostics.
bool read_file(const std::string& path, std::string& text, std::string& error) {
  using Kind = base::ReadFailure::Kind;
  text.clear();
  const uint64_t limit = kMaxRecipeBytes;
  const auto failed = base::try_read_file_chunks(path, limit, [&](std::string_view piece) { text.append(piece); });
  if (!failed) return true;
  const std::string at_most =
      "a recipe file may have at most " + mib_text(limit) + " (" + std::to_string(limit) + " bytes)";
  switch (failed->kind) {
    case Kind::cannot_read: error = std::strerror(failed->err); break;
    case Kind::not_regular:
      error = S_ISDIR(failed->mode) ? "is a directory" : "is " + base::file_kind(failed->mode) + ", not a regular file";
      break;
    case Kind::too_big: error = "is " + std::to_string(failed->bytes) + " bytes; " + at_most; break;
    case Kind::grew: error = "grew past " + std::to_string(limit) + " bytes while being read; " + at_most; break;
  }
  return false;
}

std::string identity_of(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return fs::path(path).lexically_normal().string();
  return p.string();
}

class Loader {
 public:
  explicit Loader(Diagnostics& diags) : diags_(diags) {}

  std::vector<std::string> files;

  // One file with its bases merged underneath; nullopt on a syntax error.
  std::optional<Value> load(const std::string& text, const std::string& display) {
    toml::table parsed;
    try {
      parsed = toml::parse(std::string_view(text), std::string_view(display));
    } catch (const toml::parse_error& e) {
      Loc loc = loc_of(e.source(), display);
      std::string message(e.description());
      number_range_message(text, loc, message);
      diags_.error(loc, std::move(message));
      return std::nullopt;
    }
    files.push_back(display);
    Value tree;
    convert(parsed, Loc{display, 1, 1}, display, 0, diags_, tree);

    stack_.push_back({identity_of(display), display});
    Value base = Value::table().at(Loc{display, 1, 1});
    if (const Value* ext = tree.find("extends")) load_bases(*ext, display, base);
    tree.erase("extends");
    if (const Value* un = tree.find("unset")) apply_unset(*un, base);
    tree.erase("unset");
    stack_.pop_back();

    merge_into(base, std::move(tree));
    return base;
  }

 private:
  struct Frame {
    std::string identity;
    std::string display;
  };

  // The strings of `v`, a string or an array of strings; each other value is an error
  // (`element`: what a string there means, `whole`: what `v` must be).
  std::vector<const Value*> strings_of(const Value& v, const std::string& key, const std::string& element,
                                       const std::string& whole) {
    std::vector<const Value*> out;
    if (v.is_string()) {
      out.push_back(&v);
    } else if (v.is_array()) {
      for (const auto& e : v.as_array()) {
        if (e.is_string()) out.push_back(&e);
        else diags_.error(e.loc(), key + ": expected " + element + " (string), got " + std::string(e.kind_name()));
      }
    } else {
      diags_.error(v.loc(), key + " must be " + whole + ", got " + std::string(v.kind_name()));
    }
    return out;
  }

  void load_bases(const Value& ext, const std::string& display, Value& base) {
    for (const Value* name : strings_of(ext, "extends", "a file name", "a file name or an array of file names")) {
      const std::string& written = name->as_string();
      fs::path p(written);
      if (p.is_relative()) p = fs::path(display).parent_path() / p;
      const std::string base_display = p.lexically_normal().string();
      const std::string identity = identity_of(base_display);
      auto it = std::find_if(stack_.begin(), stack_.end(),
                             [&](const Frame& f) { return f.identity == identity; });
      if (it != stack_.end()) {
        std::string chain;
        for (; it != stack_.end(); ++it) chain += it->display + " -> ";
        diags_.error(name->loc(), "extends cycle: " + chain + base_display);
        continue;
      }
      std::string text, error;
      if (!read_file(base_display, text, error)) {
        diags_.error(name->loc(), "cannot read base recipe '" + written + "': " + error);
        continue;
      }
      if (auto loaded = load(text, base_display)) merge_into(base, std::move(*loaded));
    }
  }

  void apply_unset(const Value& un, Value& base) {
    for (const Value* path : strings_of(un, "unset", "a dotted key path", "an array of dotted key paths")) {
      if (!erase_path(base, path->as_string())) {
        diags_.warning(path->loc(), "unset '" + path->as_string() +
                                        "' does nothing: no base recipe sets it");
      }
    }
  }

  Diagnostics& diags_;
  std::vector<Frame> stack_;
};

std::optional<Recipe> finish(Loader& loader, std::optional<Value> tree, const std::string& path,
                             const LoadOptions& opts, Diagnostics& diags) {
  if (!tree) return std::nullopt;
  for (const auto& o : opts.overrides) apply_override(*tree, o, diags);
  Recipe r;
  interpolate(*tree, opts.env ? opts.env : EnvLookup(getenv_lookup), diags, r.variables);
  r.path = path;
  r.files = std::move(loader.files);
  r.root = std::move(*tree);
  return r;
}

}  // namespace

// Parses one TOML value written as text ("18", "[1, 2]", "\"x\""); nullopt when the
// text is not a single TOML value (then the caller takes it as a plain string).
std::optional<Value> detail::parse_value_text(const std::string& text, const Loc& loc) {
  if (text.find_first_of("\r\n") != std::string::npos) return std::nullopt;
  try {
    toml::table t = toml::parse("v = " + text);
    if (t.size() != 1) return std::nullopt;
    const toml::node* n = t.get("v");
    if (!n || n->is_date() || n->is_time() || n->is_date_time()) return std::nullopt;
    Diagnostics ignored;
    Value v;
    if (!convert(*n, loc, loc.file, 1, ignored, v) || ignored.has_errors()) return std::nullopt;
    set_loc_deep(v, loc);
    if (v.is_bool() || v.is_number()) v.set_typed_text(trim(text));
    return v;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

std::optional<Recipe> load_recipe(const std::string& path, const LoadOptions& opts,
                                  Diagnostics& diags) {
  std::string text, error;
  if (!read_file(path, text, error)) throw RecipeError("cannot read recipe '" + path + "': " + error);
  Loader loader(diags);
  auto tree = loader.load(text, path);
  return finish(loader, std::move(tree), path, opts, diags);
}

std::optional<Recipe> load_recipe_text(const std::string& text, const std::string& virtual_path,
                                       const LoadOptions& opts, Diagnostics& diags) {
  Loader loader(diags);
  auto tree = loader.load(text, virtual_path);
  return finish(loader, std::move(tree), virtual_path, opts, diags);
}

}  // namespace vexp::dsl
