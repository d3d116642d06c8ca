#include "fake_catalog.hpp"

#include "temporal_shift_decl.hpp"  // the plugin's own, torch-free declaration

#include <atomic>
#include <fstream>
#include <random>

namespace vexp::dsl::testing {

namespace {

std::vector<int64_t> blocks_for(int64_t depth) {
  if (depth == 18) return {2, 2, 2, 2};
  if (depth == 101) return {3, 4, 23, 3};
  return {3, 4, 6, 3};
}

int64_t out_channels(int64_t depth, int layer) {
  return (depth < 50 ? 64 : 256) << (layer - 1);
}

int64_t spatial(int64_t size, int layer) {
  int64_t s = (size + 3) / 4;
  for (int i = 1; i < layer; ++i) s = (s + 1) / 2;
  return s;
}

PluginDecl resnet() {
  PluginDecl d;
  d.kind = "backbone";
  d.name = "resnet";
  d.doc = "ResNet backbone";
  d.schema.integer("depth", 50, "Depth").one_of({18, 34, 50, 101});
  d.schema.boolean("pretrained", false, "ImageNet weights");
  d.insertion_points = [](const Params& p) {
    std::vector<std::string> points;
    const auto blocks = blocks_for(p.i64("depth"));
    for (int layer = 1; layer <= 4; ++layer) {
      for (int64_t b = 0; b < blocks[static_cast<size_t>(layer - 1)]; ++b) {
        const std::string prefix = "layer" + std::to_string(layer) + "/block" + std::to_string(b) + "/";
        for (const char* where : {"block_in", "residual_in", "block_out"}) points.push_back(prefix + where);
      }
    }
    return points;
  };
  d.infer_shape = [](const Params& p, const std::vector<Shape>& in, const GraphContext&) {
    if (in.size() != 1 || in[0].size() != 4) throw ShapeError("expects one [N*T, C, H, W] input, got " + shape_str(in.empty() ? Shape{} : in[0]));
    if (in[0][1] != 3) throw ShapeError("expects 3 input channels, got " + std::to_string(in[0][1]));
    return Shape{in[0][0], out_channels(p.i64("depth"), 4)};
  };
  d.point_shape = [](const Params& p, const std::string& point, const Shape& input) {
    const int64_t depth = p.i64("depth");
    const int layer = point[5] - '0';
    const bool first = point.compare(6, 7, "/block0") == 0;
    const bool out = point.size() > 9 && point.substr(point.size() - 9) == "block_out";
    const int64_t size = input[2];
    if (out || !first) return Shape{input[0], out_channels(depth, layer), spatial(size, layer), spatial(size, layer)};
    if (layer == 1) return Shape{input[0], 64, spatial(size, 1), spatial(size, 1)};
    return Shape{input[0], out_channels(depth, layer - 1), spatial(size, layer - 1), spatial(size, layer - 1)};
  };
  return d;
}

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

PluginDecl fold_time() {
  PluginDecl d;
  d.kind = "op";
  d.name = "fold_time";
  d.doc = "[N, T, C, H, W] -> [N*T, C, H, W]";
  d.infer_shape = [](const Params&, const std::vector<Shape>& in, const GraphContext&) {
    const Shape& s = in.at(0);
    if (s.size() != 5) throw ShapeError("expects [N, T, C, H, W], got " + shape_str(s));
    return Shape{s[0] * s[1], s[2], s[3], s[4]};
  };
  return d;
}

PluginDecl classifier() {
  PluginDecl d;
  d.kind = "op";
  d.name = "classifier";
  d.doc = "Dropout and a linear layer";
  d.schema.integer("classes", 0, "Output classes").at_least(1).require();
  d.schema.real("dropout", 0.5, "Dropout probability").range(0, 0.99);
  d.infer_shape = [](const Params& p, const std::vector<Shape>& in, const GraphContext&) {
    const Shape& s = in.at(0);
    if (s.size() != 2) throw ShapeError("expects [N, features], got " + shape_str(s));
    return Shape{s[0], p.i64("classes")};
  };
  return d;
}

PluginDecl segment_consensus() {
  PluginDecl d;
  d.kind = "op";
  d.name = "segment_consensus";
  d.doc = "Averages the per-frame logits of each clip";
  d.schema.text("mode", "avg", "Consensus").one_of({"avg", "max"});
  d.infer_shape = [](const Params&, const std::vector<Shape>& in, const GraphContext& ctx) {
    const Shape& s = in.at(0);
    if (s.size() != 2) throw ShapeError("expects [N*T, K], got " + shape_str(s));
    if (ctx.frames <= 0 || s[0] % ctx.frames != 0) throw ShapeError("batch is not a multiple of the frames");
    return Shape{s[0] / ctx.frames, s[1]};
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
  add(resnet());
  add(vexp_temporal_shift::declaration());
  add(downsample());
  add(fold_time());
  add(classifier());
  add(segment_consensus());
  add(synthetic_motion());
  PluginDecl kinetics = simple("dataset", "kinetics");
  kinetics.schema.text("root", "", "Dataset folder").require();
  add(kinetics);
  PluginDecl local = simple("comm", "local");
  local.schema.real("timeout_s", 60, "Collective timeout").at_least(1);
  add(local);
  add(simple("comm", "mpi"));
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
