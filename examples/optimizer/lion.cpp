// lion: an example optimizer plugin built outside vexp's tree (docs/writing-a-plugin.md,
// "Walk-through: an optimizer").
//
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms",
// arXiv:2302.06675). One momentum m per parameter; for a parameter w
// with gradient g, at its group's learning rate lr (the scheduled rate times the
// group's lr_mult) and weight decay wd:
//   w <- w * (1 - lr * wd)                       decoupled weight decay, first
//   w <- w - lr * sign(b1 * m + (1 - b1) * g)    the update: a sign, every element +-lr
//   m <- b2 * m + (1 - b2) * g                   the momentum, with the other beta
// the operations of the paper's pseudo-code and of lucidrains' lion-pytorch, in that
// order. The momentum starts at zero on a parameter's first step; it is the state a
// checkpoint keeps, as "exp_avg/<parameter name>".
//
// Everything around the update is the host's (vexp/optimizer.hpp): the schedule, the
// parameter groups, averaging and clipping the gradients, zeroing them afterwards.
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>          // tensor ops; in this .cpp only, never in a header
#include <c10/core/GradMode.h>  // c10::NoGradGuard

#include "vexp/optimizer.hpp"  // vexp::Optimizer, vexp::ParamGroup
#include "vexp/registrar.hpp"  // VEXP_PLUGIN, vexp::Registrar, vexp::Params

namespace {

const std::string kSlot = "exp_avg/";  // state names: "exp_avg/<parameter name>"

std::string shape_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

class Lion final : public vexp::Optimizer {
 public:
  explicit Lion(const vexp::Params& p) {
    // The schema checked each element's range; the count is ours to check. The message
    // starts with the key, and says where [optim] is (a factory error ends the run).
    const std::vector<double> betas = p.f64_list("betas");
    if (betas.size() != 2)
      throw std::invalid_argument("betas: expected two numbers [beta1, beta2], got " +
                                  std::to_string(betas.size()) +
                                  (p.owner().known() ? " ([optim] at " + p.owner().str() + ")" : ""));
    beta1_ = betas[0];
    beta2_ = betas[1];
  }

  // Once, before the first step and before load_state: index the parameters by name
  // (load_state places each saved momentum beside its parameter), then keep the groups.
  void set_groups(std::vector<vexp::ParamGroup> groups) override {
    by_name_.clear();
    for (const auto& g : groups)
      for (size_t i = 0; i < g.params.size() && i < g.names.size(); ++i) by_name_[g.names[i]] = g.params[i];
    Optimizer::set_groups(std::move(groups));
  }

  void step(double lr) override {
    c10::NoGradGuard no_grad;  // the host calls step() under no-grad already; cheap to be sure
    for (auto& g : groups_) {
      const double group_lr = lr * g.lr_mult;
      for (size_t i = 0; i < g.params.size(); ++i) {
        at::Tensor& w = g.params[i];
        const at::Tensor& grad = w.grad();
        if (!grad.defined()) continue;  // no gradient this step: neither moved nor its momentum
        at::Tensor& m = momentum(g.names[i], w);
        if (g.weight_decay != 0) w.mul_(1 - group_lr * g.weight_decay);
        w.add_(m.mul(beta1_).add_(grad, 1 - beta1_).sign_(), -group_lr);
        m.mul_(beta2_).add_(grad, 1 - beta2_);
      }
    }
  }

  // The momentum buffers themselves (the host only reads them, or overwrites them in
  // place with rank 0's before handing them back to load_state).
  std::map<std::string, at::Tensor> state() const override {
    std::map<std::string, at::Tensor> out;
    for (const auto& [name, m] : momentum_) out[kSlot + name] = m;
    return out;
  }

  // From a checkpoint: contiguous CPU copies, each placed beside its parameter (device,
  // dtype, memory format). Replaces the whole state; anything else is refused by name.
  void load_state(const std::map<std::string, at::Tensor>& state) override {
    std::map<std::string, at::Tensor> loaded;
    for (const auto& [key, saved] : state) {
      if (key.compare(0, kSlot.size(), kSlot) != 0)
        throw std::runtime_error("lion: optimizer state '" + key +
                                 "' is not Lion's (it keeps exp_avg/<parameter>): a checkpoint of another optimizer?");
      const std::string name = key.substr(kSlot.size());
      const auto it = by_name_.find(name);
      if (it == by_name_.end())
        throw std::runtime_error("lion: optimizer state '" + key + "' names no trainable parameter of this model");
      if (!it->second.sizes().equals(saved.sizes()))
        throw std::runtime_error("lion: optimizer state '" + key + "' has shape " + shape_text(saved) +
                                 " but the parameter has " + shape_text(it->second));
      loaded[name] = at::empty_like(it->second).copy_(saved);
    }
    momentum_ = std::move(loaded);
  }

 private:
  // The parameter's momentum, zeros beside it (same device, dtype, layout) on its first step.
  at::Tensor& momentum(const std::string& name, const at::Tensor& w) {
    auto it = momentum_.find(name);
    if (it == momentum_.end()) it = momentum_.emplace(name, at::zeros_like(w, at::MemoryFormat::Preserve)).first;
    return it->second;
  }

  double beta1_ = 0.9, beta2_ = 0.99;
  std::map<std::string, at::Tensor> by_name_;   // parameter name -> the model's tensor
  std::map<std::string, at::Tensor> momentum_;  // parameter name -> m
};

}  // namespace

VEXP_PLUGIN("lion", "0.1.0") {
  vexp::PluginDecl d("lion",
      "Lion (Chen et al. 2023): w -= lr * (sign(b1 * m + (1 - b1) * g) + wd * w), m = b2 * m + (1 - b2) * g");
  d.schema.real_list("betas", {0.9, 0.99}, "[beta1, beta2]: beta1 blends momentum and gradient in the update, beta2 "
                                           "decays the momentum")
      .at_least(0)
      .below(1);
  registrar.add_optimizer(std::move(d), [](const vexp::Params& p) { return std::make_shared<Lion>(p); });
}
