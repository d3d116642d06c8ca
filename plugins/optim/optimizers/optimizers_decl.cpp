#include "optimizers_decl.hpp"

namespace vexp_optimizers {

namespace {

vexp::schema::PluginDecl optimizer(const char* name, const char* doc) {
  vexp::schema::PluginDecl d(name, doc);
  d.kind = "optimizer";
  return d;
}

// betas and eps, shared by the Adam family.
void adam_moments(vexp::schema::Schema& s, double eps) {
  s.real_list("betas", {0.9, 0.999}, "Decay rates [beta1, beta2] of the first and second moment estimates")
      .at_least(0)
      .below(1);
  s.real("eps", eps, "Added to the denominator (the second moment's square root, bias-corrected)").above(0);
}

}  // namespace

vexp::schema::PluginDecl sgd_declaration() {
  auto d = optimizer("sgd", "SGD with momentum, torch.optim.SGD's update rule (L2 weight decay added to the gradient, "
                            "buf = m * buf + g, first step buf = g); Nesterov; LARS");
  // The order is the one [optim] had when these were built-in keys (resolved.toml and
  // the recipe hash of every SGD run stay as they were); no key may be added here
  // without changing the resolved recipe of every SGD run.
  d.schema.boolean("lars", false, "LARS: per-layer trust ratio eta * ‖w‖ / (‖g‖ + wd * ‖w‖)");
  d.schema.real("lars_eta", 0.001, "LARS trust coefficient").above(0);
  d.schema.real("momentum", 0.9, "SGD momentum").range(0, 0.999999);
  d.schema.boolean("nesterov", false, "Nesterov momentum");
  return d;
}

vexp::schema::PluginDecl adamw_declaration() {
  auto d = optimizer("adamw", "Adam with decoupled weight decay (Loshchilov & Hutter), torch.optim.AdamW's update "
                              "rule: w -= lr * wd * w, bias-corrected moments, w -= lr * m / (sqrt(v) + eps)");
  adam_moments(d.schema, 1e-8);
  d.schema.boolean("amsgrad", false, "AMSGrad: the running maximum of the second moment in the denominator");
  return d;
}

vexp::schema::PluginDecl lamb_declaration() {
  auto d = optimizer("lamb", "LAMB (You et al. 2019), as timm's Lamb / NVIDIA's FusedLAMB: Adam moments, update u = "
                             "m / (sqrt(v) + eps) + wd * w, w -= lr * ‖w‖ / ‖u‖ * u per tensor (ratio 1 when a norm "
                             "is 0)");
  adam_moments(d.schema, 1e-6);
  d.schema.boolean("bias_correction", true, "Bias-correct the moments (as Adam)");
  d.schema.boolean("always_adapt", false,
                   "Trust ratio on every tensor; false: only where the group's weight decay is not 0 (timm, NVIDIA)");
  d.schema.boolean("trust_clip", false, "Clip the trust ratio at 1 (LAMBC)");
  return d;
}

}  // namespace vexp_optimizers
