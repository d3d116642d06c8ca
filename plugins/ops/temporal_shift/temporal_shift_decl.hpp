// The temporal_shift operator's declaration (schema and shape rule), torch-free:
// the plugin registers it, and the recipe front end's tests check recipes
// against it (tests/dsl/fake_catalog.cpp), so both see one contract.
#pragma once

#include "vexp/schema/catalog.hpp"

namespace vexp_temporal_shift {

// kind "op", name "temporal_shift", its schema and infer_shape.
vexp::schema::PluginDecl declaration();

}  // namespace vexp_temporal_shift
