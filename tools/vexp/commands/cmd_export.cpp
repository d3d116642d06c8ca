// vexp export RUN_OR_CHECKPOINT --to model.pth [--naming torchvision|tsm|mmaction|vexp] [--recipe R]
// Writes a run's weights as a state dict PyTorch's torch.load reads, under the
// names torchvision / the official TSM code / mmaction2 use.
#include <filesystem>
#include <iostream>

#include "vexp/runtime/checkpoint.hpp"
#include "model_session.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;

void add_export(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a run's (or checkpoint's) weights as a PyTorch state dict");
  auto source = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto naming = std::make_shared<std::string>("torchvision");
  auto recipe = std::make_shared<std::string>();
  auto classes = std::make_shared<int64_t>(-1);
  auto input = std::make_shared<std::string>();
  auto plugin_paths = std::make_shared<std::vector<std::string>>();
  cmd->add_option("source", *source, "Run directory (its last checkpoint) or a checkpoint file")->required();
  cmd->add_option("--to", *to, "Output file (.pth)")->required();
  cmd->add_option("--naming", *naming, "Key names: torchvision, tsm (official TSM), mmaction (mmaction2), vexp")
      ->check(CLI::IsMember({"torchvision", "tsm", "mmaction", "vexp"}));
  cmd->add_option("--recipe", *recipe, "Recipe of the model (default: the run's resolved.toml)");
  cmd->add_option("--input", *input, "Clip shape T x C x H x W when the dataset cannot give it");
  cmd->add_option("--classes", *classes, "Class count when the dataset cannot give it")->check(CLI::PositiveNumber);
  add_plugin_path_option(cmd, *plugin_paths);
  cmd->callback([=] {
    std::string ckpt_path;
    fs::path run_dir;
    std::error_code ec;
    if (fs::is_directory(*source, ec)) {
      ckpt_path = latest_checkpoint_of(*source);
      if (ckpt_path.empty())
        throw Exit{kExitFailure, "'" + *source + "' is a directory with no checkpoint (no checkpoints/epoch_*.pt in it)"};
    } else if (fs::is_regular_file(*source, ec)) {
      ckpt_path = *source;
    } else {
      throw Exit{kExitFailure, "'" + *source + "': no such run directory or checkpoint"};
    }
    run_dir = fs::path(ckpt_path).parent_path().parent_path();  // RUN/checkpoints/epoch_NNNN.pt
    // The file first: a state dict given for a checkpoint is told as such, recipe or not.
    Checkpoint c;
    try {
      c = load_checkpoint(ckpt_path);
    } catch (const std::exception& e) {
      throw Exit{kExitFailure, e.what()};
    }
    RecipeArgs args;
    args.path = !recipe->empty() ? *recipe : (run_dir / "resolved.toml").string();
    args.plugin_paths = *plugin_paths;
    if (!fs::is_regular_file(args.path))
      throw Exit{kExitFailure, "no recipe for '" + *source + "': '" + args.path + "' does not exist; give --recipe"};
    ModelArgs m;
    if (!input->empty()) m.clip = parse_clip_shape(*input, "--input");
    m.classes = *classes;
    Session s;
    if (!open_model_session(s, args, m)) throw Exit{kExitInvalid, ""};
    auto model = build_model(s);
    WeightReport r = load_model_weights(*model, ckpt_path, true);
    StateDict out = export_weights(*model, model->layout(), *naming);
    save_tensor_dict(*to, out);
    std::cout << "wrote " << out.size() << " tensors (" << *naming << " names) from '" << ckpt_path << "' to '" << *to
              << "'\n";
  });
}

}  // namespace vexp::cli
