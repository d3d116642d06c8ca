// The training objective (objective.hpp): the loss plugin and the batch
// transforms, as TrainStep calls them.
#include "vexp/runtime/objective.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "seed.hpp"
#include "vexp/base/error.hpp"
#include "vexp/dsl/diagnostics.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/loss.hpp"
#include "vexp/rng.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/plugin_host.hpp"
#include "vexp/transform.hpp"

namespace vexp {

namespace {

// Batch transforms' generators: purpose = this tag ^ (micro-batch << 16 | place in
// the list), never a clip transform's (those are keyed by epoch and clip).
constexpr uint64_t kBatchTransformTag = 0xBA7C'4000'0000'0000ULL;

std::string loss_of(const dsl::RecipePlan& plan) { return plan.loss.type.empty() ? kDefaultLoss : plan.loss.type; }

// The class count soft targets have: the dataset's, else the model output's width.
int64_t target_classes(const dsl::RecipePlan& plan) {
  if (plan.data_facts.classes > 0) return plan.data_facts.classes;
  for (const auto& n : plan.nodes)
    if (n.id == plan.model_output && n.output_shape.size() == 2 && n.output_shape[1] > 0) return n.output_shape[1];
  return 0;
}

std::shared_ptr<Loss> make_loss(const dsl::RecipePlan& plan, const PluginHost& host) {
  const std::string name = loss_of(plan);
  if (plan.loss.type.empty() && !host.find("loss", name))
    throw PluginError("the default loss '" + name + "' is not installed (the plugin library 'losses'; vexp plugins "
                      "lists what is): install it, or name a loss in the recipe's [loss] type");
  return host.make<Loss>("loss", name, plan.loss.type.empty() ? Params{} : plan.loss.params);
}

// Where and why the recipe's objective cannot train, or nothing.
std::optional<std::pair<dsl::Loc, std::string>> problem(const dsl::RecipePlan& plan, const Loss& loss) {
  if (plan.batch_transforms.empty()) return std::nullopt;
  const dsl::PluginUse& first = plan.batch_transforms.front();
  if (!loss.soft_targets()) {
    std::string at = plan.loss.loc.known() ? " (" + plan.loss.loc.str() + ")" : " (the default, no [loss] in the recipe)";
    return std::make_pair(first.loc, "batch transform '" + first.type +
                                         "' makes soft targets [N, classes] and loss '" + loss_of(plan) + "'" + at +
                                         " takes class labels only (its soft_targets() is false): choose a loss that "
                                         "takes soft targets, such as cross_entropy, label_smoothing or "
                                         "soft_target_cross_entropy");
  }
  if (target_classes(plan) <= 0)
    return std::make_pair(first.loc, "batch transform '" + first.type +
                                         "' needs the dataset's class count for its soft targets, and neither the "
                                         "dataset nor the model output gives one");
  return std::nullopt;
}

}  // namespace

Objective::Objective(const dsl::RecipePlan& plan, const PluginHost& host)
    : seed_(static_cast<uint64_t>(plan.run.seed)), loss_name_(loss_of(plan)) {
  loss_ = make_loss(plan, host);
  if (auto p = problem(plan, *loss_)) throw base::invalid(p->first.str() + ": " + p->second);
  for (const dsl::PluginUse& u : plan.batch_transforms)
    batch_.push_back(Use{u.type, host.make<BatchTransform>("batch_transform", u.type, u.params)});
  if (!batch_.empty()) classes_ = target_classes(plan);
}

Objective::~Objective() = default;

void Objective::set_schedule(int64_t total_steps, int64_t global_batch, int64_t train_size) {
  total_steps_ = total_steps;
  global_batch_ = global_batch;
  train_size_ = train_size;
}

void Objective::transform(Batch& b, int64_t step, int64_t micro_batch) const {
  if (batch_.empty()) return;
  at::Tensor targets = b.targets.defined()
                           ? b.targets.to(at::kFloat)
                           : at::one_hot(b.labels.to(at::kLong), classes_).to(at::kFloat);
  BatchContext ctx;
  ctx.step = step;
  ctx.steps = total_steps_;
  ctx.epoch = train_size_ > 0 ? static_cast<double>(step) * static_cast<double>(global_batch_) /
                                    static_cast<double>(train_size_)
                              : 0.0;
  ctx.micro_batch = micro_batch;
  const int64_t n = b.clips.size(0);
  for (size_t i = 0; i < batch_.size(); ++i) {
    Rng rng(seed_, static_cast<uint64_t>(step),
            kBatchTransformTag ^ (static_cast<uint64_t>(micro_batch) << 16) ^ static_cast<uint64_t>(i));
    batch_[i].transform->apply(b.clips, targets, rng, ctx);
    if (!targets.defined() || targets.dim() != 2 || targets.size(0) != n || targets.size(1) != classes_ ||
        !b.clips.defined() || b.clips.size(0) != n)
      throw PluginError("batch transform '" + batch_[i].name + "' returned clips or targets of another shape " +
                        "(targets must stay [" + std::to_string(n) + ", " + std::to_string(classes_) + "])");
  }
  b.targets = std::move(targets);
}

at::Tensor Objective::loss(const at::Tensor& logits, const Batch& b) const {
  return loss_->forward(logits, b.targets.defined() ? b.targets : b.labels);
}

void check_objective(const dsl::RecipePlan& plan, const PluginHost& host, dsl::Diagnostics& diags) {
  // A recipe without [loss] trains with the default, which an installation may lack.
  if (plan.loss.type.empty() && !host.find("loss", kDefaultLoss)) {
    diags.error(dsl::Loc{}, "the recipe has no [loss], and the default loss '" + std::string(kDefaultLoss) +
                                "' is not installed (the plugin library 'losses'; vexp plugins lists what is): "
                                "install it, or name a loss in [loss] type");
    return;
  }
  // Made as the rig makes it: what its factory refuses is an error at [loss].
  std::shared_ptr<Loss> loss;
  try {
    loss = make_loss(plan, host);
  } catch (const std::exception& e) {
    diags.error(plan.loss.loc.known() ? plan.loss.loc
                                      : (plan.batch_transforms.empty() ? dsl::Loc{} : plan.batch_transforms.front().loc),
                e.what());
    return;
  }
  if (auto p = problem(plan, *loss)) diags.error(p->first, p->second);
}

}  // namespace vexp
