#include "resnet_decl.hpp"

#include <string>
#include <vector>

#include "resnet_plan.hpp"

namespace vexp_resnet {

vexp::schema::PluginDecl declaration() {
  vexp::schema::PluginDecl d("resnet",
      "ResNet backbone (torchvision topology and names, no pooling or fc): [M, C, H, W] -> last feature map");
  d.kind = "backbone";
  d.schema.integer("depth", 50, "Number of layers: BasicBlocks for 18/34, Bottlenecks for 50+")
      .one_of({18, 34, 50, 101, 152});
  d.schema.real("width", 1.0, "channel multiplier: stage widths 64,128,256,512 x width, at least 1").range(0.01, 4);
  d.schema.integer("in_channels", 3, "Channels of the input frames").at_least(1);
  d.schema.text("stem", "imagenet", "imagenet: 7x7/2 conv + 3x3/2 max-pool; cifar: 3x3/1 conv, no pool")
      .one_of({"imagenet", "cifar"});
  d.schema.boolean("zero_init_residual", false, "Zero the last BN weight of each block (each block starts as identity)");
  d.insertion_points = [](const vexp::schema::Params& p) { return insertion_points(Plan::from(p)); };
  d.infer_shape = [](const vexp::schema::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext&) {
    if (in.size() != 1) throw vexp::schema::ShapeError("resnet: expects one input, got " + std::to_string(in.size()));
    return output_shape(Plan::from(p), in[0]);
  };
  d.point_shape = [](const vexp::schema::Params& p, const std::string& point, const Shape& input) {
    return point_shape(Plan::from(p), point, input);
  };
  return d;
}

}  // namespace vexp_resnet
