// The optimizers plugin's declarations (schemas), torch-free: the plugin registers
// them (optimizers.cpp), and the recipe front end's tests check recipes against them
// (tests/dsl/fake_catalog.cpp), so both see one contract. Each optimizer's
// parameters are written beside `type` in [optim]; the host's keys there (lr,
// weight_decay, no_decay_bn_bias, fc_lr5, clip_grad_norm, groups) are not theirs.
#pragma once

#include "vexp/schema/catalog.hpp"

namespace vexp_optimizers {

// kind "optimizer", name "sgd": SGD with momentum (torch.optim.SGD's rule), Nesterov, LARS.
vexp::schema::PluginDecl sgd_declaration();
// kind "optimizer", name "adamw": Adam with decoupled weight decay (torch.optim.AdamW).
vexp::schema::PluginDecl adamw_declaration();
// kind "optimizer", name "lamb": LAMB (You et al. 2019), as timm's Lamb and NVIDIA's FusedLAMB.
vexp::schema::PluginDecl lamb_declaration();

}  // namespace vexp_optimizers
