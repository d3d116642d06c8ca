// The loss plugins of library `losses` (README.md): cross_entropy (vexp's default),
// label_smoothing and soft_target_cross_entropy.
#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "vexp/loss.hpp"
#include "vexp/plugin_abi.h"
#include "vexp/registrar.hpp"

namespace {

std::string shape_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// Labels [N] (integral) or soft targets [N, classes] (floating) matching the logits.
bool soft(const char* loss, const at::Tensor& logits, const at::Tensor& target) {
  if (logits.dim() != 2)
    throw std::invalid_argument(std::string("loss '") + loss + "': logits must be [N, classes], got " +
                                shape_text(logits));
  if (target.dim() == 1 && !at::isFloatingType(target.scalar_type()) && target.size(0) == logits.size(0)) return false;
  if (target.dim() == 2 && at::isFloatingType(target.scalar_type()) && target.sizes() == logits.sizes()) return true;
  throw std::invalid_argument(std::string("loss '") + loss + "': the targets " + shape_text(target) +
                              " are neither labels [" + std::to_string(logits.size(0)) +
                              "] nor probabilities of the logits' shape " + shape_text(logits));
}

// torch.nn.functional.cross_entropy(logits, target): labels, or probabilities
// (torch's soft-target form: -sum(target * log_softmax(logits)) averaged over N).
// The labels' case is the call vexp made before plugin ABI 5, bit for bit.
class CrossEntropy : public vexp::Loss {
 public:
  at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) override {
    soft("cross_entropy", logits, target);
    return at::cross_entropy_loss(logits, target);
  }
  bool soft_targets() const override { return true; }
};

// torch.nn.functional.cross_entropy(logits, target, label_smoothing=eps): the
// target becomes (1 - eps) x target + eps / classes (labels one-hot), for labels
// and soft targets alike (with mixup: timm's Mixup(label_smoothing=eps) followed by
// SoftTargetCrossEntropy).
class LabelSmoothing : public vexp::Loss {
 public:
  explicit LabelSmoothing(double eps) : eps_(eps) {}
  at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) override {
    soft("label_smoothing", logits, target);
    return at::cross_entropy_loss(logits, target, {}, at::Reduction::Mean, -100, eps_);
  }
  bool soft_targets() const override { return true; }

 private:
  double eps_;
};

// timm's SoftTargetCrossEntropy: mean over the clips of -sum(target *
// log_softmax(logits)); labels are taken one-hot.
class SoftTargetCrossEntropy : public vexp::Loss {
 public:
  at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) override {
    const at::Tensor t = soft("soft_target_cross_entropy", logits, target)
                             ? target
                             : at::one_hot(target.to(at::kLong), logits.size(1)).to(logits.scalar_type());
    return at::sum(-t * at::log_softmax(logits, -1), -1).mean();
  }
  bool soft_targets() const override { return true; }
};

}  // namespace

VEXP_PLUGIN("losses", "0.1.0") {
  {
    vexp::PluginDecl d("cross_entropy",
        "Cross-entropy of the logits: class labels, or soft targets (mixup, cutmix) as torch's cross_entropy "
        "takes them; the default loss");
    d.kind = "loss";
    registrar.add_loss(std::move(d), [](const vexp::Params&) { return std::make_shared<CrossEntropy>(); });
  }
  {
    vexp::PluginDecl d("label_smoothing",
                       "Cross-entropy against (1 - smoothing) x target + smoothing / classes: torch's "
                       "cross_entropy(label_smoothing=); labels or soft targets");
    d.kind = "loss";
    d.schema.real("smoothing", 0.1, "Probability mass spread evenly over all classes").at_least(0).below(1);
    registrar.add_loss(std::move(d),
                       [](const vexp::Params& p) { return std::make_shared<LabelSmoothing>(p.f64("smoothing")); });
  }
  {
    vexp::PluginDecl d("soft_target_cross_entropy",
        "timm's SoftTargetCrossEntropy: mean over clips of -sum(target * log_softmax(logits)); labels one-hot");
    d.kind = "loss";
    registrar.add_loss(std::move(d), [](const vexp::Params&) { return std::make_shared<SoftTargetCrossEntropy>(); });
  }
}
