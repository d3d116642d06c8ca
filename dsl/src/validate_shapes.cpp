// The dataset's facts and data check, then shape inference through the graph,
// the inserted operators and the model output, with the plan's GraphContext.
#include "validator.hpp"

#include <algorithm>

namespace vexp::dsl::detail {

// Runs a plugin hook; a failure becomes an error "<prefix>: <message>". Plugins
// often start their messages with their own name, which the prefix already says.
template <typename F>
bool Validator::guarded(const Loc& loc, const std::string& prefix, F&& f, const std::string& plugin) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (!plugin.empty() && what.rfind(plugin + ": ", 0) == 0) what = what.substr(plugin.size() + 2);
    diags_.error(loc, prefix + ": " + what);
  } catch (...) {
    diags_.error(loc, prefix + ": unknown error");
  }
  return false;
}

// A dataset hook's message that starts with the name of a parameter the recipe
// gives ("train_list: list file '...' is a directory", "root is empty") is placed
// at that value; any other message at `fallback` (the [data.params] table).
Loc Validator::data_param_loc(const std::string& what, const Loc& fallback) const {
  const Value* params = given("data", "params");
  if (!params || !params->is_table()) return fallback;
  for (const auto& [key, v] : params->as_table()) {
    if (what.size() > key.size() && what.compare(0, key.size(), key) == 0 &&
        (what[key.size()] == ':' || what[key.size()] == ' ') && v.loc().known())
      return v.loc();
  }
  return fallback;
}

void Validator::check_shapes() {
  if (!dataset_decl_ || !dataset_params_ok_) return;
  if (dataset_decl_->dataset_facts) {
    const Loc loc = loc_or_section("data", "params");
    if (!guarded(
            loc, "dataset '" + plan_.dataset + "'",
            [&] { plan_.data_facts = dataset_decl_->dataset_facts(plan_.dataset_params); }, plan_.dataset)) {
      return;
    }
  }
  if (dataset_decl_->check_data) {
    const Loc loc = loc_or_section("data", "params");
    try {
      dataset_decl_->check_data(plan_.dataset_params);
    } catch (const std::exception& e) {
      const Loc at = data_param_loc(e.what(), loc);
      if (options_.require_data) {
        diags_.error(at, "dataset '" + plan_.dataset + "': " + e.what());
      } else {
        diags_.warning(at, "dataset '" + plan_.dataset + "': " + e.what() + " (vexp run will refuse to start)");
      }
    }
  }
  const DatasetFacts& facts = plan_.data_facts;
  GraphContext& ctx = plan_.context;
  if (plan_.dist.batch_per_gpu > 0) ctx.batch = plan_.dist.batch_per_gpu;  // 0: the value failed its check
  if (!facts.clip.empty()) {
    ctx.frames = facts.clip[0];
    plan_.input_shape = {ctx.batch};
    plan_.input_shape.insert(plan_.input_shape.end(), facts.clip.begin(), facts.clip.end());
  }
  ctx.classes = facts.classes;
  if (facts.clip.size() != 4) return;
  const Shape& input = plan_.input_shape;

  std::vector<Shape> shapes(nodes_.size());
  for (size_t i : order_) {
    NodeInfo& n = nodes_[i];
    if (!n.in_ok) continue;
    std::vector<Shape> ins;
    for (const auto& src : n.spec.inputs) {
      const long idx = src == plan_.model_input ? -1 : node_index(src);
      if (src != plan_.model_input && idx < 0) break;
      ins.push_back(idx < 0 ? input : shapes[static_cast<size_t>(idx)]);
    }
    if (ins.size() != n.spec.inputs.size()) continue;
    n.input_shape = ins.empty() ? Shape{} : ins.front();
    if (!n.decl || !n.params_ok || !n.decl->infer_shape) continue;
    if (std::any_of(ins.begin(), ins.end(), [](const Shape& s) { return s.empty(); })) continue;
    Shape out;
    if (guarded(
            n.spec.loc, node_label(n) + " (" + n.spec.op + ")",
            [&] { out = n.decl->infer_shape(n.spec.params, ins, ctx); }, n.spec.op)) {
      shapes[i] = out;
      n.spec.output_shape = out;
    } else {
      n.input_shape.clear();  // its insertion points would only repeat this error
    }
  }
  check_insert_shapes(ctx);
  check_output_shape(shapes, ctx);
}

void Validator::check_insert_shapes(const GraphContext& ctx) {
  std::map<const RuleInfo*, size_t> failures;
  for (size_t k = 0; k < plan_.inserts.size(); ++k) {
    InsertSpec& ins = plan_.inserts[k];
    const RuleInfo* rule = insert_rules_[k];
    const NodeInfo& backbone = nodes_[static_cast<size_t>(node_index(ins.node))];
    if (backbone.input_shape.empty() || !backbone.decl->point_shape) continue;
    const std::string prefix = "rewrite at '" + ins.node + "/" + ins.point + "' (" + ins.op + ")";
    auto report = [&](const std::string& msg) {
      if (++failures[rule] <= 3) diags_.error(ins.loc, msg);
    };
    try {
      ins.point_shape = backbone.decl->point_shape(backbone.spec.params, ins.point, backbone.input_shape);
    } catch (const std::exception& e) {
      report(prefix + ": " + e.what());
      continue;
    } catch (...) {
      report(prefix + ": unknown error");
      continue;
    }
    if (ins.point_shape.empty() || !rule->decl->infer_shape) continue;
    Shape out;
    try {
      out = rule->decl->infer_shape(ins.params, {ins.point_shape}, ctx);
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (what.rfind(ins.op + ": ", 0) == 0) what = what.substr(ins.op.size() + 2);
      report(prefix + ": " + what);
      continue;
    } catch (...) {
      report(prefix + ": unknown error");
      continue;
    }
    if (out != ins.point_shape) {
      report(prefix + " changes the shape from " + shape_str(ins.point_shape) + " to " + shape_str(out) +
             "; an inserted operator must keep it");
    }
  }
  for (const auto& [rule, count] : failures) {
    if (count > 3) {
      diags_.note(rule->spec.loc, "rewrite '" + rule->spec.pattern + "': " + std::to_string(count - 3) +
                                      " more insertion points fail the same check (not shown)");
    }
  }
}

void Validator::check_output_shape(const std::vector<Shape>& shapes, const GraphContext& ctx) {
  if (output_index_ < 0) return;
  const Shape& out = shapes[static_cast<size_t>(output_index_)];
  if (out.empty()) return;
  const Shape want{ctx.batch, ctx.classes};
  bool ok = out.size() == 2;
  for (size_t i = 0; ok && i < 2; ++i) ok = out[i] < 0 || want[i] < 0 || out[i] == want[i];
  if (ok) return;
  diags_.error(loc_or_section("model", "output"),
               "model output '" + plan_.model_output + "' has shape " + shape_str(out) +
                   " but training needs [batch, classes] = " + shape_str(want));
}

}  // namespace vexp::dsl::detail
