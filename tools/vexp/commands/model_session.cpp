#include "commands/model_session.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "vexp/dataset.hpp"

#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/label_map.hpp"
#include "vexp/runtime/checkpoint.hpp"

namespace vexp::cli {

dsl::Shape parse_clip_shape(const std::string& text, const char* option) {
  return parse_four_sizes(text, option, "T x C x H x W", "8x3x224x224");
}

bool open_model_session(Session& s, const RecipeArgs& args, const ModelArgs& m) {
  if (!m.clip && m.classes <= 0) return open_session(s, args);
  // Given facts replace the dataset's; a dataset plugin that is not loaded is stood
  // in for (its parameters unchecked) when both are given, as the model needs both.
  const bool both = m.clip && m.classes > 0;
  OpenOptions o;
  o.require_data = false;  // the model needs shapes, not the data files
  o.clip = m.clip;
  o.classes = m.classes;
  o.stand_in = both;
  if (open_session(s, args, std::move(o))) return true;
  if (!both && s.recipe) {
    const dsl::Value* data = s.recipe->root.is_table() ? s.recipe->root.find("data") : nullptr;
    const dsl::Value* d = data && data->is_table() ? data->find("dataset") : nullptr;
    if (d && d->is_string() && !s.host.find("dataset", d->as_string()))
      throw base::invalid("dataset '" + d->as_string() + "' is not loaded: give both --input TxCxHxW and --classes N");
  }
  return false;
}

dsl::Shape clip_shape(const Session& s) { return s.plan->data_facts.clip; }

std::shared_ptr<ModelGraph> build_model(const Session& s) {
  return std::make_shared<ModelGraph>(*s.plan, s.host);
}

namespace {

namespace fs = std::filesystem;

// Class names, one per line (line k is class k): read by vexp::kinetics, the one
// reader of label maps, as the kinetics dataset reads its label_map.
// Its errors name the file (and the line).
std::vector<std::string> read_labels(const std::string& path) { return kinetics::read_label_map(path).names(); }

// A string parameter of the recipe's dataset ("" when it has none).
std::string dataset_text(const Session& s, const char* key) {
  const dsl::Params& p = s.plan->dataset_params;
  return p.has(key) && p.get(key).is_string() ? p.str(key) : std::string();
}

// A path of the dataset's parameters: relative ones are under data.params.root, as
// the kinetics dataset resolves its lists and label_map.
fs::path under_data_root(const Session& s, const std::string& p) {
  const fs::path q(p);
  const std::string root = dataset_text(s, "root");
  return q.is_absolute() || root.empty() ? q : fs::path(root) / q;
}

}  // namespace

// The first of: --labels FILE, the recipe's data.params.label_map, the dataset's own
// names (Dataset::class_names: synthetic_motion's, a kinetics CSV's), classes.txt in
// the data root (what `vexp data make-synthetic` and `vexp data prepare` write).
std::pair<std::vector<std::string>, std::string> class_names(const Session& s, const std::string& labels) {
  if (!labels.empty()) return {read_labels(labels), "'" + labels + "'"};
  const std::string label_map = dataset_text(s, "label_map");
  if (!label_map.empty()) {
    const std::string path = under_data_root(s, label_map).string();
    return {read_labels(path), "the label map '" + path + "'"};
  }
  try {
    auto data = s.host.make<Dataset>("dataset", s.plan->dataset, s.plan->dataset_params);
    std::vector<std::string> names = data->class_names();
    if (!names.empty()) return {names, "the dataset '" + s.plan->dataset + "'"};
  } catch (const std::exception&) {
    // The data is not on this machine (or the plugin is not loaded): no names from it.
  }
  if (!dataset_text(s, "root").empty()) {
    const fs::path classes = under_data_root(s, "classes.txt");
    std::error_code ec;
    if (fs::is_regular_file(classes, ec)) return {read_labels(classes.string()), "'" + classes.string() + "'"};
  }
  return {{}, ""};
}

std::string latest_checkpoint_of(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const fs::path& d : {fs::path(dir) / "checkpoints", fs::path(dir)}) {
    std::string latest = latest_checkpoint(d.string());
    if (!latest.empty()) return latest;
  }
  return "";
}

std::string weights_file(const std::string& given, const std::string& option) {
  namespace fs = std::filesystem;
  const std::string label = option.empty() ? std::string() : option + " ";
  std::error_code ec;
  if (fs::is_directory(given, ec)) {
    std::string latest = latest_checkpoint_of(given);
    if (latest.empty())
      throw base::failure(label + "'" + given + "' is a directory with no checkpoint (no checkpoints/epoch_*.pt "
                               "in it): give a run directory that has written a checkpoint, a checkpoint or a .pth file");
    std::cerr << "vexp: " << label << "'" << given << "': using its latest checkpoint '" << latest << "'\n";
    return latest;
  }
  if (!fs::exists(given, ec)) throw base::failure(label + "'" + given + "': no such file or directory");
  if (!fs::is_regular_file(given, ec))
    throw base::failure(label + "'" + given + "' is not a regular file (a device or a pipe?)");
  return given;
}

}  // namespace vexp::cli

#include "vexp/runtime/torch_save.hpp"

namespace vexp::cli {

WeightReport load_model_weights(ModelGraph& model, const std::string& path, bool strict, PyRef root) {
  StateDict sd;
  // One read of the file: a vexp checkpoint (names as they are), else a torch.save
  // state dict.
  try {
    if (!root) root = load_torch_file(path);
    if (is_checkpoint(root)) {
      for (auto& [k, v] : checkpoint_from(root, path).model) sd.emplace_back(k, v);
    } else {
      sd = find_state_dict(root, path);
    }
  } catch (const std::exception& e) {
    throw base::failure(e.what());
  }
  WeightReport r;
  try {
    r = load_weights(model, model.layout(), model.node_ids(), sd, WeightOptions{}, path);
  } catch (const std::exception& e) {
    throw base::failure(e.what());
  }
  if (strict && r.loaded.empty() && !sd.empty())
    throw base::failure("'" + path + "' holds none of the model's tensors: its " + std::to_string(sd.size()) +
                                 " tensors (e.g. '" + sd.front().first +
                                 "') match no name of the model under torchvision, official TSM, mmaction2 or vexp "
                                 "naming; is it the weights of another model?");
  if (strict) {
    std::vector<std::string> bad;
    for (const auto& m : r.missing)
      if (m.size() < 20 || m.compare(m.size() - 20, 20, ".num_batches_tracked") != 0) bad.push_back(m);
    if (!r.dropped.empty() || !bad.empty()) {
      std::string what = r.summary(path, true);
      throw base::failure("'" + path + "' does not hold every weight of the model (" +
                                   std::to_string(bad.size()) + " missing, " + std::to_string(r.dropped.size()) +
                                   " with another class count): " + what);
    }
  }
  return r;
}

}  // namespace vexp::cli
