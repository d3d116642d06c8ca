// Opening a recipe for model-only commands (info, predict, export): open_session
// with the clip shape and class count given explicitly (the runtime's OpenOptions
// clip / classes), so the model can be built when the dataset plugin cannot give
// those facts, or is not installed (given both, its stand-in then takes its place
// and its parameters are not checked).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands/common.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp::cli {

struct ModelArgs {
  std::optional<dsl::Shape> clip;  // [T, C, H, W]
  int64_t classes = -1;
};

// Parses "8x3x224x224" (T x C x H x W). Throws Exit naming the option.
dsl::Shape parse_clip_shape(const std::string& text, const char* option);

// Loads plugins and the recipe and validates it; prints diagnostics. Returns false
// when invalid. With `m.clip` / `m.classes` the dataset facts are replaced.
bool open_model_session(Session& s, const RecipeArgs& args, const ModelArgs& m);

// The clip shape the model runs on: the dataset's (or the override).
dsl::Shape clip_shape(const Session& s);

// Builds the model; a failure (e.g. a bad `pretrained` file) becomes Exit 1.
std::shared_ptr<ModelGraph> build_model(const Session& s);

// The class names of the recipe's dataset and where they come from, the first that
// has them: `labels` (a file, one name per line), the recipe's data.params.label_map
// (relative to its data root), the dataset's own names (Dataset::class_names),
// classes.txt in the data root. Empty names when none has them.
std::pair<std::vector<std::string>, std::string> class_names(const Session& s, const std::string& labels);

// The newest checkpoint (epoch_NNNN.pt) of a run directory (in DIR/checkpoints) or
// of a checkpoints folder itself; empty when there is none.
std::string latest_checkpoint_of(const std::string& dir);

// The weights file `given` names for `option` ("--weights"): a file as it is, a run
// directory (or its checkpoints folder) as its newest checkpoint, which is
// announced on stderr. A directory without one, or nothing at all, is Exit 1
// naming it (and `option`, when not empty).
std::string weights_file(const std::string& given, const std::string& option);

}  // namespace vexp::cli

namespace vexp::cli {
// Loads `path` into the whole model: a vexp checkpoint (names as they are) or a
// torch.save state dict (torchvision / official TSM / mmaction2 names mapped).
// With `strict`, a parameter or running statistic the file does not provide, or a
// classifier whose class count differs, is an error (Exit 1) naming them. `root`:
// the file as load_torch_file read it already (it is then not read again).
WeightReport load_model_weights(ModelGraph& model, const std::string& path, bool strict, PyRef root = nullptr);
}  // namespace vexp::cli
