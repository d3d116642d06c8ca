// The parity driver of the clip transforms' pixel operations
// (plugins/transforms/clip/image_ops.*): applies one op to one frame read from a
// raw file and writes the result, for tests/parity/parity.py (transforms_ops) to
// compare with torchvision's functional on the same frame.
//   vexp_transform_ops OP VALUE C H W IN OUT
// OP: brightness, contrast, saturation, hue, grayscale (float32 frames, torchvision's
// float semantics; VALUE the factor), or ra_<op> [_bilinear] (uint8 frames, one
// RandAugment op at the signed magnitude VALUE), or ra_magnitude_<op> (the op's
// magnitude at bin VALUE of C bins for an H x W frame, one double; IN unused).
// Frames are planar [C, H, W].
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "image_ops.hpp"

namespace xf = vexp::xform;

template <class T>
std::vector<T> read_raw(const std::string& path, size_t n) {
  std::vector<T> v(n);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T))))
    throw std::runtime_error("cannot read " + std::to_string(n) + " values from " + path);
  return v;
}

template <class T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

int main(int argc, char** argv) {
  if (argc != 8) {
    std::cerr << "usage: vexp_transform_ops OP VALUE C H W IN OUT\n";
    return 2;
  }
  try {
    std::string op = argv[1];
    const double value = std::strtod(argv[2], nullptr);
    const int C = std::atoi(argv[3]), H = std::atoi(argv[4]), W = std::atoi(argv[5]);
    const size_t n = static_cast<size_t>(C) * H * W;
    if (op.rfind("ra_", 0) != 0) {
      std::vector<float> img = read_raw<float>(argv[6], n);
      if (op == "brightness") xf::adjust_brightness(img.data(), C, H, W, value);
      else if (op == "contrast") xf::adjust_contrast(img.data(), C, H, W, value);
      else if (op == "saturation") xf::adjust_saturation(img.data(), C, H, W, value);
      else if (op == "hue") xf::adjust_hue(img.data(), C, H, W, value);
      else if (op == "grayscale") xf::to_grayscale(img.data(), C, H, W);
      else throw std::runtime_error("unknown op " + op);
      write_raw(argv[7], img);
      return 0;
    }
    if (op.rfind("ra_magnitude_", 0) == 0) {  // VALUE: the bin, C: the bins; writes one double
      op = op.substr(13);
      const auto& names = xf::ra_op_names();
      size_t k = 0;
      while (k < names.size() && names[k] != op) ++k;
      if (k == names.size()) throw std::runtime_error("unknown RandAugment op " + op);
      write_raw(argv[7], std::vector<double>{xf::ra_magnitude(static_cast<xf::RaOp>(k), static_cast<int>(value), C, H, W)});
      return 0;
    }
    op = op.substr(3);
    bool bilinear = false;
    if (op.size() > 9 && op.compare(op.size() - 9, 9, "_bilinear") == 0) {
      bilinear = true;
      op = op.substr(0, op.size() - 9);
    }
    const auto& names = xf::ra_op_names();
    size_t k = 0;
    while (k < names.size() && names[k] != op) ++k;
    if (k == names.size()) throw std::runtime_error("unknown RandAugment op " + op);
    std::vector<uint8_t> img = read_raw<uint8_t>(argv[6], n), scratch;
    xf::ra_apply(static_cast<xf::RaOp>(k), value, img.data(), C, H, W, bilinear, scratch);
    write_raw(argv[7], img);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "vexp_transform_ops: " << e.what() << "\n";
    return 1;
  }
}
