#include "graph.hpp"

#include <map>
#include <stdexcept>

#include <ATen/ATen.h>

#include "vexp/flops.hpp"

namespace vexp {

ModelGraph::ModelGraph(const dsl::RecipePlan& plan, const PluginHost& host) {
  std::map<std::string, int> index;
  dsl::GraphContext gctx;
  gctx.batch = plan.dist.i64("batch_per_gpu");
  if (!plan.data_facts.clip.empty()) gctx.frames = plan.data_facts.clip[0];
  gctx.classes = plan.data_facts.classes;

  std::map<std::string, dsl::Shape> shapes;
  if (!plan.data_facts.clip.empty()) {
    dsl::Shape in{gctx.batch};
    in.insert(in.end(), plan.data_facts.clip.begin(), plan.data_facts.clip.end());
    shapes[plan.model_input] = in;
  }
  for (const auto& spec : plan.nodes) {
    Node node{spec.id, spec.op, {}, nullptr};
    node.layer = host.make<Layer>(spec.kind, spec.op, spec.params);
    for (const auto& in : spec.inputs) node.inputs.push_back(in == plan.model_input ? -1 : index.at(in));
    index[spec.id] = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(node));
    shapes[spec.id] = spec.output_shape;
  }
  for (const auto& ins : plan.inserts) {
    auto layer = host.make<Layer>(ins.kind, ins.op, ins.params);
    layer->build({ins.point_shape}, gctx);
    nodes_.at(index.at(ins.node)).layer->insert(ins.point, layer);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<dsl::Shape> in_shapes;
    for (const auto& in : plan.nodes[i].inputs) in_shapes.push_back(shapes.count(in) ? shapes[in] : dsl::Shape{});
    try {
      nodes_[i].layer->build(in_shapes, gctx);
    } catch (const std::exception& e) {
      throw std::runtime_error(plan.nodes[i].loc.str() + ": node '" + nodes_[i].id + "' (" + nodes_[i].op +
                               "): " + e.what());
    }
    register_module(nodes_[i].id, nodes_[i].layer);
  }
  output_ = index.at(plan.model_output);
}

at::Tensor ModelGraph::forward(const at::Tensor& clip) {
  ForwardContext ctx{clip.size(0), clip.dim() >= 2 ? clip.size(1) : 1};
  std::vector<at::Tensor> outs(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<at::Tensor> in;
    in.reserve(nodes_[i].inputs.size());
    for (int j : nodes_[i].inputs) in.push_back(j < 0 ? clip : outs[j]);
    outs[i] = nodes_[i].layer->forward(in, ctx);
  }
  return outs[output_];
}

std::vector<std::string> ModelGraph::parameter_names_of_op(const std::string& op) const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) {
    if (n.op != op) continue;
    for (const auto& p : n.layer->named_parameters(true)) out.push_back(n.id + "." + p.key());
  }
  return out;
}

int64_t ModelGraph::parameter_count() const {
  int64_t total = 0;
  for (const auto& p : parameters(true)) total += p.numel();
  return total;
}

double ModelGraph::macs_per_clip(const dsl::Shape& clip_shape) {
  bool was_training = is_training();
  eval();
  double macs = 0;
  {
    at::NoGradGuard no_grad;
    std::vector<int64_t> sizes{1};
    sizes.insert(sizes.end(), clip_shape.begin(), clip_shape.end());
    FlopCounter counter;
    forward(at::zeros(sizes));
    macs = counter.macs();
  }
  train(was_training);
  return macs;
}

}  // namespace vexp
