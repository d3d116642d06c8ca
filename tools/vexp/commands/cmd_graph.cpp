// vexp graph RECIPE [--dot]: the model graph after rewrites, with shapes.
#include <iostream>
#include <map>

#include "commands/common.hpp"

namespace vexp::cli {
namespace {

std::string params_text(const dsl::Params& p) {
  std::string s;
  for (const auto& [k, v] : p.values()) s += (s.empty() ? "" : ", ") + k + "=" + v.to_toml_inline();
  return s;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

void add_graph(CLI::App& app) {
  auto* cmd = app.add_subcommand("graph", "Show the model graph after rewrites");
  auto args = std::make_shared<RecipeArgs>();
  auto dot = std::make_shared<bool>(false);
  args->add_to(cmd);
  cmd->add_flag("--dot", *dot, "Graphviz output");
  cmd->callback([args, dot] {
    Session s;
    if (!open_session(s, *args)) throw base::invalid("");
    const auto& plan = *s.plan;
    std::map<std::string, std::vector<const dsl::InsertSpec*>> inserts;
    for (const auto& i : plan.inserts) inserts[i.node].push_back(&i);
    if (*dot) {
      std::cout << "digraph model {\n  rankdir=TB;\n  \"" << plan.model_input << "\" [shape=oval];\n";
      for (const auto& n : plan.nodes) {
        std::string label = n.id + "\\n" + n.op;
        if (!n.output_shape.empty()) label += "\\n" + dsl::shape_str(n.output_shape);
        if (inserts.count(n.id)) label += "\\n+" + std::to_string(inserts[n.id].size()) + " x " + inserts[n.id][0]->op;
        std::cout << "  \"" << n.id << "\" [shape=box,label=\"" << label << "\"];\n";
        for (const auto& in : n.inputs) std::cout << "  \"" << in << "\" -> \"" << n.id << "\";\n";
      }
      std::cout << "}\n";
      return;
    }
    std::cout << plan.model_input;
    if (!plan.input_shape.empty()) std::cout << " " << dsl::shape_str(plan.input_shape);
    std::cout << "  (model input)\n";
    for (const auto& n : plan.nodes) {
      std::cout << n.id << " = " << n.op << "(" << join(n.inputs, ", ") << ")";
      if (!n.output_shape.empty()) std::cout << " -> " << dsl::shape_str(n.output_shape);
      std::cout << "\n";
      if (!n.params.values().empty()) std::cout << "    " << params_text(n.params) << "\n";
      for (const auto* i : inserts[n.id]) {
        std::cout << "    @" << i->point << " += " << i->op << "(" << params_text(i->params) << ")";
        if (!i->point_shape.empty()) std::cout << " on " << dsl::shape_str(i->point_shape);
        std::cout << "\n";
      }
    }
    std::cout << "output: " << plan.model_output << "\n";
  });
}

}  // namespace vexp::cli
