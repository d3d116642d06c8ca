#include "model_session.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "vexp/runtime/checkpoint.hpp"

namespace vexp::cli {
namespace {

// The host's catalog with the recipe's dataset replaced by one whose facts are given.
class FactsCatalog : public dsl::PluginCatalog {
 public:
  FactsCatalog(const dsl::PluginCatalog& base, const std::string& dataset, const ModelArgs& m) : base_(base) {
    dataset_ = dataset;
    const dsl::PluginDecl* real = base.find("dataset", dataset);
    if (real) decl_ = *real;
    decl_.kind = "dataset";
    decl_.name = dataset;
    auto inner = decl_.dataset_facts;
    const ModelArgs given = m;
    decl_.dataset_facts = [inner, given](const dsl::Params& p) {
      dsl::DatasetFacts f;
      if (inner) {
        try {
          f = inner(p);
        } catch (const std::exception&) {
          if (!given.clip || given.classes <= 0) throw;
        }
      }
      if (given.clip) f.clip = *given.clip;
      if (given.classes > 0) f.classes = given.classes;
      return f;
    };
  }
  bool has_real() const { return base_.find("dataset", dataset_) != nullptr; }
  const dsl::PluginDecl* find(const std::string& kind, const std::string& name) const override {
    if (kind == "dataset" && name == dataset_) return &decl_;
    return base_.find(kind, name);
  }
  std::vector<std::string> names(const std::string& kind) const override { return base_.names(kind); }

 private:
  const dsl::PluginCatalog& base_;
  std::string dataset_;
  dsl::PluginDecl decl_;
};

}  // namespace

dsl::Shape parse_clip_shape(const std::string& text, const char* option) {
  return parse_four_sizes(text, option, "T x C x H x W", "8x3x224x224");
}

bool open_model_session(Session& s, const RecipeArgs& args, const ModelArgs& m) {
  if (!m.clip && m.classes <= 0) return open_session(s, args);
  const std::vector<dsl::Override> overrides = parse_sets(args.sets);
  load_session_plugins(s, args.plugin_paths);
  try {
    if (load_recipe_and_plugins(s, args.path, overrides)) {
      std::string dataset;
      if (dsl::Value* data = s.recipe->root.find("data")) {
        if (const dsl::Value* d = data->find("dataset"); d && d->is_string()) dataset = d->as_string();
        FactsCatalog probe(s.host, dataset, m);
        if (!dataset.empty() && !probe.has_real()) {
          // The dataset plugin is not loaded: its parameters cannot be checked.
          std::cerr << "vexp: warning: dataset '" << dataset << "' is not loaded; using the given input shape and "
                    << "classes, its parameters are not checked\n";
          if (!m.clip || m.classes <= 0)
            throw Exit{kExitInvalid, "dataset '" + dataset + "' is not loaded: give both --input TxCxHxW and --classes N"};
          data->erase("params");
        }
      }
      FactsCatalog catalog(s.host, dataset, m);
      dsl::ValidateOptions vo;
      vo.require_data = false;  // the model needs shapes, not the data files
      s.plan = dsl::validate(*s.recipe, catalog, s.diags, vo);
    }
  } catch (const dsl::RecipeError& e) {
    throw Exit{kExitInvalid, e.what()};
  }
  const bool ok = s.plan.has_value() && !s.diags.has_errors();
  for (const auto& d : s.diags.sorted()) std::cerr << d.str() << "\n";
  if (!ok) {
    size_t n = s.diags.error_count();
    std::cerr << args.path << ": " << n << (n == 1 ? " error" : " errors") << "\n";
  }
  return ok;
}

dsl::Shape clip_shape(const Session& s) { return s.plan->data_facts.clip; }

std::shared_ptr<ModelGraph> build_model(const Session& s) {
  try {
    return std::make_shared<ModelGraph>(*s.plan, s.host);
  } catch (const Exit&) {
    throw;
  } catch (const std::exception& e) {
    throw Exit{kExitFailure, e.what()};
  }
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
      throw Exit{kExitFailure, label + "'" + given + "' is a directory with no checkpoint (no checkpoints/epoch_*.pt "
                               "in it): give a run directory that has written a checkpoint, a checkpoint or a .pth file"};
    std::cerr << "vexp: " << label << "'" << given << "': using its latest checkpoint '" << latest << "'\n";
    return latest;
  }
  if (!fs::exists(given, ec)) throw Exit{kExitFailure, label + "'" + given + "': no such file or directory"};
  if (!fs::is_regular_file(given, ec))
    throw Exit{kExitFailure, label + "'" + given + "' is not a regular file (a device or a pipe?)"};
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
    throw Exit{kExitFailure, e.what()};
  }
  WeightReport r;
  try {
    r = load_weights(model, model.layout(), model.node_ids(), sd, WeightOptions{}, path);
  } catch (const std::exception& e) {
    throw Exit{kExitFailure, e.what()};
  }
  if (strict && r.loaded.empty() && !sd.empty())
    throw Exit{kExitFailure, "'" + path + "' holds none of the model's tensors: its " + std::to_string(sd.size()) +
                                 " tensors (e.g. '" + sd.front().first +
                                 "') match no name of the model under torchvision, official TSM, mmaction2 or vexp "
                                 "naming; is it the weights of another model?"};
  if (strict) {
    std::vector<std::string> bad;
    for (const auto& m : r.missing)
      if (m.size() < 20 || m.compare(m.size() - 20, 20, ".num_batches_tracked") != 0) bad.push_back(m);
    if (!r.dropped.empty() || !bad.empty()) {
      std::string what = r.summary(path, true);
      throw Exit{kExitFailure, "'" + path + "' does not hold every weight of the model (" +
                                   std::to_string(bad.size()) + " missing, " + std::to_string(r.dropped.size()) +
                                   " with another class count): " + what};
    }
  }
  return r;
}

}  // namespace vexp::cli
