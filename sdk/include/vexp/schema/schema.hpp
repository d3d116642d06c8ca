// Parameter schemas: what a plugin (or a built-in recipe section) accepts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vexp/schema/value.hpp"

namespace vexp::schema {

enum class ParamType { Bool, Int, Float, String, IntList, FloatList, StringList, Table };
const char* param_type_name(ParamType t);  // "bool", "int", "float", "string", "int[]", ...

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::String;
  Value default_value;          // Null: the parameter is required
  std::optional<double> min;    // inclusive bounds for numbers (and list elements)
  std::optional<double> max;
  bool min_exclusive = false;   // min is a strict bound (> instead of >=)
  bool max_exclusive = false;
  std::vector<Value> choices;   // allowed values (empty: any)
  std::string doc;              // one line

  bool required() const { return default_value.is_null(); }
  // Chaining helpers used when declaring schemas.
  ParamSpec& range(std::optional<double> lo, std::optional<double> hi) { min = lo; max = hi; return *this; }
  ParamSpec& at_least(double lo) { min = lo; min_exclusive = false; return *this; }
  ParamSpec& above(double lo) { min = lo; min_exclusive = true; return *this; }
  ParamSpec& at_most(double hi) { max = hi; max_exclusive = false; return *this; }
  ParamSpec& below(double hi) { max = hi; max_exclusive = true; return *this; }
  ParamSpec& one_of(std::vector<Value> allowed) { choices = std::move(allowed); return *this; }
  ParamSpec& require() { default_value = Value(); return *this; }
};

class Schema {
 public:
  // Declaration helpers; each returns the spec for chaining (.range, .one_of).
  ParamSpec& boolean(const std::string& name, bool def, const std::string& doc);
  ParamSpec& integer(const std::string& name, int64_t def, const std::string& doc);
  ParamSpec& real(const std::string& name, double def, const std::string& doc);
  ParamSpec& text(const std::string& name, const std::string& def, const std::string& doc);
  ParamSpec& int_list(const std::string& name, std::vector<int64_t> def, const std::string& doc);
  ParamSpec& real_list(const std::string& name, std::vector<double> def, const std::string& doc);
  ParamSpec& text_list(const std::string& name, std::vector<std::string> def, const std::string& doc);
  ParamSpec& add(ParamSpec spec);

  const ParamSpec* find(std::string_view name) const;
  const std::vector<ParamSpec>& params() const { return params_; }
  std::vector<std::string> names() const;

 private:
  std::vector<ParamSpec> params_;
};

// Checks `v` against `spec`; coerces Int -> Float where a float is expected and a
// string produced by ${VAR} interpolation into the declared scalar type.
// Returns an empty string when valid, otherwise the message (without location).
std::string check_value(const ParamSpec& spec, Value& v);

// Builds a defaults-filled Params from `given` (for tests and for code that
// creates plugins without a recipe). Throws std::invalid_argument naming the key
// on an unknown key, a wrong type, a value out of range or a missing required one.
Params make_params(const Schema& schema, std::map<std::string, Value> given = {});

// Closest candidate by edit distance, or "" when nothing is close enough.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vexp::schema
