#include "vexp/runtime/grad_profile.hpp"

#include <unordered_map>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "vexp/flops.hpp"
#include "vexp/runtime/graph.hpp"

namespace vexp {

namespace {

// The attribution in progress on this thread: every ATen call that takes a
// parameter makes its parameters "current"; the MACs a layer adds after the call
// (its counter increments come after the op returns) are booked to them when the
// next call starts, or at the end.
struct Attribution {
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  const std::vector<int64_t>* numels = nullptr;
  std::vector<double>* macs = nullptr;
  const FlopCounter* counter = nullptr;
  double booked = 0;
  std::vector<size_t> current;

  void flush() {
    const double now = counter->macs();
    const double delta = now - booked;
    booked = now;
    if (delta <= 0 || current.empty()) return;
    double total = 0;
    for (size_t k : current) total += static_cast<double>((*numels)[k]);
    for (size_t k : current) (*macs)[k] += delta * static_cast<double>((*numels)[k]) / total;
  }
};
thread_local Attribution* active = nullptr;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  Attribution* a = active;
  if (!a) return nullptr;
  a->flush();
  std::vector<size_t> used;
  for (const c10::IValue& v : fn.inputs()) {
    if (!v.isTensor()) continue;
    auto it = a->index.find(v.toTensor().unsafeGetTensorImpl());
    if (it != a->index.end()) used.push_back(it->second);
  }
  if (!used.empty()) a->current = std::move(used);
  return nullptr;
}

}  // namespace

GradientProfile gradient_profile(ModelGraph& model, const dsl::Shape& clip) {
  GradientProfile g;
  std::vector<at::Tensor> params;
  for (const auto& p : model.named_parameters(true)) {
    if (!p.value().requires_grad()) continue;
    g.names.push_back(p.key());
    g.numels.push_back(p.value().numel());
    params.push_back(p.value());
  }
  g.macs.assign(params.size(), 0.0);
  const bool was_training = model.is_training();
  model.eval();
  {
    at::NoGradGuard no_grad;
    std::vector<int64_t> sizes{1};
    sizes.insert(sizes.end(), clip.begin(), clip.end());
    const at::Tensor input = at::zeros(sizes);
    FlopCounter counter;
    Attribution a;
    for (size_t k = 0; k < params.size(); ++k) a.index[params[k].unsafeGetTensorImpl()] = k;
    a.numels = &g.numels;
    a.macs = &g.macs;
    a.counter = &counter;
    active = &a;
    const at::CallbackHandle handle =
        at::addThreadLocalCallback(at::RecordFunctionCallback(on_op_start).needsInputs(true));
    try {
      model.forward(input);
    } catch (...) {
      at::removeCallback(handle);
      active = nullptr;
      model.train(was_training);
      throw;
    }
    at::removeCallback(handle);
    a.flush();
    active = nullptr;
    g.macs_per_clip = counter.macs();
  }
  model.train(was_training);
  double attributed = 0;
  for (double m : g.macs) attributed += m;
  g.attributed = attributed > 0;
  if (!g.attributed) {
    double total = 0;
    for (int64_t n : g.numels) total += static_cast<double>(n);
    for (size_t k = 0; k < g.macs.size(); ++k)
      g.macs[k] = total > 0 ? g.macs_per_clip * static_cast<double>(g.numels[k]) / total : 0;
  }
  return g;
}

}  // namespace vexp
