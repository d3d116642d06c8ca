#include "vexp/runtime/graph.hpp"

#include <map>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "vexp/base/error.hpp"
#include "vexp/runtime/torch_save.hpp"
#include "vexp/flops.hpp"

namespace vexp {

ModelGraph::ModelGraph(const dsl::RecipePlan& plan, const PluginHost& host) {
  std::map<std::string, int> index;
  const dsl::GraphContext& gctx = plan.context;  // as validation gave it to the shape hooks
  std::map<std::string, dsl::Shape> shapes;
  if (!plan.input_shape.empty()) shapes[plan.model_input] = plan.input_shape;
  for (const auto& spec : plan.nodes) {
    Node node{spec.id, spec.op, spec.kind, {}, nullptr, {}, {}, {}};
    node.layer = host.make<Layer>(spec.kind, spec.op, spec.params);
    const PluginDecl* decl = host.find(spec.kind, spec.op);
    if (decl) node.head = decl->head_parameters;
    if (decl && !decl->library.empty() && decl->library[0] == '/') {
      node.library = decl->library;  // a loaded library (built-ins are named "<...>")
      node.activity = "running " + spec.kind + " '" + spec.op + "' of node '" + spec.id + "'";
    }
    for (const auto& in : spec.inputs) node.inputs.push_back(in == plan.model_input ? -1 : index.at(in));
    index[spec.id] = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(node));
    shapes[spec.id] = spec.output_shape;
  }
  for (const auto& ins : plan.inserts) {
    auto layer = host.make<Layer>(ins.kind, ins.op, ins.params);
    const PluginDecl* decl = host.find(ins.kind, ins.op);
    const std::string lib = decl ? decl->library : "";
    const std::string what = "building " + ins.kind + " '" + ins.op + "' inserted at '" + ins.node + "/" + ins.point + "'";
    PluginActivity building{lib.c_str(), what.c_str()};
    PluginActivityScope scope(!lib.empty() && lib[0] == '/' ? &building : nullptr);
    layer->build({ins.point_shape}, gctx);
    nodes_.at(index.at(ins.node)).layer->insert(ins.point, layer);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<dsl::Shape> in_shapes;
    for (const auto& in : plan.nodes[i].inputs) in_shapes.push_back(shapes.count(in) ? shapes[in] : dsl::Shape{});
    try {
      const std::string what = "building " + nodes_[i].kind + " '" + nodes_[i].op + "' of node '" + nodes_[i].id + "'";
      PluginActivity building{nodes_[i].library.c_str(), what.c_str()};
      PluginActivityScope scope(nodes_[i].library.empty() ? nullptr : &building);
      nodes_[i].layer->build(in_shapes, gctx);
    } catch (const std::exception& e) {
      throw base::failure(plan.nodes[i].loc.str() + ": node '" + nodes_[i].id + "' (" + nodes_[i].op +
                               "): " + e.what());
    }
    register_module(nodes_[i].id, nodes_[i].layer);
  }
  output_ = index.at(plan.model_output);
  for (const auto& spec : plan.nodes) {
    if (spec.pretrained.empty()) continue;
    WeightOptions opts;
    opts.scope = spec.id;
    opts.inflate = spec.pretrained_inflate;
    try {
      const StateDict sd = find_state_dict(load_torch_file(spec.pretrained), spec.pretrained);
      WeightReport r = load_weights(*this, layout(), node_ids(), sd, opts, spec.pretrained);
      if (r.loaded.empty())
        throw base::failure("no tensor of '" + spec.pretrained + "' matches the node's parameters (" +
                                 r.summary(spec.pretrained, true) + ")");
      pretrained_reports_.push_back("node '" + spec.id + "': " + r.summary(spec.pretrained));
    } catch (const std::exception& e) {
      throw base::failure(spec.loc.str() + ": node '" + spec.id + "' pretrained: " + e.what());
    }
  }
}

ModelLayout ModelGraph::layout() const {
  ModelLayout l;
  for (const auto& n : nodes_) {
    if (l.backbone.empty() && n.kind == "backbone") l.backbone = n.id;
    if (!n.head.empty()) l.classifier = n.id;  // the plugin declares a classification head
  }
  if (l.backbone.empty() && !nodes_.empty()) l.backbone = nodes_.front().id;
  return l;
}

std::vector<std::string> ModelGraph::node_ids() const {
  std::vector<std::string> ids;
  for (const auto& n : nodes_) ids.push_back(n.id);
  return ids;
}

at::Tensor ModelGraph::forward(const at::Tensor& clip) {
  ForwardContext ctx{clip.size(0), clip.dim() >= 2 ? clip.size(1) : 1};
  std::vector<at::Tensor> outs(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<at::Tensor> in;
    in.reserve(nodes_[i].inputs.size());
    for (int j : nodes_[i].inputs) in.push_back(j < 0 ? clip : outs[j]);
    const Node& n = nodes_[i];
    // Two pointer stores: a fatal signal in the plugin's forward names it (exit 4).
    const PluginActivity activity{n.library.c_str(), n.activity.c_str()};
    PluginActivityScope scope(n.library.empty() ? nullptr : &activity);
    outs[i] = n.layer->forward(in, ctx);
  }
  return outs[output_];
}

std::vector<std::string> ModelGraph::head_parameter_names() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) {
    for (const auto& p : n.layer->named_parameters(true)) {
      for (const auto& prefix : n.head) {
        if (p.key().compare(0, prefix.size(), prefix) == 0) {
          out.push_back(n.id + "." + p.key());
          break;
        }
      }
    }
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
    c10::NoGradGuard no_grad;
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
