// One table of a TOML file checked against a Schema: the recipe's sections and
// plugin parameters (validate.cpp) and other vexp files such as sweep definitions.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "vexp/dsl/diagnostics.hpp"
#include "vexp/schema/schema.hpp"
#include "vexp/schema/value.hpp"

namespace vexp::dsl {

struct CheckedTable {
  Params params;   // every key of the schema, defaults filled
  Value resolved;  // the table with defaults filled, in schema order
  bool ok = true;
};

// Checks `given` (null: every key takes its default) against `schema`. Reports to
// `diags`, at the offending value: an unknown key (with "did you mean" or the
// known keys), a value of the wrong type or out of range ("'KEY' in WHERE: ..."),
// and, at `owner`, a missing required key ("WHERE needs 'KEY'"). `where` names the
// table in messages ("[optim]"). Keys in `skip` are left to other checks. Keys in
// `unchecked` belong to this table but hold values no Schema type describes
// (arrays of tables, arrays of mixed scalars): the caller checks them; they are
// named in suggestions and in the known keys.
CheckedTable check_table(const Schema& schema, const Value* given, const Loc& owner, const std::string& where,
                         const std::set<std::string>& skip, Diagnostics& diags,
                         const std::vector<std::string>& unchecked = {});

}  // namespace vexp::dsl
