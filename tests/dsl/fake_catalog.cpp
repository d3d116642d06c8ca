#include "fake_catalog.hpp"

// The plugins' own, torch-free declarations.
#include "heads_decl.hpp"
#include "optimizers_decl.hpp"
#include "resnet_decl.hpp"
#include "temporal_shift_decl.hpp"

#include <atomic>
#include <fstream>
#include <random>

namespace vexp::dsl::testing {

namespace {

PluginDecl downsample() {
  PluginDecl d;
  d.kind = "op";
  d.name = "downsample";
  d.doc = "Halves H and W (an operator that must not be inserted)";
  d.infer_shape = [](const Params&, const std::vector<Shape>& in, const GraphContext&) {
    Shape s = in.at(0);
    s[2] /= 2;
    s[3] /= 2;
    return s;
  };
  return d;
}

PluginDecl synthetic_motion() {
  PluginDecl d;
  d.kind = "dataset";
  d.name = "synthetic_motion";
  d.doc = "Moving squares";
  d.schema.integer("frames", 8, "Frames per clip").at_least(1);
  d.schema.integer("size", 112, "Frame side").at_least(16);
  d.schema.integer("classes", 10, "Motion classes").at_least(2);
  d.schema.integer("clips", 64, "Clips per epoch").at_least(1);
  d.dataset_facts = [](const Params& p) {
    if (p.i64("classes") > 1000) throw std::runtime_error("at most 1000 classes");
    DatasetFacts f;
    f.clip = {p.i64("frames"), 3, p.i64("size"), p.i64("size")};
    f.classes = p.i64("classes");
    return f;
  };
  return d;
}

PluginDecl simple(const std::string& kind, const std::string& name) {
  PluginDecl d;
  d.kind = kind;
  d.name = name;
  d.doc = name;
  return d;
}

}  // namespace

FakeCatalog::FakeCatalog() {
  add(vexp_resnet::declaration());
  add(vexp_temporal_shift::declaration());
  add(downsample());
  add(vexp_heads::fold_time_declaration());
  add(vexp_heads::classifier_declaration());
  add(vexp_heads::segment_consensus_declaration());
  add(synthetic_motion());
  PluginDecl kinetics = simple("dataset", "kinetics");
  kinetics.schema.text("root", "", "Dataset folder").require();
  add(kinetics);
  PluginDecl local = simple("comm", "local");
  local.schema.real("timeout_s", 60, "Collective timeout").at_least(1);
  add(local);
  add(simple("comm", "mpi"));
  add(vexp_optimizers::sgd_declaration());
  add(vexp_optimizers::adamw_declaration());
  add(vexp_optimizers::lamb_declaration());
}

void FakeCatalog::add(PluginDecl decl) {
  auto key = std::make_pair(decl.kind, decl.name);
  decls_[key] = std::move(decl);
}

const PluginDecl* FakeCatalog::find(const std::string& kind, const std::string& name) const {
  auto it = decls_.find({kind, name});
  return it == decls_.end() ? nullptr : &it->second;
}

std::vector<std::string> FakeCatalog::names(const std::string& kind) const {
  std::vector<std::string> out;
  for (const auto& [key, decl] : decls_) {
    if (key.first == kind) out.push_back(key.second);
  }
  return out;
}

const FakeCatalog& fake_catalog() {
  static const FakeCatalog catalog;
  return catalog;
}

const char* const kQuickstart = R"([run]
name = "tsm_quick"
epochs = 3

[data]
dataset = "synthetic_motion"
params = { frames = 8, size = 64, classes = 10 }

[dist]
batch_per_gpu = 4

[optim]
lr = 0.01

[model]
input = "clip"
output = "logits"

[[model.node]]
id = "frames"
op = "fold_time"
in = "clip"

[[model.node]]
id = "features"
op = "resnet"
in = "frames"
depth = 18

[[model.node]]
id = "head"
op = "classifier"
in = "features"
classes = 10

[[model.node]]
id = "logits"
op = "segment_consensus"
in = "head"

[[model.rewrite]]
at = "features/layer*/block*/residual_in"
insert = { op = "temporal_shift", segments = 8, fold_div = 8 }
)";

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  dir_ = std::filesystem::temp_directory_path() /
         ("vexp-dsl-test-" + std::to_string(rd()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const auto p = dir_ / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string TempDir::path(const std::string& name) const {
  return name.empty() ? dir_.string() : (dir_ / name).string();
}

}  // namespace vexp::dsl::testing
