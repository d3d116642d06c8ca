#include "image_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace vexp::xform {

namespace {

constexpr double kPi = 3.14159265358979323846;
// CPython's math.radians / math.degrees factors.
constexpr double kDegToRad = kPi / 180.0;
constexpr double kRadToDeg = 180.0 / kPi;

inline float clamp01(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }

// torchvision's rgb_to_grayscale of one pixel, in float32 as there.
inline float gray_of(float r, float g, float b) { return 0.2989f * r + 0.587f * g + 0.114f * b; }

// _blend for float frames: clamp(r * a + (1 - r) * b, 0, 1), r and 1 - r rounded to float.
struct Blend {
  float r, q;
  explicit Blend(double ratio) : r(static_cast<float>(ratio)), q(static_cast<float>(1.0 - ratio)) {}
  float operator()(float a, float b) const { return clamp01(r * a + q * b); }
  // uint8: clamped to [0, 255], truncated (Tensor.to(torch.uint8)).
  uint8_t u8(uint8_t a, float b) const {
    const float v = r * static_cast<float>(a) + q * b;
    return static_cast<uint8_t>(v < 0.f ? 0.f : (v > 255.f ? 255.f : v));
  }
};

}  // namespace

// ---- float frames ----

void adjust_brightness(float* img, int C, int H, int W, double factor) {
  const Blend blend(factor);
  const int64_t n = static_cast<int64_t>(C) * H * W;
  for (int64_t i = 0; i < n; ++i) img[i] = blend(img[i], 0.f);
}

void adjust_contrast(float* img, int C, int H, int W, double factor) {
  const int64_t plane = static_cast<int64_t>(H) * W;
  double sum = 0;
  if (C == 3) {
    for (int64_t i = 0; i < plane; ++i) sum += gray_of(img[i], img[plane + i], img[2 * plane + i]);
  } else {
    for (int64_t i = 0; i < C * plane; ++i) sum += img[i];
  }
  const float mean = static_cast<float>(sum / static_cast<double>(C == 3 ? plane : C * plane));
  const Blend blend(factor);
  for (int64_t i = 0; i < C * plane; ++i) img[i] = blend(img[i], mean);
}

void adjust_saturation(float* img, int C, int H, int W, double factor) {
  if (C != 3) return;
  const int64_t plane = static_cast<int64_t>(H) * W;
  const Blend blend(factor);
  for (int64_t i = 0; i < plane; ++i) {
    const float g = gray_of(img[i], img[plane + i], img[2 * plane + i]);
    for (int c = 0; c < 3; ++c) img[c * plane + i] = blend(img[c * plane + i], g);
  }
}

void adjust_hue(float* img, int C, int H, int W, double factor) {
  if (C != 3) return;
  const int64_t plane = static_cast<int64_t>(H) * W;
  const float hue = static_cast<float>(factor);
  for (int64_t i = 0; i < plane; ++i) {
    const float r = img[i], g = img[plane + i], b = img[2 * plane + i];
    // _rgb2hsv
    const float maxc = std::max(std::max(r, g), b), minc = std::min(std::min(r, g), b);
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.f : maxc);
    const float crd = eqc ? 1.f : cr;
    const float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
    const float hr = maxc == r ? bc - gc : 0.f;
    const float hg = (maxc == g && maxc != r) ? 2.f + rc - bc : 0.f;
    const float hb = (maxc != g && maxc != r) ? 4.f + gc - rc : 0.f;
    float h = std::fmod((hr + hg + hb) / 6.f + 1.f, 1.f);
    // (h + hue) % 1.0, Python's remainder (torch.remainder)
    h = h + hue;
    float m = std::fmod(h, 1.f);
    if (m != 0.f && m < 0.f) m += 1.f;
    h = m;
    const float v = maxc;
    // _hsv2rgb
    const float fi = std::floor(h * 6.f);
    const float f = h * 6.f - fi;
    int k = static_cast<int>(fi) % 6;
    if (k < 0) k += 6;
    const float p = clamp01(v * (1.f - s));
    const float q = clamp01(v * (1.f - s * f));
    const float t = clamp01(v * (1.f - s * (1.f - f)));
    static const int sel[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
    const float vals[4] = {v, p, q, t};  // 0 v, 1 p, 2 q, 3 t
    img[i] = vals[sel[k][0]];
    img[plane + i] = vals[sel[k][1]];
    img[2 * plane + i] = vals[sel[k][2]];
  }
}

void to_grayscale(float* img, int C, int H, int W) {
  if (C != 3) return;
  const int64_t plane = static_cast<int64_t>(H) * W;
  for (int64_t i = 0; i < plane; ++i) {
    const float g = gray_of(img[i], img[plane + i], img[2 * plane + i]);
    img[i] = img[plane + i] = img[2 * plane + i] = g;
  }
}

// ---- 8-bit frames ----

void to_u8(const float* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(clamp01(in[i]) * 255.999f);
}

void from_u8(const uint8_t* in, float* out, int64_t n) {
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>(v) / 255.f;
  for (int64_t i = 0; i < n; ++i) out[i] = lut[in[i]];
}

namespace {
// rgb_to_grayscale of a uint8 frame: the float sum truncated to uint8.
inline uint8_t gray_u8(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>(gray_of(static_cast<float>(r), static_cast<float>(g), static_cast<float>(b)));
}
}  // namespace

void brightness_u8(uint8_t* img, int C, int H, int W, double factor) {
  const Blend blend(factor);
  const int64_t n = static_cast<int64_t>(C) * H * W;
  for (int64_t i = 0; i < n; ++i) img[i] = blend.u8(img[i], 0.f);
}

void contrast_u8(uint8_t* img, int C, int H, int W, double factor) {
  const int64_t plane = static_cast<int64_t>(H) * W;
  int64_t sum = 0;
  if (C == 3) {
    for (int64_t i = 0; i < plane; ++i) sum += gray_u8(img[i], img[plane + i], img[2 * plane + i]);
  } else {
    for (int64_t i = 0; i < C * plane; ++i) sum += img[i];
  }
  // torch.mean in float32: the (exact) sum over the count.
  const float mean = static_cast<float>(sum) / static_cast<float>(C == 3 ? plane : C * plane);
  const Blend blend(factor);
  for (int64_t i = 0; i < C * plane; ++i) img[i] = blend.u8(img[i], mean);
}

void saturation_u8(uint8_t* img, int C, int H, int W, double factor) {
  if (C != 3) return;
  const int64_t plane = static_cast<int64_t>(H) * W;
  const Blend blend(factor);
  for (int64_t i = 0; i < plane; ++i) {
    const float g = gray_u8(img[i], img[plane + i], img[2 * plane + i]);
    for (int c = 0; c < 3; ++c) img[c * plane + i] = blend.u8(img[c * plane + i], g);
  }
}

void sharpness_u8(uint8_t* img, int C, int H, int W, double factor) {
  if (W <= 2 || H <= 2) return;
  const int64_t plane = static_cast<int64_t>(H) * W;
  const Blend blend(factor);
  // The degenerate image: the 3x3 smoothing kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 inside,
  // rounded (never a tie: sums are multiples of 1/13), the frame's own border.
  std::vector<float> degenerate(static_cast<size_t>(plane));
  for (int c = 0; c < C; ++c) {
    uint8_t* p = img + c * plane;
    for (int64_t i = 0; i < plane; ++i) degenerate[static_cast<size_t>(i)] = p[i];
    for (int y = 1; y < H - 1; ++y)
      for (int x = 1; x < W - 1; ++x) {
        int s = 4 * p[y * W + x];
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) s += p[(y + dy) * W + x + dx];
        degenerate[static_cast<size_t>(y * W + x)] = std::nearbyint(static_cast<float>(s) / 13.f);
      }
    for (int64_t i = 0; i < plane; ++i) p[i] = blend.u8(p[i], degenerate[static_cast<size_t>(i)]);
  }
}

void posterize_u8(uint8_t* img, int C, int H, int W, int bits) {
  const uint8_t mask = static_cast<uint8_t>(256 - (1 << (8 - std::clamp(bits, 0, 8))));
  const int64_t n = static_cast<int64_t>(C) * H * W;
  for (int64_t i = 0; i < n; ++i) img[i] &= mask;
}

void solarize_u8(uint8_t* img, int C, int H, int W, double threshold) {
  const float t = static_cast<float>(threshold);
  const int64_t n = static_cast<int64_t>(C) * H * W;
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<float>(img[i]) >= t) img[i] = static_cast<uint8_t>(255 - img[i]);
}

void autocontrast_u8(uint8_t* img, int C, int H, int W) {
  const int64_t plane = static_cast<int64_t>(H) * W;
  for (int c = 0; c < C; ++c) {
    uint8_t* p = img + c * plane;
    const auto [lo, hi] = std::minmax_element(p, p + plane);
    float minimum = static_cast<float>(*lo);
    float scale = 255.f / (static_cast<float>(*hi) - minimum);
    if (!std::isfinite(scale)) minimum = 0.f, scale = 1.f;
    for (int64_t i = 0; i < plane; ++i) {
      const float v = (static_cast<float>(p[i]) - minimum) * scale;
      p[i] = static_cast<uint8_t>(v < 0.f ? 0.f : (v > 255.f ? 255.f : v));
    }
  }
}

void equalize_u8(uint8_t* img, int C, int H, int W) {
  const int64_t plane = static_cast<int64_t>(H) * W;
  for (int c = 0; c < C; ++c) {
    uint8_t* p = img + c * plane;
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < plane; ++i) ++hist[p[i]];
    // step = (sum of the non-zero bins but the last) // 255
    int64_t last_nonzero = -1, sum = 0;
    for (int v = 0; v < 256; ++v)
      if (hist[static_cast<size_t>(v)] != 0) {
        if (last_nonzero >= 0) sum += hist[static_cast<size_t>(last_nonzero)];
        last_nonzero = v;
      }
    const int64_t step = sum / 255;
    if (step == 0) continue;
    std::array<uint8_t, 256> lut{};
    int64_t cum = 0;
    lut[0] = 0;
    for (int v = 0; v < 255; ++v) {
      cum += hist[static_cast<size_t>(v)];
      lut[static_cast<size_t>(v + 1)] = static_cast<uint8_t>(std::clamp<int64_t>((cum + step / 2) / step, 0, 255));
    }
    for (int64_t i = 0; i < plane; ++i) p[i] = lut[p[i]];
  }
}

void inverse_affine_matrix(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                           double shear_y, double m[6]) {
  const double rot = angle * kDegToRad;
  const double sx = shear_x * kDegToRad;
  const double sy = shear_y * kDegToRad;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  m[0] = d / scale;
  m[1] = -b / scale;
  m[2] = 0.0 / scale;
  m[3] = -c / scale;
  m[4] = a / scale;
  m[5] = 0.0 / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
}

void affine_u8(uint8_t* img, int C, int H, int W, const double m[6], bool bilinear, std::vector<uint8_t>& scratch) {
  const int64_t plane = static_cast<int64_t>(H) * W;
  scratch.assign(img, img + C * plane);
  const uint8_t* src = scratch.data();
  // _gen_affine_grid: theta in float32, divided by (w / 2, h / 2); the base grid
  // x = -W/2 + 0.5 + j, y = -H/2 + 0.5 + i; grid = base . theta^T, then grid_sample's
  // unnormalisation ((g + 1) * size - 1) / 2 (align_corners = false). The grid as
  // torch computes it: bmm's products summed as fma(y, r1, x * r0) + r2.
  float t[6];
  for (int k = 0; k < 6; ++k) t[k] = static_cast<float>(m[k]);
  const float hw = static_cast<float>(0.5 * W), hh = static_cast<float>(0.5 * H);
  const float r00 = t[0] / hw, r10 = t[1] / hw, r20 = t[2] / hw;
  const float r01 = t[3] / hh, r11 = t[4] / hh, r21 = t[5] / hh;
  const float fw = static_cast<float>(W), fh = static_cast<float>(H);
  for (int i = 0; i < H; ++i) {
    const float by = static_cast<float>(-H * 0.5 + 0.5) + static_cast<float>(i);
    for (int j = 0; j < W; ++j) {
      const float bx = static_cast<float>(-W * 0.5 + 0.5) + static_cast<float>(j);
      // In the order of torch's bmm here (a fused multiply-add of the second term).
      const float gx = std::fma(by, r10, bx * r00) + r20;
      const float gy = std::fma(by, r11, bx * r01) + r21;
      const float ix = ((gx + 1.f) * fw - 1.f) / 2.f;
      const float iy = ((gy + 1.f) * fh - 1.f) / 2.f;
      const int64_t o = static_cast<int64_t>(i) * W + j;
      if (!bilinear) {
        const float nx = std::nearbyint(ix), ny = std::nearbyint(iy);
        const bool in = nx >= 0.f && nx < fw && ny >= 0.f && ny < fh;
        const int64_t s = in ? static_cast<int64_t>(ny) * W + static_cast<int64_t>(nx) : 0;
        for (int c = 0; c < C; ++c) img[c * plane + o] = in ? src[c * plane + s] : 0;
        continue;
      }
      const float x0 = std::floor(ix), y0 = std::floor(iy);
      const float x1 = x0 + 1.f, y1 = y0 + 1.f;
      const float w_nw = (x1 - ix) * (y1 - iy), w_ne = (ix - x0) * (y1 - iy);
      const float w_sw = (x1 - ix) * (iy - y0), w_se = (ix - x0) * (iy - y0);
      auto at = [&](const uint8_t* p, float x, float y) -> float {
        if (x < 0.f || x >= fw || y < 0.f || y >= fh) return 0.f;
        return static_cast<float>(p[static_cast<int64_t>(y) * W + static_cast<int64_t>(x)]);
      };
      for (int c = 0; c < C; ++c) {
        const uint8_t* p = src + c * plane;
        const float v = at(p, x0, y0) * w_nw + at(p, x1, y0) * w_ne + at(p, x0, y1) * w_sw + at(p, x1, y1) * w_se;
        const float r = std::nearbyint(v);
        img[c * plane + o] = static_cast<uint8_t>(r < 0.f ? 0.f : (r > 255.f ? 255.f : r));
      }
    }
  }
}

// ---- RandAugment ----

const std::vector<std::string>& ra_op_names() {
  static const std::vector<std::string> names{"identity",   "shear_x",  "shear_y",      "translate_x", "translate_y",
                                              "rotate",     "brightness", "color",      "contrast",    "sharpness",
                                              "posterize",  "solarize", "autocontrast", "equalize"};
  return names;
}

bool ra_signed(RaOp op) {
  switch (op) {
    case RaOp::ShearX:
    case RaOp::ShearY:
    case RaOp::TranslateX:
    case RaOp::TranslateY:
    case RaOp::Rotate:
    case RaOp::Brightness:
    case RaOp::Color:
    case RaOp::Contrast:
    case RaOp::Sharpness:
      return true;
    default:
      return false;
  }
}

namespace {
// torch.linspace(start, end, bins)[bin] in float32 (its formula: from the start in
// the first half, from the end in the second).
double linspace_at(double start, double end, int bin, int bins) {
  if (bins <= 1) return static_cast<float>(start);
  const float s = static_cast<float>(start), e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(bins - 1);
  return bin < bins / 2 ? s + step * static_cast<float>(bin) : e - step * static_cast<float>(bins - bin - 1);
}
}  // namespace

double ra_magnitude(RaOp op, int bin, int bins, int H, int W) {
  switch (op) {
    case RaOp::ShearX:
    case RaOp::ShearY:
      return linspace_at(0.0, 0.3, bin, bins);
    case RaOp::TranslateX:
      return linspace_at(0.0, 150.0 / 331.0 * W, bin, bins);
    case RaOp::TranslateY:
      return linspace_at(0.0, 150.0 / 331.0 * H, bin, bins);
    case RaOp::Rotate:
      return linspace_at(0.0, 30.0, bin, bins);
    case RaOp::Brightness:
    case RaOp::Color:
    case RaOp::Contrast:
    case RaOp::Sharpness:
      return linspace_at(0.0, 0.9, bin, bins);
    case RaOp::Posterize:  // 8 - round(bin / ((bins - 1) / 4)), in float32, half to even
      return bins <= 1 ? 8.0
                       : 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) /
                                                             static_cast<float>((bins - 1) / 4.0)));
    case RaOp::Solarize:
      return linspace_at(255.0, 0.0, bin, bins);
    default:
      return 0.0;
  }
}

void ra_apply(RaOp op, double mag, uint8_t* img, int C, int H, int W, bool bilinear, std::vector<uint8_t>& scratch) {
  double m[6];
  switch (op) {
    case RaOp::Identity:
      return;
    case RaOp::ShearX:  // F.affine(shear=[degrees(atan(mag)), 0], center=[0, 0])
      inverse_affine_matrix(-W * 0.5, -H * 0.5, 0.0, 0.0, 0.0, 1.0, std::atan(mag) * kRadToDeg, 0.0, m);
      return affine_u8(img, C, H, W, m, bilinear, scratch);
    case RaOp::ShearY:
      inverse_affine_matrix(-W * 0.5, -H * 0.5, 0.0, 0.0, 0.0, 1.0, 0.0, std::atan(mag) * kRadToDeg, m);
      return affine_u8(img, C, H, W, m, bilinear, scratch);
    case RaOp::TranslateX:  // translate=[int(mag), 0]
      inverse_affine_matrix(0.0, 0.0, 0.0, static_cast<double>(static_cast<int64_t>(mag)), 0.0, 1.0, 0.0, 0.0, m);
      return affine_u8(img, C, H, W, m, bilinear, scratch);
    case RaOp::TranslateY:
      inverse_affine_matrix(0.0, 0.0, 0.0, 0.0, static_cast<double>(static_cast<int64_t>(mag)), 1.0, 0.0, 0.0, m);
      return affine_u8(img, C, H, W, m, bilinear, scratch);
    case RaOp::Rotate:  // F.rotate(mag): the inverse matrix of -mag about the centre
      inverse_affine_matrix(0.0, 0.0, -mag, 0.0, 0.0, 1.0, 0.0, 0.0, m);
      return affine_u8(img, C, H, W, m, bilinear, scratch);
    case RaOp::Brightness:
      return brightness_u8(img, C, H, W, 1.0 + mag);
    case RaOp::Color:
      return saturation_u8(img, C, H, W, 1.0 + mag);
    case RaOp::Contrast:
      return contrast_u8(img, C, H, W, 1.0 + mag);
    case RaOp::Sharpness:
      return sharpness_u8(img, C, H, W, 1.0 + mag);
    case RaOp::Posterize:
      return posterize_u8(img, C, H, W, static_cast<int>(mag));
    case RaOp::Solarize:
      return solarize_u8(img, C, H, W, mag);
    case RaOp::AutoContrast:
      return autocontrast_u8(img, C, H, W);
    case RaOp::Equalize:
      return equalize_u8(img, C, H, W);
  }
}

}  // namespace vexp::xform
