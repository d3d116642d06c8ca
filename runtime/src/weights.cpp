#include "vexp/runtime/weights.hpp"

#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "vexp/base/error.hpp"
#include "vexp/schema/catalog.hpp"

namespace vexp {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

std::string shape_of(const at::Tensor& t) { return dsl::shape_str(dsl::Shape(t.sizes().begin(), t.sizes().end())); }

std::map<std::string, at::Tensor> tensors_of(torch::nn::Module& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value();
  for (const auto& b : model.named_buffers(true)) out[b.key()] = b.value();
  return out;
}

std::string join_some(const std::vector<std::string>& v, size_t most) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > most) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

}  // namespace

at::Tensor inflate_kernel(const at::Tensor& w2d, int64_t t, const std::string& mode) {
  if (mode == "center") {
    at::Tensor w = at::zeros({w2d.size(0), w2d.size(1), t, w2d.size(2), w2d.size(3)}, w2d.options());
    w.select(2, t / 2).copy_(w2d);
    return w;
  }
  if (mode != "mean") throw std::invalid_argument("inflation mode '" + mode + "' is not one of mean, center");
  return w2d.unsqueeze(2).repeat({1, 1, t, 1, 1}).div(static_cast<double>(t));
}

std::string map_key(const std::string& key, const ModelLayout& layout, const std::vector<std::string>& node_ids) {
  std::string k = key;
  while (starts_with(k, "module.")) k = k.substr(7);
  // Already vexp's own naming: the first segment is a node id.
  const std::string first = k.substr(0, k.find('.'));
  for (const auto& id : node_ids)
    if (id == first && k.size() > first.size()) return k;
  if (starts_with(k, "base_model.")) {
    k = k.substr(11);  // official TSM
  } else if (starts_with(k, "backbone.")) {
    k = k.substr(9);  // mmaction2
  }
  // Checkpoint file formats (official TSM, mmaction2, torchvision), not plugin
  // internals: where each names its classifier's linear layer. They map onto the
  // node whose plugin declares a head (PluginDecl::head_parameters, "fc.").
  for (const char* head : {"new_fc.", "cls_head.fc_cls.", "cls_head.fc.", "fc."}) {
    if (starts_with(k, head)) {
      if (layout.classifier.empty()) return "";
      return layout.classifier + ".fc." + k.substr(std::char_traits<char>::length(head));
    }
  }
  if (starts_with(k, "cls_head.")) return "";
  // A shift wraps the shifted conv as `.net`: official TSM layer1.0.conv1.net.weight,
  // mmaction2 layer1.0.conv1.conv.net.weight; the names earlier vexp mmaction
  // exports wrote, layer1.0.conv1.net.conv.weight and conv1.net.bn.*, still load.
  k = replace_all(k, ".net.", ".");
  // mmcv ConvModule: convN.conv.* -> convN.*, convN.bn.* -> bnN.*, downsample.conv/bn -> downsample.0/1
  static const std::regex conv_conv(R"((^|\.)conv(\d+)\.conv\.)");
  static const std::regex conv_bn(R"((^|\.)conv(\d+)\.bn\.)");
  k = std::regex_replace(k, conv_conv, "$1conv$2.");
  k = std::regex_replace(k, conv_bn, "$1bn$2.");
  k = replace_all(k, "downsample.conv.", "downsample.0.");
  k = replace_all(k, "downsample.bn.", "downsample.1.");
  if (layout.backbone.empty()) return "";
  return layout.backbone + "." + k;
}

WeightReport load_weights(torch::nn::Module& model, const ModelLayout& layout, const std::vector<std::string>& node_ids,
                          const StateDict& sd, const WeightOptions& opts, const std::string& path) {
  ModelLayout eff = layout;
  if (!opts.scope.empty()) eff.backbone = opts.scope;
  const std::string fc_prefix = layout.classifier.empty() ? std::string("\x01") : layout.classifier + ".fc.";
  auto in_scope = [&](const std::string& name) {
    return opts.scope.empty() || starts_with(name, opts.scope + ".");
  };
  std::map<std::string, at::Tensor> targets = tensors_of(model);
  WeightReport r;
  std::set<std::string> seen;
  c10::NoGradGuard no_grad;
  for (const auto& [key, src] : sd) {
    const std::string target = map_key(key, eff, node_ids);
    auto it = targets.find(target);
    const bool is_fc = starts_with(target, fc_prefix);
    if (target.empty() || it == targets.end() || (!in_scope(target) && !is_fc)) {
      r.unexpected.push_back(key);
      continue;
    }
    at::Tensor dst = it->second;
    at::Tensor value = src;
    if (!src.sizes().equals(dst.sizes())) {
      const bool inflatable = dst.dim() == 5 && src.dim() == 4 && src.size(0) == dst.size(0) &&
                              src.size(1) == dst.size(1) && src.size(2) == dst.size(3) && src.size(3) == dst.size(4);
      if (inflatable) {
        value = inflate_kernel(src.to(dst.dtype()), dst.size(2), opts.inflate);
        r.reshaped.push_back(target + ": " + shape_of(src) + " -> " + shape_of(dst) + " (inflated, " + opts.inflate + ")");
      } else if (is_fc) {
        r.dropped.push_back(key + " " + shape_of(src) + " (the model's " + target + " is " + shape_of(dst) + ")");
        continue;
      } else {
        throw base::failure("'" + path + "': '" + key + "' has shape " + shape_of(src) + " but the model's '" +
                                 target + "' has shape " + shape_of(dst));
      }
    }
    dst.copy_(value.to(dst.dtype()));
    if (seen.insert(target).second) r.loaded.push_back(target);
  }
  for (const auto& [name, t] : targets) {
    if (seen.count(name) || !in_scope(name)) continue;
    r.missing.push_back(name);
  }
  return r;
}

std::string WeightReport::summary(const std::string& path, bool details) const {
  std::string s = "loaded " + std::to_string(loaded.size()) + " tensors from '" + path + "'";
  s += "; " + std::to_string(reshaped.size()) + " reshaped";
  s += "; " + std::to_string(dropped.size()) + " dropped";
  s += "; " + std::to_string(missing.size()) + " missing";
  s += "; " + std::to_string(unexpected.size()) + " unexpected";
  if (!details) return s;
  if (!reshaped.empty()) s += "\n  reshaped: " + join_some(reshaped, 4);
  if (!dropped.empty()) s += "\n  dropped (class count differs, left as initialised): " + join_some(dropped, 4);
  if (!missing.empty()) s += "\n  missing (left as initialised): " + join_some(missing, 6);
  if (!unexpected.empty()) s += "\n  unexpected (ignored): " + join_some(unexpected, 6);
  return s;
}

StateDict export_weights(torch::nn::Module& model, const ModelLayout& layout, const std::string& naming) {
  if (naming != "torchvision" && naming != "tsm" && naming != "mmaction" && naming != "vexp")
    throw std::invalid_argument("naming '" + naming + "' is not one of torchvision, tsm, mmaction, vexp");
  StateDict out;
  std::vector<std::pair<std::string, at::Tensor>> all;
  for (const auto& p : model.named_parameters(true)) all.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) all.emplace_back(b.key(), b.value());
  if (naming == "vexp") return all;
  const std::string bb = layout.backbone + ".";
  const std::string fc = layout.classifier.empty() ? std::string("\x01") : layout.classifier + ".fc.";
  // Blocks with a layer at their residual branch input (TSM's shifted conv1).
  std::set<std::string> shifted;
  for (const auto& m : model.named_modules("", false)) {
    const std::string& name = m.key();
    const std::string tail = ".residual_in";
    if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0 &&
        starts_with(name, bb))
      shifted.insert(name.substr(bb.size(), name.size() - tail.size() - bb.size()) + ".");
  }
  static const std::regex conv_w(R"((^|\.)conv(\d+)\.)");
  static const std::regex bn_w(R"((^|\.)bn(\d+)\.)");
  for (const auto& [name, t] : all) {
    std::string k;
    if (starts_with(name, fc)) {
      const std::string rest = name.substr(fc.size());
      k = naming == "torchvision" ? "fc." + rest : naming == "tsm" ? "module.new_fc." + rest : "cls_head.fc_cls." + rest;
    } else if (starts_with(name, bb)) {
      k = name.substr(bb.size());
      std::string block;
      for (const auto& b : shifted)
        if (starts_with(k, b)) block = b;
      if (naming == "tsm") {
        if (!block.empty() && starts_with(k, block + "conv1.")) k = block + "conv1.net." + k.substr(block.size() + 6);
        k = "module.base_model." + k;
      } else if (naming == "mmaction") {
        // mmcv ConvModule names: convN.weight -> convN.conv.weight, bnN.* -> convN.bn.*,
        // downsample.0/1 -> downsample.conv/bn. ResNetTSM shifts *inside* the ConvModule
        // (blocks[i].conv1.conv = TemporalShift(b.conv1.conv)): conv1.conv.net.weight,
        // while the norm stays conv1.bn.*.
        k = std::regex_replace(k, conv_w, "$1conv$2.conv.");
        k = std::regex_replace(k, bn_w, "$1conv$2.bn.");
        k = replace_all(k, "downsample.0.", "downsample.conv.");
        k = replace_all(k, "downsample.1.", "downsample.bn.");
        const std::string inner = block + "conv1.conv.";
        if (!block.empty() && starts_with(k, inner)) k = inner + "net." + k.substr(inner.size());
        k = "backbone." + k;
      }
    } else {
      k = name;  // other nodes keep vexp's names
    }
    out.emplace_back(k, t.detach());
  }
  return out;
}

}  // namespace vexp
