// The resnet backbone's declaration (schema, insertion points, shape hooks),
// torch-free: the plugin registers it (resnet.cpp), and the recipe front end's
// tests check recipes against it (tests/dsl/fake_catalog.cpp), so both see one
// contract. The hooks compute from resnet_plan.hpp, as the module does.
#pragma once

#include "vexp/schema/catalog.hpp"

namespace vexp_resnet {

// kind "backbone", name "resnet", its schema, insertion_points, infer_shape and point_shape.
vexp::schema::PluginDecl declaration();

}  // namespace vexp_resnet
