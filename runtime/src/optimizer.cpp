#include "vexp/runtime/optimizer.hpp"

#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace vexp {

Sgd::Sgd(std::vector<ParamGroup> groups, double momentum, bool nesterov)
    : groups_(std::move(groups)), momentum_coef_(momentum), nesterov_(nesterov) {}

void Sgd::step(double lr) {
  c10::NoGradGuard no_grad;
  for (auto& g : groups_) {
    const double group_lr = lr * g.lr_mult;
    for (size_t i = 0; i < g.params.size(); ++i) {
      at::Tensor& p = g.params[i];
      const at::Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      at::Tensor d = g.weight_decay != 0 ? grad.add(p, g.weight_decay) : grad;
      double local = 1.0;
      if (lars_eta_ > 0 && p.dim() > 1) {
        const double wn = p.norm().item<double>(), gn = grad.norm().item<double>();
        if (wn > 0 && gn > 0) local = lars_eta_ * wn / (gn + g.weight_decay * wn);
        if (local != 1.0) d = d.mul(local);
      }
      if (momentum_coef_ != 0) {
        auto it = momentum_.find(g.names[i]);
        if (it == momentum_.end()) {
          it = momentum_.emplace(g.names[i], d.clone()).first;  // first step: buf = d
        } else {
          it->second.mul_(momentum_coef_).add_(d);
        }
        d = nesterov_ ? d.add(it->second, momentum_coef_) : it->second;
      }
      p.add_(d, -group_lr);
    }
  }
}

void Sgd::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params)
      if (p.grad().defined()) p.mutable_grad().zero_();
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  double total = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    double n = p.grad().norm().item<double>();
    total += n * n;
  }
  total = std::sqrt(total);
  if (max_norm > 0 && total > max_norm) {
    double scale = max_norm / (total + 1e-6);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return total;
}

}  // namespace vexp
