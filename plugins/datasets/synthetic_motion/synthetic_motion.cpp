// synthetic_motion: procedural clips whose classes come in pairs that differ only
// in temporal order. The second class of a pair is the first played backwards, so
// a model that averages over frames (TSN) sees the same set of frames for both and
// can name the pair but not the direction; a temporal model (TSM) can do both.
//
// Every clip is a pure function of (dataset seed, split, index): no shared mutable
// state, so `get` is safe from many loader threads. Indices 2m and 2m+1 (labels 2k
// and 2k+1 of one pair) share one random draw of the object, so the odd one is the
// exact time reversal of the even one before noise; noise is drawn per index.
//
// Pipelines: without transforms a clip is normalised as (x - 0.5) / 0.25 and never
// augmented. With the recipe's transform lists (set_transforms) the frame is rendered
// (noise included) in [0, 1], the geometry crops it and resizes it bilinearly back to
// size x size (mirrored when drawn), then the pixel transforms run; their draws come
// from a stream keyed by (the loader's seed: run.seed and epoch, split, index).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>

#include "vexp/dataset.hpp"
#include "vexp/media/media.hpp"
#include "vexp/registrar.hpp"

namespace {

constexpr double kPi = 3.14159265358979323846;

// Pairs in the order of their labels: pair k has labels 2k (forward) and 2k+1
// (the same clip reversed in time).
enum class Motion { SquareRight, HollowDown, DiscGrow, BarClockwise, CrossDownRight };
constexpr int kPairs = 5;
constexpr int kMaxClasses = 2 * kPairs;

const std::array<const char*, kMaxClasses> kClassNames{
    "square_right", "square_left", "hollow_down",     "hollow_up",   "disc_grow",
    "disc_shrink",  "bar_cw",      "bar_ccw",         "cross_downright", "cross_upleft"};

// ---- deterministic randomness (platform-independent, unlike std:: distributions) ----

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A stream key from its parts; different parts give unrelated streams.
uint64_t stream_key(uint64_t seed, uint64_t split, uint64_t purpose, uint64_t index) {
  uint64_t s = seed;
  uint64_t k = splitmix64(s);
  for (uint64_t part : {split, purpose, index}) {
    s = k ^ (part * 0xD1B54A32D192ED03ull);
    k = splitmix64(s);
  }
  return k;
}

class Rng {
 public:
  explicit Rng(uint64_t key) : state_(key) {}
  double uniform() { return static_cast<double>(splitmix64(state_) >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by the Marsaglia polar method (pairs cached).
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = static_cast<float>(v * f);
    has_spare_ = true;
    return static_cast<float>(u * f);
  }

 private:
  uint64_t state_;
  float spare_ = 0.f;
  bool has_spare_ = false;
};

enum Purpose : uint64_t { kObjectDraw = 1, kNoiseDraw = 2, kTransformDraw = 3 };

// ---- shapes as signed distances (negative inside), rendered with 1-px soft edges ----

enum class Primitive { Box, HollowBox, Disc, Bar, Cross };

// One object in one frame.
struct Pose {
  Primitive kind = Primitive::Box;
  float cx = 0, cy = 0;   // centre (pixels, pixel centres at i + 0.5)
  float half = 0;         // box/hollow/cross: half side or half arm length; disc: radius; bar: half length
  float half_width = 0;   // hollow: line thickness; bar and cross: half width
  float angle = 0;        // bar: radians from +x towards +y (y points down: growing = clockwise)
};

inline float box_sdf(float x, float y, float hx, float hy) {
  const float qx = std::fabs(x) - hx, qy = std::fabs(y) - hy;
  const float ox = std::max(qx, 0.f), oy = std::max(qy, 0.f);
  return std::sqrt(ox * ox + oy * oy) + std::min(std::max(qx, qy), 0.f);
}

inline float pose_sdf(const Pose& p, float x, float y, float cos_a, float sin_a) {
  switch (p.kind) {
    case Primitive::Box:
      return box_sdf(x, y, p.half, p.half);
    case Primitive::HollowBox: {  // a line of width `half_width` whose outer edge is the box edge
      const float t = p.half_width * 0.5f;
      return std::fabs(box_sdf(x, y, p.half - t, p.half - t)) - t;
    }
    case Primitive::Disc:
      return std::sqrt(x * x + y * y) - p.half;
    case Primitive::Bar: {
      const float u = x * cos_a + y * sin_a, v = -x * sin_a + y * cos_a;
      return box_sdf(u, v, p.half, p.half_width);
    }
    case Primitive::Cross:
      return std::min(box_sdf(x, y, p.half, p.half_width), box_sdf(x, y, p.half_width, p.half));
  }
  return 1e9f;
}

// Fills `frame` (size x size, row-major, values in [0, 1]) with the background and
// the object; only the object's bounding box is evaluated.
void render(const Pose& p, float background, float foreground, int size, float* frame) {
  std::fill(frame, frame + static_cast<size_t>(size) * size, background);
  // Half the side of a square around the centre that holds the object and its soft edge.
  const float reach = p.half + (p.kind == Primitive::Bar ? p.half_width : 0.f) + 1.5f;
  const int x0 = std::max(0, static_cast<int>(std::floor(p.cx - reach)));
  const int x1 = std::min(size - 1, static_cast<int>(std::ceil(p.cx + reach)));
  const int y0 = std::max(0, static_cast<int>(std::floor(p.cy - reach)));
  const int y1 = std::min(size - 1, static_cast<int>(std::ceil(p.cy + reach)));
  const float cos_a = std::cos(p.angle), sin_a = std::sin(p.angle);
  const float delta = foreground - background;
  for (int y = y0; y <= y1; ++y) {
    float* row = frame + static_cast<size_t>(y) * size;
    const float py = static_cast<float>(y) + 0.5f - p.cy;
    for (int x = x0; x <= x1; ++x) {
      const float px = static_cast<float>(x) + 0.5f - p.cx;
      const float coverage = std::clamp(0.5f - pose_sdf(p, px, py, cos_a, sin_a), 0.f, 1.f);
      row[x] = background + delta * coverage;
    }
  }
}

// ---- one random draw: the object and its forward motion ----

struct Draw {
  float background = 0, foreground = 1;
  Pose start, end;  // the object moves linearly from start to end over the clip
  float spin = 0;   // bars: radians per frame (clockwise)
};

// Intensities in [0, 1] at least 0.3 apart (either may be the brighter one).
void draw_contrast(Rng& rng, Draw& d) {
  for (int tries = 0; tries < 64; ++tries) {
    d.background = static_cast<float>(rng.uniform());
    d.foreground = static_cast<float>(rng.uniform());
    if (std::fabs(d.foreground - d.background) >= 0.3f) return;
  }
  d.foreground = d.background < 0.5f ? d.background + 0.5f : d.background - 0.5f;
}

Draw draw_object(Motion motion, Rng& rng, int size_px) {
  const double S = size_px, margin = 1.0;
  Draw d;
  draw_contrast(rng, d);
  Pose& a = d.start;
  Pose& b = d.end;
  // A straight path of a random length along (dx, dy) for an object of radius h.
  auto travel = [&](double h, int dx, int dy) {
    const double room = S - 2 * h - 2 * margin;             // free span of the centre
    const double dist = room * rng.uniform(0.4, 1.0);        // how far it goes in the clip
    const double sx = margin + h + (dx ? rng.uniform(0, room - dist) : rng.uniform(0, room));
    const double sy = margin + h + (dy ? rng.uniform(0, room - dist) : rng.uniform(0, room));
    a.cx = static_cast<float>(sx);
    a.cy = static_cast<float>(sy);
    b.cx = static_cast<float>(sx + dx * dist);
    b.cy = static_cast<float>(sy + dy * dist);
  };
  switch (motion) {
    case Motion::SquareRight: {
      const double h = S * rng.uniform(0.10, 0.17);
      a.kind = Primitive::Box;
      a.half = static_cast<float>(h);
      b = a;
      travel(h, 1, 0);
      break;
    }
    case Motion::HollowDown: {
      const double h = S * rng.uniform(0.14, 0.22);
      a.kind = Primitive::HollowBox;
      a.half = static_cast<float>(h);
      a.half_width = static_cast<float>(std::max(1.5, S * rng.uniform(0.05, 0.08)));
      b = a;
      travel(h, 0, 1);
      break;
    }
    case Motion::DiscGrow: {
      const double r0 = std::max(1.0, S * rng.uniform(0.06, 0.12));
      const double r1 = S * rng.uniform(0.28, 0.40);
      const double room = S - 2 * r1 - 2 * margin;
      a.kind = Primitive::Disc;
      a.cx = static_cast<float>(margin + r1 + rng.uniform(0, room));
      a.cy = static_cast<float>(margin + r1 + rng.uniform(0, room));
      b = a;
      a.half = static_cast<float>(r0);
      b.half = static_cast<float>(r1);
      break;
    }
    case Motion::BarClockwise: {
      const double half_len = S * rng.uniform(0.25, 0.40);
      const double room = S - 2 * half_len - 2 * margin;
      a.kind = Primitive::Bar;
      a.half = static_cast<float>(half_len);
      a.half_width = static_cast<float>(std::max(0.75, S * rng.uniform(0.04, 0.07)));
      a.cx = static_cast<float>(margin + half_len + rng.uniform(0, room));
      a.cy = static_cast<float>(margin + half_len + rng.uniform(0, room));
      a.angle = static_cast<float>(rng.uniform(0, kPi));
      b = a;
      d.spin = static_cast<float>(rng.uniform(12, 22) * kPi / 180);
      break;
    }
    case Motion::CrossDownRight: {
      const double h = S * rng.uniform(0.11, 0.17);
      a.kind = Primitive::Cross;
      a.half = static_cast<float>(h);
      a.half_width = static_cast<float>(std::max(0.75, h * rng.uniform(0.25, 0.35)));
      b = a;
      travel(h, 1, 1);
      break;
    }
  }
  return d;
}

// The object at forward time t in [0, steps].
Pose pose_at(const Draw& d, int t, int steps) {
  Pose p = d.start;
  if (p.kind == Primitive::Bar) {
    // A bar looks the same after half a turn, so it turns at a fixed per-frame speed
    // well under 90° (else clockwise could pass for counter-clockwise).
    p.angle = d.start.angle + d.spin * static_cast<float>(t);
    return p;
  }
  const float u = static_cast<float>(t) / static_cast<float>(steps);
  p.cx = d.start.cx + (d.end.cx - d.start.cx) * u;
  p.cy = d.start.cy + (d.end.cy - d.start.cy) * u;
  p.half = d.start.half + (d.end.half - d.start.half) * u;
  return p;
}

// ---- the dataset ----

struct Config {
  int64_t classes, frames, size, channels, train_clips, val_clips;
  double noise;
  uint64_t seed;
};

Config read_config(const vexp::Params& p) {
  Config c{p.i64("classes"), p.i64("frames"),     p.i64("size"),  p.i64("channels"),
           p.i64("train_clips"), p.i64("val_clips"), p.f64("noise"), 0};
  // The host prefixes these with "dataset 'synthetic_motion'", so no name here.
  auto fail = [](const std::string& msg) { throw std::invalid_argument(msg); };
  if (c.classes % 2 != 0)
    fail("classes must be even (each class comes with its time reversal), got " +
         std::to_string(c.classes));
  if (c.classes < 2 || c.classes > kMaxClasses)
    fail("classes must be in [2, " + std::to_string(kMaxClasses) + "], got " + std::to_string(c.classes));
  if (c.frames < 2) fail("frames must be at least 2 (motion needs two frames), got " + std::to_string(c.frames));
  if (c.size < 16 || c.size > 256) fail("size must be in [16, 256], got " + std::to_string(c.size));
  if (c.channels != 1 && c.channels != 3) fail("channels must be 1 or 3, got " + std::to_string(c.channels));
  if (c.train_clips < 1 || c.val_clips < 1) fail("train_clips and val_clips must be at least 1");
  if (!(c.noise >= 0 && c.noise <= 1)) fail("noise must be in [0, 1], got " + std::to_string(c.noise));
  const int64_t seed = p.i64("seed");
  if (seed < 0) fail("seed must be >= 0, got " + std::to_string(seed));
  c.seed = static_cast<uint64_t>(seed);
  return c;
}

class SyntheticMotion final : public vexp::Dataset {
 public:
  explicit SyntheticMotion(const vexp::Params& p) : c_(read_config(p)) {}

  int64_t size(vexp::Split split) const override {
    return split == vexp::Split::Train ? c_.train_clips : c_.val_clips;
  }
  int64_t num_classes() const override { return c_.classes; }
  std::vector<std::string> class_names() const override {
    return {kClassNames.begin(), kClassNames.begin() + c_.classes};
  }

  int64_t views(vexp::Split split) const override {
    return split == vexp::Split::Val && test_pipe_ ? vexp::pipeline_views(*test_pipe_) : 1;
  }

  bool set_transforms(vexp::Split split, vexp::ClipPipeline pipeline) override {
    (split == vexp::Split::Train ? train_pipe_ : test_pipe_) =
        std::make_shared<const vexp::ClipPipeline>(std::move(pipeline));
    return true;
  }

  // The built-in normalisation as a transform plugin (transforms.so), bit for bit.
  std::vector<vexp::TransformSpec> default_transforms(vexp::Split) const override {
    using vexp::schema::Value;
    return {{"normalize", {{"mean", Value::array({Value(0.5)})}, {"std", Value::array({Value(0.25)})}}}};
  }

  vexp::Sample get(vexp::Split split, int64_t index, uint64_t seed) const override {
    return get_view(split, index, 0, seed);
  }

  // Without a pipeline `seed` (the epoch seed) is ignored: there is no augmentation,
  // every epoch sees the same clip for an index; the trainer's shuffling is the only
  // epoch effect.
  vexp::Sample get_view(vexp::Split split, int64_t index, int64_t view, uint64_t seed) const override {
    if (view < 0 || view >= views(split))
      throw std::out_of_range("synthetic_motion: view " + std::to_string(view) + " out of range");
    if (index < 0 || index >= size(split))
      throw std::out_of_range("synthetic_motion: index " + std::to_string(index) + " is outside the " +
                              vexp::split_name(split) + " split of " + std::to_string(size(split)) +
                              " clips");
    const uint64_t split_id = split == vexp::Split::Train ? 0 : 1;
    const int64_t label = index % c_.classes;
    const auto motion = static_cast<Motion>(label / 2);
    const bool reversed = label % 2 == 1;

    // Indices 2m and 2m+1 share the object draw (labels 2k, 2k+1 since classes is even).
    Rng object_rng(stream_key(c_.seed, split_id, kObjectDraw, static_cast<uint64_t>(index / 2)));
    const Draw draw = draw_object(motion, object_rng, static_cast<int>(c_.size));
    Rng noise_rng(stream_key(c_.seed, split_id, kNoiseDraw, static_cast<uint64_t>(index)));

    const int64_t T = c_.frames, C = c_.channels, S = c_.size, plane = S * S;
    const int steps = static_cast<int>(T - 1);
    at::Tensor clip = at::empty({T, C, S, S}, at::TensorOptions().dtype(at::kFloat));
    float* out = clip.data_ptr<float>();
    const float sigma = static_cast<float>(c_.noise);
    const vexp::ClipPipeline* pipe = (split == vexp::Split::Train ? train_pipe_ : test_pipe_).get();
    for (int64_t t = 0; t < T; ++t) {
      const int forward_t = reversed ? steps - static_cast<int>(t) : static_cast<int>(t);
      float* frame = out + t * C * plane;
      render(pose_at(draw, forward_t, steps), draw.background, draw.foreground, static_cast<int>(S), frame);
      // x in [0, 1] plus noise, saturating like a sensor, then (x - 0.5) / 0.25
      // (built-in; a pipeline's pixel transforms get x).
      for (int64_t i = 0; i < plane; ++i) {
        float x = frame[i];
        if (sigma > 0) x = std::clamp(x + sigma * noise_rng.normal(), 0.f, 1.f);
        frame[i] = pipe ? x : (x - 0.5f) * 4.f;
      }
      for (int64_t ch = 1; ch < C; ++ch) std::memcpy(frame + ch * plane, frame, sizeof(float) * plane);
    }
    if (pipe) run_pipeline(*pipe, clip, split, index, view, seed);
    return {clip, label};
  }

  // A video as its clips are made: T segment centres, the whole frame (the shorter
  // side resized to the clip's, centre crop), x = byte / 255, then (x - 0.5) / 0.25
  // or the recipe's test pipeline. `vexp data make-synthetic` writes the clips'
  // x as bytes, so its videos come back as the clips they were.
  vexp::FileViews file_views(const vexp::FileViewRequest& r) const override {
    const std::string shape = vexp::schema::shape_str(r.clip);
    if (r.clip.size() != 4 || (r.clip[1] != 1 && r.clip[1] != 3) || r.clip[0] < 1 || r.clip[2] < 1 || r.clip[3] < 1)
      throw std::invalid_argument("synthetic_motion: a video is read as T x 1 (gray) or 3 (RGB) x H x W clips; asked for " +
                                  shape);
    if (test_pipe_ && r.clip[2] != r.clip[3])
      throw std::invalid_argument("synthetic_motion: the recipe's test_transforms work on square clips; asked for " + shape);
    const int64_t T = r.clip[0], C = r.clip[1], H = r.clip[2], W = r.clip[3];
    vexp::media::CentreClip want;
    want.frames = static_cast<int>(T);
    want.height = static_cast<int>(H);
    want.width = static_cast<int>(W);
    want.channels = static_cast<int>(C);
    want.short_side = static_cast<int>(r.short_side > 0 ? r.short_side : std::min(H, W));
    vexp::media::quiet_ffmpeg_logs();  // a bad file is one MediaError naming it, not FFmpeg's own lines
    const std::vector<uint8_t> pixels = vexp::media::read_centre_clip(r.path, want);
    // [T, H, W, C] bytes -> [T, C, H, W]: x, or (x - 0.5) / 0.25 without a pipeline.
    at::Tensor x = at::empty({T, C, H, W}, at::TensorOptions().dtype(at::kFloat));
    float* o = x.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t i = 0; i < H * W; ++i) {
          const float v = static_cast<float>(pixels[static_cast<size_t>((t * H * W + i) * C + ch)]) / 255.f;
          *o++ = test_pipe_ ? v : (v - 0.5f) * 4.f;
        }
    vexp::FileViews out;
    out.how = std::to_string(T) + " segment centres, shorter side " + std::to_string(want.short_side) +
              ", centre crop " + std::to_string(H) + "x" + std::to_string(W) + ", " + (C == 1 ? "gray" : "RGB") +
              ", as synthetic_motion's clips: " +
              (test_pipe_ ? std::string("the recipe's test_transforms") : std::string("(x - 0.5) / 0.25"));
    if (!test_pipe_) {
      out.clips = x.unsqueeze(0);
      return out;
    }
    std::vector<at::Tensor> each;
    for (int64_t v = 0; v < views(vexp::Split::Val); ++v) {
      at::Tensor clip = x.clone();
      run_pipeline(*test_pipe_, clip, vexp::Split::Val, 0, v, 0);
      each.push_back(clip);
    }
    out.clips = at::stack(each);
    return out;
  }

 private:
  // The recipe's pipeline on a clip of x in [0, 1] ([T, C, S, S]): geometry, then
  // the pixel transforms.
  static void run_pipeline(const vexp::ClipPipeline& pipe, at::Tensor& clip, vexp::Split split, int64_t index,
                           int64_t view, uint64_t seed) {
    const bool train = split == vexp::Split::Train;
    const uint64_t split_id = train ? 0 : 1;
    vexp::Rng rng(seed, static_cast<uint64_t>(index) * 2 + split_id, kTransformDraw);
    const int s = static_cast<int>(clip.size(3));
    const vexp::ClipGeometry g = vexp::run_geometry(pipe, s, s, s, s, rng, train, index, view);
    if (g.out_w != s || g.out_h != s)
      throw std::runtime_error("synthetic_motion: a transform changed the output size to " + std::to_string(g.out_w) +
                               "x" + std::to_string(g.out_h) + "; clips are size (" + std::to_string(s) + ") square");
    if (g.w < 1 || g.h < 1 || g.x < 0 || g.y < 0 || g.x + g.w > s || g.y + g.h > s)
      throw std::runtime_error("synthetic_motion: the transforms chose a rectangle outside the frame");
    if (g.x != 0 || g.y != 0 || g.w != s || g.h != s || g.flip) resample(clip, g);
    vexp::run_pixels(pipe, clip, rng, train, index, view);
  }

  // Every plane of `clip` ([T, C, S, S]) := its rectangle g resized to S x S
  // (bilinear, pixel centres aligned as torchvision's resize without antialiasing,
  // edges clamped), mirrored when g.flip.
  static void resample(at::Tensor& clip, const vexp::ClipGeometry& g) {
    const int64_t S = clip.size(3), planes = clip.size(0) * clip.size(1);
    std::vector<float> src(static_cast<size_t>(S * S));
    std::vector<int> x0(static_cast<size_t>(S)), x1(static_cast<size_t>(S));
    std::vector<float> wx(static_cast<size_t>(S));
    auto axis = [S](int origin, int len, int64_t i, int& a, int& b, float& w) {
      const double pos = std::clamp(origin + (static_cast<double>(i) + 0.5) * len / static_cast<double>(S) - 0.5,
                                    static_cast<double>(origin), static_cast<double>(origin + len - 1));
      a = static_cast<int>(std::floor(pos));
      b = std::min(a + 1, origin + len - 1);
      w = static_cast<float>(pos - a);
    };
    for (int64_t j = 0; j < S; ++j) axis(g.x, g.w, g.flip ? S - 1 - j : j, x0[j], x1[j], wx[j]);
    float* data = clip.data_ptr<float>();
    for (int64_t p = 0; p < planes; ++p) {
      float* plane = data + p * S * S;
      std::memcpy(src.data(), plane, sizeof(float) * static_cast<size_t>(S * S));
      for (int64_t i = 0; i < S; ++i) {
        int y0, y1;
        float wy;
        axis(g.y, g.h, i, y0, y1, wy);
        const float* r0 = src.data() + static_cast<int64_t>(y0) * S;
        const float* r1 = src.data() + static_cast<int64_t>(y1) * S;
        for (int64_t j = 0; j < S; ++j) {
          const float top = r0[x0[j]] + (r0[x1[j]] - r0[x0[j]]) * wx[j];
          const float bottom = r1[x0[j]] + (r1[x1[j]] - r1[x0[j]]) * wx[j];
          plane[i * S + j] = top + (bottom - top) * wy;
        }
      }
    }
  }

  Config c_;
  // The recipe's pipelines (set_transforms, before any loader runs); null: built-in.
  std::shared_ptr<const vexp::ClipPipeline> train_pipe_, test_pipe_;
};

}  // namespace

VEXP_PLUGIN("synthetic_motion", "0.1.0") {
  vexp::PluginDecl d("synthetic_motion",
                     "Procedural clips in pairs of classes that differ only in temporal order (TSN vs TSM test)");
  auto& s = d.schema;
  s.integer("classes", 8,
            "Number of classes, even: pairs of a motion and its reversal (square, hollow square, disc, bar, cross)")
      .range(2, kMaxClasses);
  s.integer("frames", 8, "Frames per clip (T)").at_least(2);
  s.integer("size", 32, "Frame height and width in pixels").range(16, 256);
  s.integer("channels", 1, "Channels: 1 (gray) or 3 (the gray frame replicated)").one_of({1, 3});
  s.integer("train_clips", 4000, "Clips in the train split").at_least(1);
  s.integer("val_clips", 800, "Clips in the val split").at_least(1);
  s.real("noise", 0.05, "Standard deviation of Gaussian pixel noise (intensities in [0, 1])").range(0, 1);
  s.integer("seed", 0, "The dataset's own seed: same seed, same clips").at_least(0);
  d.dataset_facts = [](const vexp::Params& p) {
    const Config c = read_config(p);
    vexp::schema::DatasetFacts f;
    f.clip = {c.frames, c.channels, c.size, c.size};
    f.classes = c.classes;
    return f;
  };
  registrar.add_dataset(std::move(d), [](const vexp::Params& p) { return std::make_shared<SyntheticMotion>(p); });
}
