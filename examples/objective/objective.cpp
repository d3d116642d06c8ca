// objective: an example library of two training parts built outside vexp's tree
// (docs/writing-a-plugin.md, "Walk-through: a loss and a hook"). One library may
// register plugins of several kinds; this one registers
//
//   loss focal         the focal loss (Lin et al. 2017, "Focal Loss for Dense Object
//                      Detection") over class labels: FL = -(1 - p)^gamma log p, p the
//                      softmax probability of the true class, averaged over the clips.
//                      gamma = 0 is cross-entropy. It takes labels only
//                      (soft_targets() is false): a recipe whose batch transforms make
//                      soft targets (mixup, cutmix) is refused before training.
//   hook best_weights  keeps the weights of the best evaluation so far (by top1, top5
//                      or val_loss) and writes them beside every checkpoint as
//                      checkpoints/epoch_NNNN.NAME.pt, which `vexp predict --weights`
//                      loads; logs NAME_<metric> and NAME_epoch after every evaluation.
//                      The weights and the score are its state: a resumed run goes on
//                      with them, bit for bit.
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>           // tensor ops; in this .cpp only, never in a header
#include <c10/core/GradMode.h>   // c10::NoGradGuard
#include <torch/nn/module.h>     // named_parameters(), named_buffers() of the model

#include "vexp/hook.hpp"       // vexp::Hook, vexp::HookContext
#include "vexp/loss.hpp"       // vexp::Loss
#include "vexp/registrar.hpp"  // VEXP_PLUGIN, vexp::Registrar, vexp::Params

namespace {

// ---- loss focal -------------------------------------------------------------------

class Focal final : public vexp::Loss {
 public:
  explicit Focal(double gamma) : gamma_(gamma) {}

  // logits [N, classes] float32; labels [N] int64. The mean over the N clips.
  at::Tensor forward(const at::Tensor& logits, const at::Tensor& labels) override {
    if (logits.dim() != 2 || labels.dim() != 1 || labels.size(0) != logits.size(0) ||
        at::isFloatingType(labels.scalar_type()))
      throw std::invalid_argument("focal: expects logits [N, classes] and class labels [N], got " +
                                  std::to_string(logits.dim()) + "-d logits and " + std::to_string(labels.dim()) +
                                  "-d targets");
    const at::Tensor logp = at::log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).squeeze(1);
    return (-(1 - logp.exp()).pow(gamma_) * logp).mean();
  }
  bool soft_targets() const override { return false; }  // the default, said: labels only

 private:
  double gamma_;
};

// ---- hook best_weights ---------------------------------------------------------------

class BestWeights final : public vexp::Hook {
 public:
  BestWeights(std::string metric, std::string name)
      : metric_(std::move(metric)), name_(std::move(name)), lower_is_better_(metric_ == "val_loss") {}

  // After every evaluation of the trained weights (every rank alike): a better score
  // (the first one counts as better) copies the model's parameters and buffers.
  void after_eval(const vexp::HookContext& ctx) override {
    const auto it = ctx.metrics.find(metric_);
    if (it == ctx.metrics.end()) throw std::runtime_error("best_weights: the evaluation reported no " + metric_);
    const double score = it->second;
    if (best_epoch_ == 0 || (lower_is_better_ ? score < best_score_ : score > best_score_)) {
      c10::NoGradGuard no_grad;
      weights_.clear();
      for (const auto& p : ctx.model->named_parameters(true)) weights_[p.key()] = p.value().detach().clone();
      for (const auto& b : ctx.model->named_buffers(true)) weights_[b.key()] = b.value().detach().clone();
      best_score_ = score;
      best_epoch_ = ctx.epoch;
    }
    ctx.add_metric(name_ + "_" + metric_, best_score_);  // -> metrics.jsonl, TensorBoard val/NAME_<metric>
    ctx.add_metric(name_ + "_epoch", static_cast<double>(best_epoch_));
  }

  // Beside every checkpoint (a pruned checkpoint takes its file with it, so the newest
  // checkpoint always has the best weights beside it).
  void at_checkpoint(const vexp::HookContext& ctx) override {
    if (!weights_.empty()) ctx.save_weights(name_, weights_);
  }

  // What a checkpoint keeps: the weights ("w/<name>"), the score and its epoch.
  std::map<std::string, at::Tensor> state() const override {
    std::map<std::string, at::Tensor> out;
    if (best_epoch_ == 0) return out;
    for (const auto& [k, t] : weights_) out["w/" + k] = t;
    out["score"] = at::full({}, best_score_, at::kDouble);
    out["epoch"] = at::full({}, best_epoch_, at::kLong);
    return out;
  }
  void load_state(const std::map<std::string, at::Tensor>& state) override {
    weights_.clear();
    best_epoch_ = 0;
    for (const auto& [k, t] : state) {
      if (k.compare(0, 2, "w/") == 0) weights_[k.substr(2)] = t;
      else if (k == "score") best_score_ = t.item<double>();
      else if (k == "epoch") best_epoch_ = t.item<int64_t>();
      else throw std::runtime_error("best_weights: unknown state '" + k + "' in the checkpoint");
    }
  }
  // Back on the model's device (a checkpoint gives CPU copies) once the run starts.
  void start(const vexp::HookContext& ctx) override {
    if (weights_.empty()) return;
    const at::Device device = ctx.model->named_parameters(true).begin()->value().device();
    for (auto& [k, t] : weights_) t = t.to(device);
  }

 private:
  std::string metric_, name_;
  bool lower_is_better_;
  double best_score_ = 0;
  int64_t best_epoch_ = 0;  // 0: nothing evaluated yet
  std::map<std::string, at::Tensor> weights_;
};

}  // namespace

VEXP_PLUGIN("objective", "0.1.0") {
  {
    vexp::PluginDecl d("focal",
        "Focal loss over class labels: -(1 - p)^gamma * log p, p the true class's probability; gamma = 0: cross-entropy");
    d.schema.real("gamma", 2.0, "Focusing exponent: how much well-classified clips are down-weighted").at_least(0.0);
    registrar.add_loss(std::move(d), [](const vexp::Params& p) { return std::make_shared<Focal>(p.f64("gamma")); });
  }
  {
    vexp::PluginDecl d("best_weights",
        "Keeps the weights of the best evaluation so far; writes them beside every checkpoint as epoch_NNNN.NAME.pt");
    d.schema.text("metric", "top1", "The evaluation's figure to rank by (top1, top5: higher is better; val_loss: lower)")
        .one_of({"top1", "top5", "val_loss"});
    d.schema.text("name", "best", "Names the metrics (NAME_<metric>, NAME_epoch) and files (epoch_NNNN.NAME.pt)");
    registrar.add_hook(std::move(d), [](const vexp::Params& p) {
      return std::make_shared<BestWeights>(p.str("metric"), p.str("name"));
    });
  }
}
