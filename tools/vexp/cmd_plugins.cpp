// vexp plugins [--json]
#include <iostream>

#include <nlohmann/json.hpp>

#include "common.hpp"

namespace vexp::cli {
namespace {

nlohmann::json value_json(const dsl::Value& v) {
  using K = dsl::Value::Kind;
  switch (v.kind()) {
    case K::Null: return nullptr;
    case K::Bool: return v.as_bool();
    case K::Int: return v.as_int();
    case K::Float: return v.as_double();
    case K::String: return v.as_string();
    case K::Array: {
      auto a = nlohmann::json::array();
      for (const auto& e : v.as_array()) a.push_back(value_json(e));
      return a;
    }
    case K::Table: {
      auto o = nlohmann::json::object();
      for (const auto& [k, e] : v.as_table()) o[k] = value_json(e);
      return o;
    }
  }
  return nullptr;
}

nlohmann::json schema_json(const dsl::Schema& schema) {
  auto params = nlohmann::json::array();
  for (const auto& p : schema.params()) {
    nlohmann::json j{{"name", p.name}, {"type", dsl::param_type_name(p.type)}, {"doc", p.doc},
                     {"required", p.required()}};
    if (!p.required()) j["default"] = value_json(p.default_value);
    if (p.min) j["min"] = *p.min;
    if (p.max) j["max"] = *p.max;
    if (!p.choices.empty()) {
      auto c = nlohmann::json::array();
      for (const auto& v : p.choices) c.push_back(value_json(v));
      j["choices"] = c;
    }
    params.push_back(j);
  }
  return params;
}

std::string spec_line(const dsl::ParamSpec& p) {
  std::string s = p.name + " (" + dsl::param_type_name(p.type) + ", ";
  s += p.required() ? "required" : "default " + p.default_value.to_toml_inline();
  auto num = [&](double v) {
    bool integral = p.type == dsl::ParamType::Int || p.type == dsl::ParamType::IntList;
    return integral ? dsl::Value(static_cast<int64_t>(v)).to_toml_inline() : dsl::Value(v).to_toml_inline();
  };
  if (p.min && p.max) s += ", range " + num(*p.min) + ".." + num(*p.max);
  else if (p.min) s += ", >= " + num(*p.min);
  else if (p.max) s += ", <= " + num(*p.max);
  if (!p.choices.empty()) {
    s += ", one of ";
    for (size_t i = 0; i < p.choices.size(); ++i) s += (i ? "|" : "") + p.choices[i].to_toml_inline();
  }
  return s + "): " + p.doc;
}

}  // namespace

void add_plugins(CLI::App& app) {
  auto* cmd = app.add_subcommand("plugins", "List every plugin found, with its parameters");
  auto as_json = std::make_shared<bool>(false);
  auto extra = std::make_shared<std::vector<std::string>>();
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->add_option("--path", *extra, "Also load plugins from this folder or file (repeatable)");
  cmd->callback([as_json, extra] {
    Session s;
    load_plugins(s);
    for (const auto& p : *extra) s.host.load_directory(p, s.plugin_problems);
    report_plugin_problems(s);
    if (*as_json) {
      auto out = nlohmann::json::array();
      for (const auto* d : s.host.all()) {
        out.push_back({{"kind", d->kind}, {"name", d->name}, {"doc", d->doc}, {"library", d->library},
                       {"version", d->library_version}, {"params", schema_json(d->schema)},
                       {"insertion_points", static_cast<bool>(d->insertion_points)}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    for (const auto* d : s.host.all()) {
      std::cout << d->kind << " " << d->name << "  [" << d->library << " " << d->library_version << "]\n";
      std::cout << "    " << d->doc << "\n";
      for (const auto& p : d->schema.params()) std::cout << "    - " << spec_line(p) << "\n";
    }
    if (s.host.all().empty()) throw Exit{kExitFailure, "no plugins found in " + PluginHost::default_plugin_dir()};
  });
}

}  // namespace vexp::cli
