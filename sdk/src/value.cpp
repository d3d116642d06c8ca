// Value tree, locations and the typed parameter view.
#include "vexp/schema/value.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace vexp::schema {

namespace {

[[noreturn]] void kind_mismatch(const char* wanted, const Value& v) {
  std::string msg = std::string("value is ") + v.kind_name() + ", not " + wanted;
  if (v.loc().known()) msg += " (at " + v.loc().str() + ")";
  throw std::logic_error(msg);
}

// Shortest text that reads back as the same double, always recognisable as a float.
std::string float_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[512];
  const double mag = std::fabs(d);
  // Plain decimals where they stay short ("500.0", "0.001"), exponents elsewhere ("1e-09").
  const bool fixed = mag == 0 || (mag >= 1e-4 && mag < 1e16);
  for (int precision = fixed ? 0 : 1; precision <= 17 + (fixed ? 4 : 0); ++precision) {
    std::snprintf(buf, sizeof buf, fixed ? "%.*f" : "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

bool bare_key(const std::string& k) {
  if (k.empty()) return false;
  for (unsigned char c : k) {
    if (!(std::isalnum(c) || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string Loc::str() const {
  if (line <= 0) return file;
  std::string s = file + ":" + std::to_string(line);
  if (col > 0) s += ":" + std::to_string(col);
  return s;
}

Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::Array;
  v.arr_ = std::move(items);
  return v;
}

Value Value::table(Table items) {
  Value v;
  v.kind_ = Kind::Table;
  v.tab_ = std::move(items);
  return v;
}

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) kind_mismatch("bool", *this);
  return b_;
}

int64_t Value::as_int() const {
  if (kind_ != Kind::Int) kind_mismatch("int", *this);
  return i_;
}

double Value::as_double() const {
  if (kind_ == Kind::Int) return static_cast<double>(i_);
  if (kind_ != Kind::Float) kind_mismatch("float", *this);
  return d_;
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::String) kind_mismatch("string", *this);
  return s_;
}

const Value::Array& Value::as_array() const {
  if (kind_ != Kind::Array) kind_mismatch("array", *this);
  return arr_;
}

Value::Array& Value::as_array() {
  if (kind_ != Kind::Array) kind_mismatch("array", *this);
  return arr_;
}

const Value::Table& Value::as_table() const {
  if (kind_ != Kind::Table) kind_mismatch("table", *this);
  return tab_;
}

Value::Table& Value::as_table() {
  if (kind_ != Kind::Table) kind_mismatch("table", *this);
  return tab_;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Table) return nullptr;
  for (const auto& [k, v] : tab_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Value::find(std::string_view key) {
  if (kind_ != Kind::Table) return nullptr;
  for (auto& [k, v] : tab_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value& Value::set(const std::string& key, Value v) {
  if (kind_ != Kind::Table) kind_mismatch("table", *this);
  for (auto& [k, existing] : tab_) {
    if (k == key) {
      existing = std::move(v);
      return existing;
    }
  }
  tab_.emplace_back(key, std::move(v));
  return tab_.back().second;
}

bool Value::erase(std::string_view key) {
  if (kind_ != Kind::Table) return false;
  for (auto it = tab_.begin(); it != tab_.end(); ++it) {
    if (it->first == key) {
      tab_.erase(it);
      return true;
    }
  }
  return false;
}

std::string Value::to_toml_inline() const {
  switch (kind_) {
    case Kind::Null: return "";
    case Kind::Bool: return b_ ? "true" : "false";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return float_text(d_);
    case Kind::String: return quoted(s_);
    case Kind::Array: {
      std::string s = "[";
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) s += ", ";
        s += arr_[i].to_toml_inline();
      }
      return s + "]";
    }
    case Kind::Table: {
      if (tab_.empty()) return "{}";
      std::string s = "{ ";
      for (size_t i = 0; i < tab_.size(); ++i) {
        if (i) s += ", ";
        const auto& [k, v] = tab_[i];
        s += (bare_key(k) ? k : quoted(k)) + " = " + v.to_toml_inline();
      }
      return s + " }";
    }
  }
  return "";
}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Table: return "table";
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Null: return true;
    case Kind::Bool: return b_ == o.b_;
    case Kind::Int: return i_ == o.i_;
    case Kind::Float: return d_ == o.d_ || (std::isnan(d_) && std::isnan(o.d_));
    case Kind::String: return s_ == o.s_;
    case Kind::Array: return arr_ == o.arr_;
    case Kind::Table: {
      // Key order is presentation, not content (to_toml moves sub-tables last).
      if (tab_.size() != o.tab_.size()) return false;
      for (const auto& [k, v] : tab_) {
        const Value* other = o.find(k);
        if (!other || *other != v) return false;
      }
      return true;
    }
  }
  return false;
}

const Value& Params::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::out_of_range("no parameter '" + name + "'");
  return it->second;
}

std::vector<int64_t> Params::i64_list(const std::string& name) const {
  std::vector<int64_t> out;
  for (const auto& v : get(name).as_array()) out.push_back(v.as_int());
  return out;
}

std::vector<double> Params::f64_list(const std::string& name) const {
  std::vector<double> out;
  for (const auto& v : get(name).as_array()) out.push_back(v.as_double());
  return out;
}

std::vector<std::string> Params::str_list(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& v : get(name).as_array()) out.push_back(v.as_string());
  return out;
}

}  // namespace vexp::schema
