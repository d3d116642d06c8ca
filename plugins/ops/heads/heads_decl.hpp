// The heads plugin's declarations (schemas and shape rules), torch-free: the
// plugin registers them (heads.cpp), and the recipe front end's tests check
// recipes against them (tests/dsl/fake_catalog.cpp), so both see one contract.
#pragma once

#include "vexp/schema/catalog.hpp"

namespace vexp_heads {

// kind "op", name "fold_time": [N, T, C, ...] -> [N*T, C, ...].
vexp::schema::PluginDecl fold_time_declaration();
// kind "op", name "classifier": [M, C, H, W] or [M, C] -> [M, classes].
vexp::schema::PluginDecl classifier_declaration();
// kind "op", name "segment_consensus": [N*T, ...] -> [N, ...].
vexp::schema::PluginDecl segment_consensus_declaration();

}  // namespace vexp_heads
