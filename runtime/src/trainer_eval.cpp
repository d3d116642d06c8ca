// Evaluation on the validation split: every test view of every clip, logits
// averaged over the views, top-1 / top-5 and the loss.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "trainer_parts.hpp"

namespace vexp::trainer {

const char* const kDivergenceAdvice = " (lower optim.lr, add warmup, or set optim.clip_grad_norm)";

namespace {

bool finite_eval(const EvalResult& e) { return std::isfinite(e.top1) && std::isfinite(e.top5) && std::isfinite(e.loss); }

}  // namespace

EvalResult evaluate(ModelGraph& model, const Dataset& data, int64_t batch, int64_t classes, const LoaderOptions& lo,
                    const c10::Device& device, Precision precision) {
  model.eval();
  c10::NoGradGuard no_grad;
  EvalResult r;
  const int64_t n = data.size(Split::Val);
  const int64_t k = std::min<int64_t>(5, classes > 0 ? classes : 5);
  double correct1 = 0, correct5 = 0, loss_sum = 0;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start < n; start += batch) {
    batches.emplace_back();
    for (int64_t i = start; i < std::min(n, start + batch); ++i) batches.back().push_back(i);
  }
  // Multi-view testing: the logits of every view (clip x crop) are averaged.
  const int64_t views = data.views(Split::Val);
  std::vector<at::Tensor> logit_sum(batches.size());
  std::vector<at::Tensor> labels(batches.size());
  for (int64_t v = 0; v < views; ++v) {
    LoaderOptions o = lo;
    o.split = Split::Val;
    o.seed = 0;
    o.view = v;
    Loader loader(data, batches, o);
    DeviceFeeder feeder(device);
    Batch next;
    if (loader.next(next)) feeder.put(std::move(next));
    for (size_t i = 0; !feeder.empty(); ++i) {
      Batch b = feeder.take();
      if (loader.next(next)) feeder.put(std::move(next));  // its copy overlaps this forward
      at::Tensor logits;
      {
        AutocastScope autocast(device.type(), precision);
        logits = model.forward(b.clips).to(at::kFloat);
      }
      logit_sum[i] = v == 0 ? logits : logit_sum[i] + logits;
      labels[i] = b.labels;
    }
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    at::Tensor logits = views > 1 ? logit_sum[i] / static_cast<double>(views) : logit_sum[i];
    const double count = static_cast<double>(batches[i].size());
    loss_sum += at::cross_entropy_loss(logits, labels[i]).item<double>() * count;
    at::Tensor topk = std::get<1>(logits.topk(std::min<int64_t>(k, logits.size(1)), 1));
    at::Tensor hit = topk.eq(labels[i].unsqueeze(1));
    correct1 += hit.select(1, 0).sum().item<double>();
    correct5 += hit.any(1).sum().item<double>();
  }
  model.train();
  r.clips = n;
  if (n > 0) {
    r.top1 = correct1 / static_cast<double>(n);
    r.top5 = correct5 / static_cast<double>(n);
    r.loss = loss_sum / static_cast<double>(n);
  }
  return r;
}

namespace {

// The run's validation protocol on the model as it is: the one evaluation of the
// trained weights (evaluate_after) and of a hook's (evaluate_weights).
EvalResult evaluate_run_model(Run& r) {
  const int64_t eval_batch = r.plan.run.eval_batch > 0 ? r.plan.run.eval_batch : r.dp.per_gpu;
  return evaluate(*r.model, *r.data, eval_batch, r.plan.data_facts.classes, r.loader_opts, r.exec.device,
                  r.exec.precision);
}

}  // namespace

EvalResult evaluate_after(Run& r, int64_t done_epochs) {
  EvalResult e = evaluate_run_model(r);
  if (r.faults.hit("nan_val", done_epochs, r.rank)) e.loss = std::numeric_limits<double>::quiet_NaN();
  return e;
}

EvalResult evaluate_weights(Run& r, const std::map<std::string, at::Tensor>& weights) {
  c10::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> mine;
  for (const auto& p : r.model->named_parameters(true)) mine[p.key()] = p.value();
  for (const auto& b : r.model->named_buffers(true)) mine[b.key()] = b.value();
  for (const auto& [k, w] : weights) {
    auto it = mine.find(k);
    if (it == mine.end()) throw std::invalid_argument("cannot evaluate weights with '" + k + "': the model has no such tensor");
    if (!it->second.sizes().equals(w.sizes()))
      throw std::invalid_argument("cannot evaluate weights with '" + k + "': another shape than the model's");
  }
  // The model's own tensors aside, the given ones in their place (on the model's
  // device and in its layout), the evaluation, the own ones back.
  std::vector<std::pair<at::Tensor, at::Tensor>> kept;
  kept.reserve(weights.size());
  for (const auto& [k, w] : weights) {
    at::Tensor& t = mine.at(k);
    kept.emplace_back(t, t.clone());
    t.copy_(w);
  }
  struct PutBack {
    std::vector<std::pair<at::Tensor, at::Tensor>>& kept;
    ~PutBack() {
      c10::NoGradGuard no_grad;
      for (auto& [t, own] : kept) t.copy_(own);
    }
  } put_back{kept};
  return evaluate_run_model(r);
}

void check_eval(Run& r, const EvalResult& e, int64_t done_epochs) {
  if (finite_eval(e)) return;
  r.progress->end_bar();
  const bool loss_bad = !std::isfinite(e.loss);
  const double v = loss_bad ? e.loss : !std::isfinite(e.top1) ? e.top1 : e.top5;
  throw DivergedError(std::string(loss_bad ? "the validation loss" : "validation top-1/top-5") + " became " +
                      (std::isnan(v) ? "NaN" : "infinite") + " after epoch " + std::to_string(done_epochs) +
                      last_good_checkpoint(r.ckpt_dir) + kDivergenceAdvice);
}

}  // namespace vexp::trainer
