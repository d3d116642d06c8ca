// vexp export RUN_OR_CHECKPOINT --to model.pth [--naming torchvision|tsm|mmaction|vexp] [--recipe R]
// Writes a run's weights as a state dict PyTorch's torch.load reads, under the
// names torchvision / the official TSM code / mmaction2 use. With --recipe, a
// state dict of any of them converts to another's names.
#include <filesystem>
#include <iostream>

#include "vexp/runtime/checkpoint.hpp"
#include "commands/model_session.hpp"
#include "vexp/rundir/files.hpp"
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
  cmd->add_option("source", *source, "Run directory (its latest checkpoint), a checkpoint, or with --recipe a .pth "
                                     "state dict (torchvision, official TSM, mmaction2 names) to convert")->required();
  cmd->add_option("--to", *to, "Output file (.pth)")->required();
  cmd->add_option("--naming", *naming, "Key names: torchvision, tsm (official TSM), mmaction (mmaction2), vexp")
      ->check(CLI::IsMember({"torchvision", "tsm", "mmaction", "vexp"}));
  cmd->add_option("--recipe", *recipe, "Recipe of the model (default: the run's resolved.toml)");
  cmd->add_option("--input", *input, "Clip shape T x C x H x W when the dataset cannot give it");
  cmd->add_option("--classes", *classes, "Class count when the dataset cannot give it")->check(CLI::PositiveNumber);
  add_plugin_path_option(cmd, *plugin_paths);
  cmd->callback([=] {
    std::error_code ec;
    const bool from_dir = fs::is_directory(*source, ec);
    const std::string weights = weights_file(*source, "");
    // The recipe: --recipe, else the run's resolved.toml (RUN/checkpoints/epoch_NNNN.pt).
    fs::path run_dir = fs::path(weights).parent_path().parent_path();
    if (from_dir) run_dir = fs::is_regular_file(rundir::RunDir(*source).resolved()) ? fs::path(*source) : run_dir;
    PyRef root;  // the file, read once
    rundir::refuse_output(*to, "--to",
                  {{weights, "the checkpoint"},
                   {*source, "the source"},
                   {!recipe->empty() ? *recipe : rundir::RunDir(run_dir).resolved().string(), "the recipe"}});
    if (recipe->empty()) {
      // The file first: a state dict of another project (or a vexp export) is told as
      // such; converting it needs the model's recipe.
      try {
        root = load_checkpoint_file(weights);
        checkpoint_from(root, weights);
      } catch (const std::exception& e) {
        throw base::failure(std::string(e.what()) + "; to convert it to other names, give the model's --recipe");
      }
    }
    RecipeArgs args;
    args.path = !recipe->empty() ? *recipe : rundir::RunDir(run_dir).resolved().string();
    args.plugin_paths = *plugin_paths;
    if (!fs::is_regular_file(args.path))
      throw base::failure("no recipe for '" + *source + "': '" + args.path + "' does not exist; give --recipe");
    ModelArgs m;
    if (!input->empty()) m.clip = parse_clip_shape(*input, "--input");
    m.classes = *classes;
    Session s;
    if (!open_model_session(s, args, m)) throw base::invalid("");
    auto model = build_model(s);
    WeightReport r = load_model_weights(*model, weights, true, root);
    StateDict out = export_weights(*model, model->layout(), *naming);
    // The official TSM code and mmaction2 read checkpoint['state_dict'] (their own
    // checkpoints nest it so); torchvision's load_state_dict takes the dict itself.
    const bool nested = *naming == "tsm" || *naming == "mmaction";
    rundir::refuse_output(*to, "--to");  // and every file read since (the recipe's bases, a label map)
    save_tensor_dict(*to, out, nested ? "state_dict" : "");
    std::cout << "wrote " << out.size() << " tensors (" << *naming << " names" << (nested ? ", under 'state_dict'" : "")
              << ") from '" << weights << "' to '" << *to << "'\n";
  });
}

}  // namespace vexp::cli
