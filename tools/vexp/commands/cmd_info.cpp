// vexp info RECIPE [--json] [--input TxCxHxW] [--classes N] [--param-groups]: parameters,
// MACs per clip (counted from the built graph), frames, activation memory of a
// training step, gradient bytes exchanged per step, and the optimizer's parameter
// groups ([[optim.groups]] by glob, then the default rule; --param-groups: each
// parameter's group).
#include <malloc.h>

#include <cstdio>
#include <iostream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "commands/model_session.hpp"
#include "vexp/runtime/optimizer.hpp"

namespace vexp::cli {
namespace {

std::string grouped(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string s = buf, out;
  const int n = static_cast<int>(s.size());
  for (int i = 0; i < n; ++i) {
    out += s[static_cast<size_t>(i)];
    if ((n - i - 1) % 3 == 0 && i + 1 < n) out += ',';
  }
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

size_t heap_in_use() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Bytes the autograd graph holds after a training-mode forward of one clip:
// the activations a training step keeps for backward (measured on the heap).
double activation_bytes_per_clip(ModelGraph& model, const dsl::Shape& clip) {
  std::vector<int64_t> sizes{1};
  sizes.insert(sizes.end(), clip.begin(), clip.end());
  at::Tensor input = at::randn(sizes);
  model.train();
  const size_t before = heap_in_use();
  at::Tensor out = model.forward(input);
  const size_t after = heap_in_use();
  out = at::Tensor();
  return after > before ? static_cast<double>(after - before) : 0.0;
}

}  // namespace

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Parameters, MACs per clip, activation memory and gradient bytes of a recipe's model");
  auto args = std::make_shared<RecipeArgs>();
  auto json = std::make_shared<bool>(false);
  auto input = std::make_shared<std::string>();
  auto classes = std::make_shared<int64_t>(-1);
  auto each = std::make_shared<bool>(false);
  args->add_to(cmd);
  cmd->add_flag("--json", *json, "Print JSON: params, flops_per_clip, frames, grad_bytes, activation_bytes, input, classes");
  cmd->add_option("--input", *input, "Clip shape T x C x H x W (e.g. 8x3x224x224) instead of the dataset's");
  cmd->add_option("--classes", *classes, "Class count instead of the dataset's")->check(CLI::PositiveNumber);
  cmd->add_flag("--param-groups", *each, "Also list every trainable parameter with its optimizer group");
  cmd->callback([args, json, input, classes, each] {
    ModelArgs m;
    if (!input->empty()) m.clip = parse_clip_shape(*input, "--input");
    m.classes = *classes;
    Session s;
    if (!open_model_session(s, *args, m))
      throw base::invalid(m.clip ? "" : "(when the dataset plugin is missing or gives no clip shape, give --input "
                                             "TxCxHxW and --classes N)");
    const dsl::Shape clip = clip_shape(s);
    if (clip.size() != 4)
      throw base::invalid("'" + args->path + "': the dataset gives no clip shape; give --input TxCxHxW");
    auto model = build_model(s);
    // The optimizer's groups, as vexp run makes them (a glob matching nothing is the same error).
    const ParamGroups groups = param_groups(*model, s.plan->optim);
    check_param_groups(groups);
    for (const auto& w : groups.warnings) std::cerr << "vexp: warning: " << w.loc.str() << ": " << w.message << "\n";
    const int64_t params = model->parameter_count();
    int64_t grad_bytes = 0;
    for (const auto& p : model->parameters(true))
      if (p.requires_grad()) grad_bytes += p.numel() * static_cast<int64_t>(p.element_size());
    const double macs = model->macs_per_clip(clip);
    const int64_t batch = s.plan->dist.batch_per_gpu;
    const double act = activation_bytes_per_clip(*model, clip);
    const int64_t classes_out = s.plan->data_facts.classes;
    if (*json) {
      nlohmann::json j;
      j["recipe"] = args->path;
      j["params"] = params;
      j["flops_per_clip"] = static_cast<int64_t>(macs);
      j["frames"] = clip[0];
      j["grad_bytes"] = grad_bytes;
      j["activation_bytes"] = static_cast<int64_t>(act * static_cast<double>(batch));
      j["batch_per_gpu"] = batch;
      j["input"] = clip;
      j["classes"] = classes_out;
      j["optimizer"] = s.plan->optim.type;
      nlohmann::json gs = nlohmann::json::array();
      for (size_t i = 0; i < groups.groups.size(); ++i) {
        const ParamGroup& g = groups.groups[i];
        int64_t n = 0;
        for (const auto& p : g.params) n += p.numel();
        nlohmann::json gj{{"name", g.name},       {"rule", groups.rules[i]},         {"tensors", g.params.size()},
                          {"elements", n},        {"lr_mult", g.lr_mult},            {"weight_decay", g.weight_decay},
                          {"recipe", i < groups.recipe_groups}};
        if (*each) gj["parameters"] = g.names;
        gs.push_back(std::move(gj));
      }
      j["param_groups"] = std::move(gs);
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::cout << "recipe             " << args->path << "\n";
    std::cout << "input              " << dsl::shape_str(clip) << " per clip, " << classes_out << " classes\n";
    std::cout << "parameters         " << grouped(static_cast<double>(params)) << "\n";
    std::cout << "MACs per clip      " << grouped(macs) << " (" << base::count_text(macs) << ", mmcv convention)\n";
    std::cout << "frames per clip    " << clip[0] << "\n";
    std::cout << "activation memory  " << human_bytes(act * static_cast<double>(batch)) << " per training step (batch "
              << batch << " x " << human_bytes(act) << " measured for one clip)\n";
    std::cout << "gradient bytes     " << grouped(static_cast<double>(grad_bytes)) << " per step ("
              << human_bytes(static_cast<double>(grad_bytes)) << ", float32, allreduced)\n";
    std::cout << "optimizer          " << s.plan->optim.type << ", " << groups.groups.size() << " parameter group"
              << (groups.groups.size() == 1 ? "" : "s") << "\n";
    for (const auto& row : param_groups_table(groups)) std::cout << "  " << row << "\n";
    if (*each) {
      std::cout << "parameters by group\n";
      for (const auto& g : groups.groups)
        for (size_t k = 0; k < g.names.size(); ++k) {
          std::cout << "  " << g.name << "  " << g.names[k] << " [";
          for (int64_t d = 0; d < g.params[k].dim(); ++d) std::cout << (d ? ", " : "") << g.params[k].size(d);
          std::cout << "]\n";
        }
    }
  });
}

}  // namespace vexp::cli
