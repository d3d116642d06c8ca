#include "vexp/layer.hpp"

#include <stdexcept>

namespace vexp {

void Layer::insert(const std::string& point, std::shared_ptr<Layer> /*layer*/) {
  throw std::runtime_error("layer '" + name() + "' has no insertion point '" + point +
                           "' (it has no insertion points at all)");
}

void InsertionPoints::declare(const std::string& point, torch::nn::Module* owner,
                              const std::string& module_name) {
  points_[point] = Point{owner, module_name, {}};
}

std::vector<std::string> InsertionPoints::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : points_) out.push_back(name);
  return out;
}

void InsertionPoints::insert(const std::string& point, std::shared_ptr<Layer> layer) {
  auto it = points_.find(point);
  if (it == points_.end()) {
    std::string known;
    int shown = 0;
    for (const auto& [name, _] : points_) {
      if (shown++ == 3) { known += ", ..."; break; }
      known += (known.empty() ? "" : ", ") + name;
    }
    throw std::runtime_error("no insertion point '" + point + "' (points look like: " + known + ")");
  }
  Point& p = it->second;
  std::string name = p.module_name;
  if (!p.layers.empty()) name += "_" + std::to_string(p.layers.size());
  if (p.owner) p.owner->register_module(name, layer);
  p.layers.push_back(std::move(layer));
}

at::Tensor InsertionPoints::apply(const std::string& point, at::Tensor x, const ForwardContext& ctx) const {
  auto it = points_.find(point);
  if (it == points_.end()) return x;
  for (const auto& layer : it->second.layers) x = layer->forward({x}, ctx);
  return x;
}

bool InsertionPoints::empty(const std::string& point) const {
  auto it = points_.find(point);
  return it == points_.end() || it->second.layers.empty();
}

}  // namespace vexp
