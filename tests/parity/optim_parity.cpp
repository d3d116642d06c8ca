// vexp_optim_parity IN.pt OUT.pt: one of the build's optimizer plugins, made
// through the plugin host, run over given gradients (parity.py's `optimizers`
// case writes them and compares the result with PyTorch).
//   IN  (a vexp checkpoint file): model = the parameters; optimizer = the gradients,
//       "<step>/<parameter>" (a parameter without one in a step has no gradient
//       then); meta = {"optimizer": NAME, "params": {...}, "lrs": [lr per step],
//       "groups": [{"name", "lr_mult", "weight_decay", "params": [names]}]}
//   OUT (a vexp checkpoint file): model = the parameters after the steps;
//       optimizer = the optimizer's state(); meta = "{}".
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "vexp/optimizer.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace {

vexp::schema::Value value_of(const nlohmann::json& j) {
  if (j.is_boolean()) return vexp::schema::Value(j.get<bool>());
  if (j.is_number_integer()) return vexp::schema::Value(j.get<int64_t>());
  if (j.is_number()) return vexp::schema::Value(j.get<double>());
  if (j.is_string()) return vexp::schema::Value(j.get<std::string>());
  if (j.is_array()) {
    vexp::schema::Value::Array a;
    for (const auto& x : j) a.push_back(value_of(x));
    return vexp::schema::Value::array(std::move(a));
  }
  throw std::runtime_error("unsupported parameter value " + j.dump());
}

int run(const std::string& in, const std::string& out) {
  vexp::PluginHost host;
  std::vector<std::string> problems;
  host.load_directory(VEXP_PARITY_PLUGIN_DIR, problems);
  if (!problems.empty()) throw std::runtime_error(problems.front());
  vexp::Checkpoint c = vexp::load_checkpoint(in);
  const nlohmann::json meta = nlohmann::json::parse(c.meta_json);
  const std::string name = meta.at("optimizer").get<std::string>();
  const vexp::PluginDecl* decl = host.find("optimizer", name);
  if (!decl) throw std::runtime_error("no optimizer plugin '" + name + "'");
  std::map<std::string, vexp::schema::Value> given;
  for (const auto& [k, v] : meta.at("params").items()) given[k] = value_of(v);
  auto opt = host.make<vexp::Optimizer>("optimizer", name, vexp::schema::make_params(decl->schema, given));

  std::map<std::string, at::Tensor> params;
  for (const auto& [k, v] : c.model) params[k] = v.clone().requires_grad_(true);
  std::vector<vexp::ParamGroup> groups;
  for (const auto& g : meta.at("groups")) {
    vexp::ParamGroup pg{g.at("name").get<std::string>(), g.at("lr_mult").get<double>(),
                        g.at("weight_decay").get<double>(), {}, {}};
    for (const auto& n : g.at("params")) {
      pg.names.push_back(n.get<std::string>());
      pg.params.push_back(params.at(n.get<std::string>()));
    }
    groups.push_back(std::move(pg));
  }
  opt->set_groups(std::move(groups));
  const auto lrs = meta.at("lrs").get<std::vector<double>>();
  for (size_t s = 0; s < lrs.size(); ++s) {
    for (auto& [n, p] : params) {
      auto it = c.optimizer.find(std::to_string(s) + "/" + n);
      p.mutable_grad() = it == c.optimizer.end() ? at::Tensor() : it->second.clone();
    }
    c10::NoGradGuard no_grad;
    opt->step(lrs[s]);
  }
  vexp::Checkpoint result;
  for (const auto& [n, p] : params) result.model[n] = p.detach();
  result.optimizer = opt->state();
  result.meta_json = "{}";
  vexp::save_checkpoint(out, result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vexp_optim_parity IN.pt OUT.pt\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vexp_optim_parity: %s\n", e.what());
    return 1;
  }
}
