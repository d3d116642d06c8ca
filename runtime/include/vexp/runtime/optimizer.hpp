// SGD with momentum (optionally Nesterov), decoupled per-group lr multipliers
// and weight decay, matching torch.optim.SGD's update rule.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

struct ParamGroup {
  std::string name;        // "decay", "no_decay", "fc_weight", "fc_bias"
  double lr_mult = 1.0;
  double weight_decay = 0.0;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
};

class Sgd {
 public:
  Sgd(std::vector<ParamGroup> groups, double momentum, bool nesterov);
  void step(double lr);
  // LARS (You et al.): each weight tensor (dim > 1) gets lr x eta |w| / (|g| + wd |w|).
  void set_lars(double eta) { lars_eta_ = eta; }
  double lars_eta() const { return lars_eta_; }  // 0: no LARS
  void zero_grad();
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Momentum buffers by parameter name (for checkpoints).
  std::map<std::string, at::Tensor>& state() { return momentum_; }

 private:
  std::vector<ParamGroup> groups_;
  double momentum_coef_;
  bool nesterov_;
  double lars_eta_ = 0;
  std::map<std::string, at::Tensor> momentum_;
};

// Global L2 norm of all gradients; scales them down to max_norm when above it.
// Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace vexp
