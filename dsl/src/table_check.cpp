#include "vexp/dsl/table_check.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace vexp::dsl {

CheckedTable check_table(const Schema& schema, const Value* given, const Loc& owner, const std::string& where,
                         const std::set<std::string>& skip, Diagnostics& diags,
                         const std::vector<std::string>& unchecked) {
  CheckedTable c;
  c.resolved = Value::table().at(owner);
  std::map<std::string, Value> values;
  if (given && given->is_table()) {
    std::vector<std::string> known = schema.names();
    known.insert(known.end(), unchecked.begin(), unchecked.end());
    for (const auto& [key, value] : given->as_table()) {
      if (skip.count(key) || std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string msg = "unknown key '" + key + "' in " + where;
      const std::string hint = did_you_mean(key, known);
      if (!hint.empty()) {
        msg += " (did you mean '" + hint + "'?)";
      } else if (known.empty()) {
        msg += " (it takes no keys)";
      } else {
        msg += "; known keys: ";
        const char* sep = "";
        for (const auto& name : known) {
          msg += sep + name;
          sep = ", ";
        }
      }
      diags.error(value.loc(), msg);
      c.ok = false;
    }
  }
  for (const auto& spec : schema.params()) {
    const Value* v = given ? given->find(spec.name) : nullptr;
    if (!v) {
      if (spec.required()) {
        diags.error(owner, where + " needs '" + spec.name + "'");
        c.ok = false;
        continue;
      }
      values[spec.name] = spec.default_value;
      c.resolved.set(spec.name, spec.default_value);
      continue;
    }
    Value copy = *v;
    const std::string problem = check_value(spec, copy);
    if (!problem.empty()) {
      diags.error(v->loc(), "'" + spec.name + "' in " + where + ": " + problem);
      c.ok = false;
      c.resolved.set(spec.name, *v);
      continue;
    }
    c.resolved.set(spec.name, copy);
    values[spec.name] = std::move(copy);
  }
  c.params = Params(std::move(values), owner);
  return c;
}

}  // namespace vexp::dsl
