// What validation needs to know about plugins, without loading torch:
// names, schemas, insertion points and early shape facts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "vexp/schema/schema.hpp"
#include "vexp/schema/value.hpp"
#include "vexp/kinds.hpp"

namespace vexp::schema {

// A tensor shape; -1 marks a dimension that is not known before running.
using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[8, 3, 224, 224]" ("?" for -1)

// Facts about the run that shape checks may use.
struct GraphContext {
  int64_t batch = -1;    // clips per step on one rank (micro-batch)
  int64_t frames = -1;   // T of the input clip
  int64_t classes = -1;  // classes of the dataset
};

// Thrown by shape hooks: the message names the problem (no location; the
// validator adds the node's location).
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct DatasetFacts {
  Shape clip;            // [T, C, H, W] of one training clip
  int64_t classes = -1;
};

// A plugin's declaration. Optional hooks may be empty.
struct PluginDecl {
  PluginDecl() = default;
  // The usual start of a declaration: `vexp::PluginDecl d("temporal_smooth", "Blends ...");`
  // (kind is set by the Registrar's add_* that registers it). Constructors change no
  // layout: ABI 6 as before (sdk/tests/test_abi_pin.cpp).
  PluginDecl(std::string name_, std::string doc_) : name(std::move(name_)), doc(std::move(doc_)) {}

  std::string kind;      // "op", "backbone", "dataset", "comm" (vexp/kinds.hpp)
  std::string name;
  std::string doc;       // one line
  std::string library;   // file it came from ("" for built-ins)
  std::string library_version;
  Schema schema;
  // Backbones: the insertion points the given parameters produce
  // ("layer1/block0/residual_in", ...).
  std::function<std::vector<std::string>(const Params&)> insertion_points;
  // Output shape for the given input shapes; throws ShapeError.
  std::function<Shape(const Params&, const std::vector<Shape>&, const GraphContext&)> infer_shape;
  // Backbones: the shape of the tensor flowing through `point` for this input.
  std::function<Shape(const Params&, const std::string& point, const Shape& input)> point_shape;
  // Datasets: clip shape and class count for the given parameters.
  std::function<DatasetFacts(const Params&)> dataset_facts;
  // Datasets: throws a sentence (naming the path) when the data the parameters
  // point at is missing. `vexp run` refuses to start; `vexp check` warns. A sentence
  // that starts with a parameter's name ("train_list: ...") is reported at the
  // place the recipe gives that parameter.
  std::function<void(const Params&)> check_data;
  // Ops that are a model's classification head: the names of the head's
  // parameters, relative to the node, each a prefix ("fc." for a linear `fc`).
  // The runtime takes the last node whose op declares a head as the model's
  // classifier (checkpoint formats map their classifier tensors to it) and gives
  // these parameters the head's learning rates (optim.fc_lr5). Empty: not a head.
  std::vector<std::string> head_parameters;
};

class PluginCatalog {
 public:
  virtual ~PluginCatalog() = default;
  virtual const PluginDecl* find(const std::string& kind, const std::string& name) const = 0;
  // Names of every plugin of `kind`, sorted.
  virtual std::vector<std::string> names(const std::string& kind) const = 0;
};

// Layers of a model graph may come from these kinds (those making vexp::Layer).
inline const std::vector<std::string>& layer_kinds() {
  static const std::vector<std::string> kinds = kinds_making(Interface::Layer);
  return kinds;
}

}  // namespace vexp::schema
