// The optimizers plugin: sgd (vexp's SGD since the first release, moved here
// unchanged: every SGD run trains bit for bit as before), adamw (torch.optim.AdamW)
// and lamb (timm's Lamb / NVIDIA's FusedLAMB). Schemas: optimizers_decl.cpp.
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "optimizers_decl.hpp"
#include "vexp/optimizer.hpp"
#include "vexp/registrar.hpp"

namespace vexp_optimizers {

namespace {

// What every optimizer here shares: the parameters by name (for load_state) and
// the placing of a checkpoint's tensor beside its parameter.
class Base : public vexp::Optimizer {
 public:
  explicit Base(std::string name) : name_(std::move(name)) {}

  void set_groups(std::vector<vexp::ParamGroup> groups) override {
    by_name_.clear();
    for (const auto& g : groups) {
      if (g.names.size() != g.params.size())
        throw std::invalid_argument(name_ + ": group '" + g.name + "' has " + std::to_string(g.names.size()) +
                                    " names for " + std::to_string(g.params.size()) + " parameters");
      for (size_t i = 0; i < g.params.size(); ++i)
        if (!by_name_.emplace(g.names[i], g.params[i]).second)
          throw std::invalid_argument(name_ + ": parameter '" + g.names[i] + "' is in two groups");
    }
    Optimizer::set_groups(std::move(groups));
  }

  // Every parameter that has a gradient this step, group by group in order, updated
  // by the optimizer's rule at the group's rate.
  void step(double lr) override {
    c10::NoGradGuard no_grad;
    for (auto& g : groups_)
      for (size_t i = 0; i < g.params.size(); ++i) {
    at::Tensor& p = g.params[i];
    const at::Tensor& grad = p.grad();
    if (grad.defined()) update(g, g.names[i], p, grad, lr * g.lr_mult);
      }
  }

 protected:
  // One parameter's update: `p` in place, from `grad`, at `lr` (the step's rate times
  // the group's lr_mult), with the group's weight decay.
  virtual void update(const vexp::ParamGroup& g, const std::string& name, at::Tensor& p, const at::Tensor& grad,
                      double lr) = 0;

  // "<slot>/<parameter>" -> the parameter's name; throws for a key of another form.
  std::string parameter_of(const std::string& key, const std::string& slot) const {
    const std::string prefix = slot + "/";
    if (key.rfind(prefix, 0) != 0) throw std::runtime_error(unknown(key));
    return key.substr(prefix.size());
  }
  const at::Tensor& parameter(const std::string& name, const std::string& key) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end())
      throw std::runtime_error(name_ + " optimizer state '" + key + "' names no trainable parameter of this model");
    return it->second;
  }
  // A checkpoint's copy of a per-parameter tensor, beside its parameter (device,
  // dtype, and layout: a channels-last weight gets a channels-last buffer).
  at::Tensor place(const std::string& name, const std::string& key, const at::Tensor& v) const {
    const at::Tensor& p = parameter(name, key);
    if (p.sizes() != v.sizes())
      throw std::runtime_error(name_ + " optimizer state '" + key + "' has shape " + sizes_text(v) +
                               " but parameter '" + name + "' has " + sizes_text(p));
    return at::empty_like(p).copy_(v);
  }
  std::string unknown(const std::string& key) const {
    return "'" + key + "' is not state of the " + name_ + " optimizer (a checkpoint of another optimizer?)";
  }
  static std::string sizes_text(const at::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
  }

  std::string name_;
  std::map<std::string, at::Tensor> by_name_;
};

// ---- sgd ----------------------------------------------------------------------
// torch.optim.SGD's rule with L2 weight decay: d = g + wd * w; buf = m * buf + d
// (the first step: buf = d); d = buf, or d + m * buf (Nesterov); w -= lr * d.
// LARS (You et al.): each weight tensor (dim > 1) scales d by eta |w| / (|g| + wd |w|).
// State: the momentum buffers, keyed by the parameter's name (the checkpoints of
// every SGD run since the first release name them so).
class Sgd : public Base {
 public:
  explicit Sgd(const vexp::Params& p)
      : Base("sgd"),
        momentum_coef_(p.f64("momentum")),
        nesterov_(p.flag("nesterov")),
        lars_eta_(p.flag("lars") ? p.f64("lars_eta") : 0.0) {}

  void update(const vexp::ParamGroup& g, const std::string& name, at::Tensor& p, const at::Tensor& grad,
              double lr) override {
    at::Tensor d = g.weight_decay != 0 ? grad.add(p, g.weight_decay) : grad;
    double local = 1.0;
    if (lars_eta_ > 0 && p.dim() > 1) {
      const double wn = p.norm().item<double>(), gn = grad.norm().item<double>();
      if (wn > 0 && gn > 0) local = lars_eta_ * wn / (gn + g.weight_decay * wn);
      if (local != 1.0) d = d.mul(local);
    }
    if (momentum_coef_ != 0) {
      auto it = momentum_.find(name);
      if (it == momentum_.end()) {
        it = momentum_.emplace(name, d.clone()).first;  // first step: buf = d
      } else {
        it->second.mul_(momentum_coef_).add_(d);
      }
      d = nesterov_ ? d.add(it->second, momentum_coef_) : it->second;
    }
    p.add_(d, -lr);
  }

  std::map<std::string, at::Tensor> state() const override { return momentum_; }

  void load_state(const std::map<std::string, at::Tensor>& state) override {
    std::map<std::string, at::Tensor> loaded;
    for (const auto& [k, v] : state) loaded[k] = place(k, k, v);
    momentum_ = std::move(loaded);
  }

 private:
  double momentum_coef_;
  bool nesterov_;
  double lars_eta_;  // 0: no LARS
  std::map<std::string, at::Tensor> momentum_;
};

// ---- the Adam family -------------------------------------------------------------
// Per parameter: the first and second moments (and AMSGrad's maximum) beside it,
// and its own step count (a parameter without a gradient in a step does not count
// it, as torch.optim). State: "exp_avg/<name>", "exp_avg_sq/<name>",
// "max_exp_avg_sq/<name>" (AMSGrad), "step/<name>" (int64, 0-d).
class AdamBase : public Base {
 public:
  AdamBase(std::string name, const vexp::Params& p) : Base(std::move(name)), eps_(p.f64("eps")) {
    const std::vector<double> betas = p.f64_list("betas");
    if (betas.size() != 2)
      throw std::invalid_argument("'betas' in [optim]" + where(p) + ": expected two numbers [beta1, beta2], got " +
                                  std::to_string(betas.size()));
    beta1_ = betas[0];
    beta2_ = betas[1];
  }

  std::map<std::string, at::Tensor> state() const override {
    std::map<std::string, at::Tensor> out;
    for (const auto& [n, s] : slots_) {
      out["exp_avg/" + n] = s.exp_avg;
      out["exp_avg_sq/" + n] = s.exp_avg_sq;
      if (s.max_exp_avg_sq.defined()) out["max_exp_avg_sq/" + n] = s.max_exp_avg_sq;
      // On the parameter's device: a GPU communicator broadcasts it like the moments.
      out["step/" + n] = at::full({}, s.step, s.exp_avg.options().dtype(at::kLong));
    }
    return out;
  }

  void load_state(const std::map<std::string, at::Tensor>& state) override {
    std::map<std::string, Slots> loaded;
    for (const auto& [k, v] : state) {
      const size_t slash = k.find('/');
      const std::string slot = slash == std::string::npos ? k : k.substr(0, slash);
      if (slot == "step") {
        const std::string n = parameter_of(k, slot);
        parameter(n, k);
        if (v.numel() != 1) throw std::runtime_error(name_ + " optimizer state '" + k + "' is not one number");
        loaded[n].step = v.to(at::kCPU).to(at::kLong).item<int64_t>();
      } else if (slot == "exp_avg") {
        const std::string n = parameter_of(k, slot);
        loaded[n].exp_avg = place(n, k, v);
      } else if (slot == "exp_avg_sq") {
        const std::string n = parameter_of(k, slot);
        loaded[n].exp_avg_sq = place(n, k, v);
      } else if (slot == "max_exp_avg_sq" && amsgrad()) {
        const std::string n = parameter_of(k, slot);
        loaded[n].max_exp_avg_sq = place(n, k, v);
      } else {
        throw std::runtime_error(unknown(k));
      }
    }
    for (const auto& [n, s] : loaded)
      if (!s.exp_avg.defined() || !s.exp_avg_sq.defined() || s.step <= 0 || (amsgrad() && !s.max_exp_avg_sq.defined()))
        throw std::runtime_error(name_ + " optimizer state of parameter '" + n +
                                 "' is incomplete (it needs exp_avg, exp_avg_sq" +
                                 (amsgrad() ? ", max_exp_avg_sq" : "") + " and a step count above 0)");
    slots_ = std::move(loaded);
  }

 protected:
  struct Slots {
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
    int64_t step = 0;
  };
  virtual bool amsgrad() const { return false; }

  // The parameter's moments (made on its first step, zeros beside it), step counted.
  Slots& advance(const std::string& name, const at::Tensor& p) {
    Slots& s = slots_[name];
    if (!s.exp_avg.defined()) {
      s.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
      s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
      if (amsgrad()) s.max_exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
    }
    ++s.step;
    return s;
  }
  static std::string where(const vexp::Params& p) { return p.owner().known() ? " (" + p.owner().str() + ")" : ""; }

  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
  std::map<std::string, Slots> slots_;
};

// ---- adamw ----------------------------------------------------------------------
// torch.optim.AdamW (PyTorch 1.13, single-tensor path), operation for operation:
// w *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)  (AMSGrad: the max of v).
class AdamW : public AdamBase {
 public:
  explicit AdamW(const vexp::Params& p) : AdamBase("adamw", p), amsgrad_(p.flag("amsgrad")) {}

  void update(const vexp::ParamGroup& g, const std::string& name, at::Tensor& p, const at::Tensor& grad,
              double lr) override {
    Slots& s = advance(name, p);
    p.mul_(1 - lr * g.weight_decay);
    s.exp_avg.mul_(beta1_).add_(grad, 1 - beta1_);
    s.exp_avg_sq.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
    const double t = static_cast<double>(s.step);
    const double bias_correction1 = 1 - std::pow(beta1_, t);
    const double bias_correction2 = 1 - std::pow(beta2_, t);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    at::Tensor denom;
    if (amsgrad_) {
      at::maximum_out(s.max_exp_avg_sq, s.max_exp_avg_sq, s.exp_avg_sq);
      denom = (s.max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps_);
    } else {
      denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps_);
    }
    p.addcdiv_(s.exp_avg, denom, -step_size);
  }

 protected:
  bool amsgrad() const override { return amsgrad_; }

 private:
  bool amsgrad_;
};

// ---- lamb -----------------------------------------------------------------------
// timm's Lamb (and NVIDIA's FusedLAMB) without their own gradient clipping (the
// host's optim.clip_grad_norm is the run's): Adam's moments (bias-corrected unless
// bias_correction = false), u = m / (sqrt(v) + eps) + wd w, then per tensor the
// trust ratio r = |w| / |u| (1 when either norm is 0; at most 1 with trust_clip),
// applied where the group's weight decay is not 0 or always_adapt; w -= lr r u.
class Lamb : public AdamBase {
 public:
  explicit Lamb(const vexp::Params& p)
      : AdamBase("lamb", p),
        bias_correction_(p.flag("bias_correction")),
        always_adapt_(p.flag("always_adapt")),
        trust_clip_(p.flag("trust_clip")) {}

  void update(const vexp::ParamGroup& g, const std::string& name, at::Tensor& p, const at::Tensor& grad,
              double lr) override {
    const double wd = g.weight_decay;
    Slots& s = advance(name, p);
    const double t = static_cast<double>(s.step);
    const double bias_correction1 = bias_correction_ ? 1 - std::pow(beta1_, t) : 1.0;
    const double bias_correction2 = bias_correction_ ? 1 - std::pow(beta2_, t) : 1.0;
    s.exp_avg.mul_(beta1_).add_(grad, 1 - beta1_);
    s.exp_avg_sq.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
    at::Tensor denom = (s.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(eps_);
    at::Tensor u = (s.exp_avg / bias_correction1).div_(denom);
    if (wd != 0) u.add_(p, wd);
    if (wd != 0 || always_adapt_) {
      // On the device, without a host sync: where(|w| > 0, where(|u| > 0, |w| / |u|, 1), 1).
      const at::Tensor w_norm = p.norm(2), u_norm = u.norm(2);
      const at::Tensor one = at::ones_like(w_norm);
      at::Tensor ratio = at::where(w_norm > 0, at::where(u_norm > 0, w_norm / u_norm, one), one);
      if (trust_clip_) ratio = at::minimum(ratio, one);
      u.mul_(ratio);
    }
    p.add_(u, -lr);
  }

 private:
  bool bias_correction_, always_adapt_, trust_clip_;
};

}  // namespace

}  // namespace vexp_optimizers

VEXP_PLUGIN("optimizers", "0.1.0") {
  using namespace vexp_optimizers;
  registrar.add_optimizer(sgd_declaration(), [](const vexp::Params& p) { return std::make_shared<Sgd>(p); });
  registrar.add_optimizer(adamw_declaration(), [](const vexp::Params& p) { return std::make_shared<AdamW>(p); });
  registrar.add_optimizer(lamb_declaration(), [](const vexp::Params& p) { return std::make_shared<Lamb>(p); });
}
