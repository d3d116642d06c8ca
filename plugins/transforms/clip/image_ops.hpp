// The pixel operations of the clip transform plugins, on one frame at a time:
// planar [C, H, W] (C = 1 or 3, RGB), torch-free, no allocation beyond scratch
// vectors. Each follows torchvision 0.14's tensor functional (F.adjust_*, F.affine,
// F.rotate, F.posterize, ...) operation for operation, in float32 where torchvision
// computes in float32, so that the parity tests (tests/parity/parity.py,
// transforms_*) compare them with torchvision itself:
//   float frames: values in [0, 1], torchvision's semantics for float tensors
//                 (colour jitter, grayscale);
//   8-bit frames: torchvision's semantics for uint8 tensors (RandAugment, as
//                 torchvision's RandAugment runs on PIL / uint8 images: every op
//                 rounds or truncates back to 0..255 as torchvision does).
// Compiled into the transforms plugin and into the parity driver
// (tests/parity/transform_ops_main.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp::xform {

// ---- float frames ([C, H, W], values in [0, 1]) ----

// torchvision _blend(img, 0, f): clamp(f * x, 0, 1).
void adjust_brightness(float* img, int C, int H, int W, double factor);
// _blend(img, mean, f) with mean the frame's mean gray (C = 3) or mean value (C = 1).
void adjust_contrast(float* img, int C, int H, int W, double factor);
// _blend(img, gray, f); no effect on one channel.
void adjust_saturation(float* img, int C, int H, int W, double factor);
// RGB -> HSV, h = (h + factor) mod 1, HSV -> RGB (torchvision's _rgb2hsv / _hsv2rgb);
// factor in [-0.5, 0.5]; no effect on one channel.
void adjust_hue(float* img, int C, int H, int W, double factor);
// Every channel := 0.2989 R + 0.587 G + 0.114 B (rgb_to_grayscale with as many
// output channels as input); no effect on one channel.
void to_grayscale(float* img, int C, int H, int W);

// ---- 8-bit frames ([C, H, W], 0..255) ----

// torchvision's convert_image_dtype(float -> uint8): x * 255.999 truncated, after
// clamping to [0, 1] (exact for the decoder's v / 255); and back: v / 255.
void to_u8(const float* in, uint8_t* out, int64_t n);
void from_u8(const uint8_t* in, float* out, int64_t n);

void brightness_u8(uint8_t* img, int C, int H, int W, double factor);
void contrast_u8(uint8_t* img, int C, int H, int W, double factor);
void saturation_u8(uint8_t* img, int C, int H, int W, double factor);
void sharpness_u8(uint8_t* img, int C, int H, int W, double factor);
void posterize_u8(uint8_t* img, int C, int H, int W, int bits);
void solarize_u8(uint8_t* img, int C, int H, int W, double threshold);
void autocontrast_u8(uint8_t* img, int C, int H, int W);
void equalize_u8(uint8_t* img, int C, int H, int W);

// torchvision's inverse affine matrix (_get_inverse_affine_matrix): output pixel ->
// input pixel, about `center` (pixels relative to the image centre), angle and
// shear in degrees.
void inverse_affine_matrix(double center_x, double center_y, double angle, double tx, double ty, double scale,
                           double shear_x, double shear_y, double m[6]);
// F_t.affine / F_t.rotate (expand = false): the output sampled at the inverse
// affine `m` of each pixel (torchvision's affine grid and grid_sample, zero fill,
// align_corners = false); `scratch` must hold C * H * W bytes. bilinear: rounded to
// the nearest level as torchvision does for uint8.
void affine_u8(uint8_t* img, int C, int H, int W, const double m[6], bool bilinear, std::vector<uint8_t>& scratch);

// ---- RandAugment (torchvision.transforms.RandAugment's op list and magnitudes) ----

enum class RaOp {
  Identity,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
  Rotate,
  Brightness,
  Color,
  Contrast,
  Sharpness,
  Posterize,
  Solarize,
  AutoContrast,
  Equalize
};
// The recipe names, in torchvision's order: identity, shear_x, shear_y, translate_x,
// translate_y, rotate, brightness, color, contrast, sharpness, posterize, solarize,
// autocontrast, equalize.
const std::vector<std::string>& ra_op_names();
// Whether an op's magnitude takes a random sign.
bool ra_signed(RaOp op);
// The op's magnitude at bin `bin` of `bins` (torchvision's _augmentation_space for an
// H x W image; 0 for the ops without one), before the sign.
double ra_magnitude(RaOp op, int bin, int bins, int H, int W);
// One op at a signed magnitude on an 8-bit frame (torchvision's _apply_op).
void ra_apply(RaOp op, double magnitude, uint8_t* img, int C, int H, int W, bool bilinear,
              std::vector<uint8_t>& scratch);

}  // namespace vexp::xform
