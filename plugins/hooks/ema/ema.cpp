// hooks/ema: an exponential moving average of the weights (Polyak averaging), as
// timm's ModelEmaV3 keeps it: initialised from the weights when training starts,
// updated after optimizer steps, e <- e + (1 - d) (w - e) (one lerp per tensor);
// the averaged weights are evaluated after every evaluation of the trained ones
// (metrics NAME_top1, NAME_top5, NAME_loss) and written beside every checkpoint
// (checkpoints/epoch_NNNN.NAME.pt). The averages are the hook's state, kept in the
// checkpoint: a resumed run continues them bit for bit. README.md says the rest.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "vexp/hook.hpp"
#include "vexp/registrar.hpp"

namespace vexp_ema {

struct Settings {
  double decay = 0.9998;
  int64_t every = 1;
  int64_t start_step = 0;
  bool warmup = false;
  double warmup_gamma = 1.0, warmup_power = 2.0 / 3.0;
  bool average_buffers = true;  // buffers = "average" (floating ones; others are copied) or "copy"
  bool evaluate = true;
  std::string name = "ema";
};

// The decay of the update after global step `step` (from 1): timm's
// ModelEmaV3.get_decay with update_after_step = start_step. The first update after
// start_step copies the weights (0); with warmup the decay ramps up as
// 1 - (1 + n / gamma)^-power, never above `decay`.
double decay_at(const Settings& s, int64_t step) {
  const int64_t n = step - s.start_step - 1;
  if (n <= 0) return 0.0;
  if (!s.warmup) return s.decay;
  const double ramp = 1.0 - std::pow(1.0 + static_cast<double>(n) / s.warmup_gamma, -s.warmup_power);
  return std::max(0.0, std::min(ramp, s.decay));
}

bool good_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

class Ema final : public vexp::Hook {
 public:
  explicit Ema(Settings s) : s_(std::move(s)) {}

  void start(const vexp::HookContext& ctx) override {
    c10::NoGradGuard no_grad;
    std::map<std::string, at::Tensor> now = tensors_of(*ctx.model);
    if (avg_.empty()) {
      // A new run (or a checkpoint without this hook's state): the weights as they start.
      for (const auto& [k, t] : now) avg_[k] = {t.detach().clone(), is_param_.at(k)};
      return;
    }
    // Restored by load_state: the same names and shapes as the model, on its device
    // and in its layout (checkpoints hold contiguous CPU copies).
    for (const auto& [k, t] : now) {
      auto it = avg_.find(k);
      if (it == avg_.end())
        throw std::runtime_error("the checkpoint's averaged weights lack the model's '" + k + "'");
      if (!it->second.tensor.sizes().equals(t.sizes()))
        throw std::runtime_error("the checkpoint's averaged '" + k + "' has another shape than the model's");
      it->second = {at::empty_like(t).copy_(it->second.tensor), is_param_.at(k)};
    }
    if (avg_.size() != now.size())
      for (const auto& [k, e] : avg_)
        if (!now.count(k)) throw std::runtime_error("the checkpoint's averaged weights hold '" + k + "', which the model has not");
  }

  void after_step(const vexp::HookContext& ctx) override {
    if (ctx.step % s_.every != 0) return;
    update(*ctx.model, decay_at(s_, ctx.step));
  }

  void after_eval(const vexp::HookContext& ctx) override {
    if (!s_.evaluate) return;
    const std::map<std::string, double> m = ctx.evaluate(weights());
    ctx.add_metric(s_.name + "_top1", m.at("top1"));
    ctx.add_metric(s_.name + "_top5", m.at("top5"));
    ctx.add_metric(s_.name + "_loss", m.at("val_loss"));
  }

  void at_checkpoint(const vexp::HookContext& ctx) override { ctx.save_weights(s_.name, weights()); }

  std::map<std::string, at::Tensor> state() const override { return weights(); }
  void load_state(const std::map<std::string, at::Tensor>& state) override {
    avg_.clear();
    for (const auto& [k, t] : state) avg_[k] = {t, false};
  }

  // The update with decay `d` (0: the weights themselves).
  void update(const torch::nn::Module& model, double d) {
    c10::NoGradGuard no_grad;
    for (const auto& [k, w] : tensors_of(model)) {
      auto it = avg_.find(k);
      if (it == avg_.end()) throw std::logic_error("ema: the model's '" + k + "' appeared after the start");
      at::Tensor& e = it->second.tensor;
      const bool average = it->second.param || (s_.average_buffers && at::isFloatingType(w.scalar_type()));
      if (d == 0.0 || !average)
        e.copy_(w);
      else
        e.lerp_(w, 1.0 - d);
    }
  }

 private:
  struct Avg {
    at::Tensor tensor;
    bool param = false;
  };

  // Parameters and buffers by name (recording which are parameters).
  std::map<std::string, at::Tensor> tensors_of(const torch::nn::Module& model) {
    std::map<std::string, at::Tensor> out;
    for (const auto& p : model.named_parameters(true)) {
      out[p.key()] = p.value();
      is_param_[p.key()] = true;
    }
    for (const auto& b : model.named_buffers(true)) {
      out[b.key()] = b.value();
      is_param_.emplace(b.key(), false);
    }
    return out;
  }

  std::map<std::string, at::Tensor> weights() const {
    std::map<std::string, at::Tensor> out;
    for (const auto& [k, a] : avg_) out[k] = a.tensor;
    return out;
  }

  Settings s_;
  std::map<std::string, Avg> avg_;
  std::map<std::string, bool> is_param_;
};

Settings settings_of(const vexp::Params& p) {
  Settings s;
  s.decay = p.f64("decay");
  s.every = p.i64("every");
  s.start_step = p.i64("start_step");
  s.warmup = p.flag("warmup");
  s.warmup_gamma = p.f64("warmup_gamma");
  s.warmup_power = p.f64("warmup_power");
  s.average_buffers = p.str("buffers") == "average";
  s.evaluate = p.flag("evaluate");
  s.name = p.str("name");
  if (!good_name(s.name))
    throw std::invalid_argument("name: '" + s.name +
                                "' is not a name of letters, digits and '_' (at most 64): it names the metrics "
                                "(NAME_top1) and the weights files (epoch_NNNN.NAME.pt)");
  return s;
}

}  // namespace vexp_ema

VEXP_PLUGIN("hook_ema", "0.1.0") {
  vexp::PluginDecl d("ema",
      "Exponential moving average of the weights (timm ModelEmaV3): evaluated as NAME_top1/top5/loss after every "
      "evaluation, saved beside every checkpoint as epoch_NNNN.NAME.pt");
  d.schema.real("decay", 0.9998, "Decay per update: e <- decay * e + (1 - decay) * w").at_least(0.0).below(1.0);
  d.schema.integer("every", 1, "Update after every N-th optimizer step (global step % N == 0), with the same decay")
      .at_least(1);
  d.schema.integer("start_step", 0, "Updates after global steps up to start_step + 1 copy the weights; averaging starts after it")
      .at_least(0);
  d.schema.boolean("warmup", false, "Ramp the decay up as 1 - (1 + n / warmup_gamma)^-warmup_power (n: steps after start_step + 1), at most decay");
  d.schema.real("warmup_gamma", 1.0, "Warmup: steps scale of the ramp").above(0.0);
  d.schema.real("warmup_power", 2.0 / 3.0, "Warmup: exponent of the ramp (2/3 for runs of ~1e5 steps and more, 3/4 for shorter)")
      .above(0.0);
  d.schema.text("buffers", "average", "BatchNorm statistics and other buffers: average (floating ones; integer ones copied) or copy")
      .one_of({vexp::schema::Value("average"), vexp::schema::Value("copy")});
  d.schema.boolean("evaluate", true, "Evaluate the averaged weights after every evaluation of the trained ones");
  d.schema.text("name", "ema", "Names the metrics (NAME_top1, NAME_top5, NAME_loss) and files (epoch_NNNN.NAME.pt): letters, digits, '_'");
  registrar.add_hook(std::move(d), [](const vexp::Params& p) { return std::make_shared<vexp_ema::Ema>(vexp_ema::settings_of(p)); });
}
