// A recipe value tree that remembers where every value was written.
// Torch-free and toml++-free: plugins see these types, never toml++ itself.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vexp::schema {

// Where a value was written: the file (as given on the command line or resolved
// through `extends`), 1-based line and column. `file` may be "--set" for overrides.
struct Loc {
  std::string file;
  int line = 0;
  int col = 0;
  bool known() const { return !file.empty(); }
  // "path/to/recipe.toml:12:7" (or just the file when line is unknown).
  std::string str() const;
};

class Value {
 public:
  enum class Kind { Null, Bool, Int, Float, String, Array, Table };
  using Array = std::vector<Value>;
  using Table = std::vector<std::pair<std::string, Value>>;  // insertion-ordered

  Value() = default;
  Value(bool b) : kind_(Kind::Bool), b_(b) {}
  Value(int i) : kind_(Kind::Int), i_(i) {}
  Value(int64_t i) : kind_(Kind::Int), i_(i) {}
  Value(double d) : kind_(Kind::Float), d_(d) {}
  Value(const char* s) : kind_(Kind::String), s_(s) {}
  Value(std::string s) : kind_(Kind::String), s_(std::move(s)) {}
  static Value array(Array items = {});
  static Value table(Table items = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_table() const { return kind_ == Kind::Table; }

  // Accessors throw std::logic_error on a kind mismatch (a programming error:
  // validation has already checked types against the schema).
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // Int or Float
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Table& as_table() const;
  Table& as_table();

  // Table helpers (null when absent / not a table).
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  // Insert or replace, keeping the position of an existing key.
  Value& set(const std::string& key, Value v);
  bool erase(std::string_view key);

  const Loc& loc() const { return loc_; }
  void set_loc(Loc loc) { loc_ = std::move(loc); }
  Value& at(Loc loc) & { loc_ = std::move(loc); return *this; }
  Value&& at(Loc loc) && { loc_ = std::move(loc); return std::move(*this); }

  // TOML-ish rendering of a scalar or inline array ("8", "0.1", "\"avg\"", "[1, 2]").
  std::string to_toml_inline() const;
  static const char* kind_name(Kind k);
  const char* kind_name() const { return kind_name(kind_); }

  // The text a scalar was typed as when it came from `--set` or from a whole-string
  // ${VAR} (empty otherwise), so that a string parameter can take it back verbatim
  // (`--set run.name=007` is the string "007", not the int 7).
  const std::string& typed_text() const { return typed_text_; }
  void set_typed_text(std::string text) { typed_text_ = std::move(text); }

  bool operator==(const Value& o) const;  // ignores locations (and typed_text)
  bool operator!=(const Value& o) const { return !(*this == o); }

 private:
  Kind kind_ = Kind::Null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  Array arr_;
  Table tab_;
  Loc loc_;
  std::string typed_text_;
};

// A typed, defaults-filled parameter view handed to a plugin factory.
// Every declared parameter is present (validation filled the defaults).
class Params {
 public:
  Params() = default;
  explicit Params(std::map<std::string, Value> values, Loc owner = {})
      : values_(std::move(values)), owner_(std::move(owner)) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const Value& get(const std::string& name) const;  // throws std::out_of_range naming the key
  int64_t i64(const std::string& name) const { return get(name).as_int(); }
  double f64(const std::string& name) const { return get(name).as_double(); }
  bool flag(const std::string& name) const { return get(name).as_bool(); }
  const std::string& str(const std::string& name) const { return get(name).as_string(); }
  std::vector<int64_t> i64_list(const std::string& name) const;
  std::vector<double> f64_list(const std::string& name) const;
  std::vector<std::string> str_list(const std::string& name) const;

  // Where the table holding these parameters was written (for runtime errors).
  const Loc& owner() const { return owner_; }
  const std::map<std::string, Value>& values() const { return values_; }
  std::map<std::string, Value>& values() { return values_; }

 private:
  std::map<std::string, Value> values_;
  Loc owner_;
};

}  // namespace vexp::schema

// vexp's recipe library (namespace vexp::dsl) sees these types under its own
// name: a using-directive, source only (every symbol and type_info says
// vexp::schema). Plugins write vexp::schema::X (or the vexp::Params, Schema,
// PluginDecl ... of registrar.hpp); the SDK's vexp/dsl/ prefix headers went with
// plugin ABI 6.
namespace vexp::dsl {
using namespace ::vexp::schema;
}  // namespace vexp::dsl
