// kinetics: Kinetics-style datasets from real files. Videos (mp4/webm/mkv/avi,
// FFmpeg) or extracted frame folders (img_00001.jpg ..., libjpeg-turbo), listed in
// the official TSM format (`path num_frames label`), mmaction2's (`path label`) or
// the official Kinetics CSV (`label,youtube_id,time_start,time_end,split`), all read
// by vexp::kinetics (libs/kinetics), the rules `vexp data` follows too.
//
// Test views follow the official TSM test (test_models.py): TSN segment centres or
// dense clips, test_clips x test_crops, twice_sample, test_full_res (its --full_res).
// The pipelines: the built-in one (multi-scale crop, flip, normalisation; test
// crops), or the recipe's transform plugins (set_transforms): geometry before
// decoding (the decoder resizes the chosen rectangle straight to input_size), the
// pixel transforms after.
//
// A sample is a pure function of (split, index, seed): sampling and augmentation
// draw from a stream keyed by them, so any number of loader threads, in any
// order, produce the same clips. Bad files are replaced by the next good sample
// (deterministically), counted, and fail the run past `max_bad_fraction`.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/annotations.hpp"
#include "vexp/kinetics/label_map.hpp"
#include "vexp/kinetics/sampling.hpp"
#include "vexp/kinetics/video_list.hpp"
#include "vexp/media/media.hpp"
#include "vexp/dataset.hpp"
#include "vexp/log.hpp"
#include "vexp/registrar.hpp"

namespace {

namespace fs = std::filesystem;
using vexp::kinetics::Crop;
using vexp::kinetics::dense_test;
using vexp::kinetics::dense_train;
using vexp::kinetics::multiscale_crop;
using vexp::kinetics::Rng;
using vexp::kinetics::test_view;
using vexp::kinetics::tsn_test;
using vexp::kinetics::tsn_train;
using vexp::kinetics::tsn_twice_starts;
using vexp::Split;

const char* kDocs = "see docs/data.md for how to download and prepare Kinetics-400";

struct Entry {
  std::string path;  // absolute or relative to the working directory
  int64_t frames = -1;
  int64_t label = 0;
};

struct Config {
  std::string root, train_list, val_list, train_prefix, val_prefix, format, layout, label_map, frame_template, sampling;
  int64_t classes, frames, clip_len, frame_interval, test_clips, test_crops, input_size, scale_size, channels;
  bool twice_sample, test_full_res, flip, strict;
  std::string csv_path;
  double max_bad_fraction;
  std::vector<double> mean, std;
};

fs::path under_root(const Config& c, const std::string& p) {
  fs::path q(p);
  return q.is_absolute() ? q : fs::path(c.root) / q;
}

Config read_config(const vexp::Params& p) {
  Config c;
  c.root = p.str("root");
  c.train_list = p.str("train_list");
  c.val_list = p.str("val_list");
  c.train_prefix = p.str("train_prefix");
  c.val_prefix = p.str("val_prefix");
  c.format = p.str("format");
  c.layout = p.str("layout");
  c.label_map = p.str("label_map");
  c.frame_template = p.str("frame_template");
  c.sampling = p.str("sampling");
  c.classes = p.i64("classes");
  c.frames = p.i64("frames");
  c.clip_len = c.frames;
  c.frame_interval = p.i64("frame_interval");
  c.test_clips = p.i64("test_clips");
  c.test_crops = p.i64("test_crops");
  c.input_size = p.i64("input_size");
  c.scale_size = p.i64("scale_size");
  c.channels = p.i64("channels");
  c.twice_sample = p.flag("twice_sample");
  c.test_full_res = p.flag("test_full_res");
  c.flip = p.flag("flip");
  c.strict = p.flag("strict");
  c.csv_path = p.str("csv_path");
  c.max_bad_fraction = p.f64("max_bad_fraction");
  c.mean = p.f64_list("mean");
  c.std = p.f64_list("std");
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  for (auto* v : {&c.mean, &c.std})
    if (v->size() != 1 && static_cast<int64_t>(v->size()) != c.channels)
      fail("mean and std need 1 or `channels` (" + std::to_string(c.channels) + ") values");
  for (double s : c.std)
    if (!(s > 0)) fail("std values must be positive");
  if (c.frame_template.find('%') == std::string::npos)
    fail("frame_template needs a printf field for the frame number, like img_%05d.jpg");
  return c;
}

// Missing data fails before anything starts, with the path and the docs.
void require_paths(const Config& c) {
  if (c.root.empty()) throw std::invalid_argument("root is empty; " + std::string(kDocs));
  if (!fs::is_directory(c.root))
    throw std::invalid_argument("root: data root '" + c.root + "' does not exist or is not a folder; " + kDocs);
  // Each message starts with the parameter's name: validation places it at that value.
  for (const auto& [key, l] : {std::pair<const char*, const std::string*>{"train_list", &c.train_list},
                               {"val_list", &c.val_list}}) {
    const fs::path p = under_root(c, *l);
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (l->empty()) throw std::invalid_argument(std::string(key) + " is empty; " + kDocs);
    if (fs::is_directory(st))
      throw std::invalid_argument(std::string(key) + ": list file '" + p.string() + "' is a directory, not a file");
    if (fs::exists(st) && !fs::is_regular_file(st))
      throw std::invalid_argument(std::string(key) + ": list file '" + p.string() + "' is not a regular file");
    if (!fs::is_regular_file(st))
      throw std::invalid_argument(std::string(key) + ": list file '" + p.string() + "' does not exist; " + kDocs);
  }
  if (!c.label_map.empty() && !fs::is_regular_file(under_root(c, c.label_map)))
    throw std::invalid_argument("label map '" + under_root(c, c.label_map).string() + "' does not exist; " + kDocs);
}

// The class names that number a CSV's labels: the label map when there is one (read by
// vexp::kinetics, the rules of every Kinetics file in vexp).
vexp::kinetics::LabelMap read_label_map(const Config& c) {
  if (c.label_map.empty()) return {};
  return vexp::kinetics::read_label_map(under_root(c, c.label_map).string());
}

// `prefix`: the folder under root that the list's paths are relative to (mmaction2's
// data_prefix, e.g. videos_train); "" for root itself. `numbering`: the label map, or
// empty, when the first CSV read sets it to its names sorted (as `vexp data prepare`,
// TSM and mmaction2 number them); `numbered_by` says where it came from.
std::vector<Entry> read_list(const Config& c, const std::string& list, const std::string& prefix,
                             vexp::kinetics::LabelMap& numbering, std::string& numbered_by) {
  namespace k = vexp::kinetics;
  const fs::path path = under_root(c, list);
  auto media_path = [&](const std::string& rel) {
    return (prefix.empty() || fs::path(rel).is_absolute() ? under_root(c, rel) : under_root(c, prefix) / rel).string();
  };
  namespace base = vexp::base;
  const std::string text =
      base::attempt([&] { return base::read_file_bounded(path.string(), base::kMaxTextFileBytes, "the list file"); })
          .value_or_throw("", "; " + std::string(kDocs));
  auto bad = [&](int64_t line, const std::string& why) {
    throw std::runtime_error(path.string() + ":" + std::to_string(line) + ": " + why);
  };
  const std::string format = c.format == "auto" && path.extension() == ".csv" ? "csv" : c.format;
  std::vector<Entry> out;
  std::vector<int64_t> lines;
  if (format == "csv") {
    const std::vector<k::Clip> clips = k::parse_annotations(text, path.string());
    if (numbering.empty()) {
      numbering = k::LabelMap(k::sorted_class_names(clips), path.string());
      numbered_by = "a class of the CSV '" + path.string() + "'";
    }
    for (const k::Clip& clip : clips) {
      const int64_t label = numbering.find(clip.label);
      if (label < 0) bad(clip.line, "label '" + vexp::base::printable(clip.label) + "' is not " + numbered_by);
      out.push_back({media_path(k::expand_clip_path(c.csv_path, clip)), -1, label});
      lines.push_back(clip.line);
    }
  } else {
    for (const k::ListEntry& e : k::parse_video_list(text, path.string(), k::list_format(format))) {
      out.push_back({media_path(e.path), e.frames, e.label});
      lines.push_back(e.line);
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].label >= c.classes)
      bad(lines[i], "label " + std::to_string(out[i].label) + " is outside [0, " + std::to_string(c.classes) +
                        "); set data.params.classes");
  if (out.empty()) throw std::runtime_error("list file '" + path.string() + "' has no entries");
  return out;
}

// Makes a Kinetics that reads no list (the file reader: file_views only).
struct FileReaderOnly {};

class Kinetics final : public vexp::Dataset {
 public:
  Kinetics(const vexp::Params& p, FileReaderOnly) : c_(read_config(p)) { vexp::media::quiet_ffmpeg_logs(); }
  explicit Kinetics(const vexp::Params& p) : c_(read_config(p)) {
    require_paths(c_);
    vexp::kinetics::LabelMap numbering = read_label_map(c_);
    std::string numbered_by = "in the label map '" + c_.label_map + "'";
    train_ = read_list(c_, c_.train_list, c_.train_prefix, numbering, numbered_by);
    val_ = read_list(c_, c_.val_list, c_.val_prefix, numbering, numbered_by);
    names_ = numbering.names();
    vexp::media::quiet_ffmpeg_logs();
  }

  int64_t size(Split s) const override { return static_cast<int64_t>(entries(s).size()); }
  int64_t num_classes() const override { return c_.classes; }
  std::vector<std::string> class_names() const override { return names_; }
  int64_t skipped_samples() const override { return skipped_.load(); }
  std::vector<std::string> bad_items() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> paths;
    for (const auto& [split, i] : bad_)
      paths.insert(entries(split == 0 ? Split::Train : Split::Val)[static_cast<size_t>(i)].path);
    return {paths.begin(), paths.end()};
  }

  int64_t views(Split s) const override { return views_of(c_, s); }

  // The test views of one file, as a val item's: the recipe's sampling, test crops
  // and normalisation (or test pipeline), at the request's clip and short side.
  vexp::FileViews file_views(const vexp::FileViewRequest& r) const override {
    Config c = c_;
    const std::string shape = vexp::schema::shape_str(r.clip);
    if (r.clip.size() != 4 || r.clip[2] != r.clip[3])
      throw std::invalid_argument("kinetics: clips are T x C x S x S (square crops); asked for " + shape);
    if (r.clip[1] != c.channels)
      throw std::invalid_argument("kinetics: channels = " + std::to_string(c.channels) + ", but the clip " + shape +
                                  " has " + std::to_string(r.clip[1]));
    c.frames = c.clip_len = r.clip[0];
    c.input_size = r.clip[2];
    // Another crop keeps the recipe's ratio of resize to crop (256/224 by default).
    if (r.short_side > 0) c.scale_size = r.short_side;
    else if (c.input_size != c_.input_size) c.scale_size = (c_.scale_size * c.input_size + c_.input_size - 1) / c_.input_size;
    const Entry e{r.path, -1, 0};
    const int64_t n = views_of(c, Split::Val);
    std::vector<at::Tensor> each;
    for (int64_t v = 0; v < n; ++v) each.push_back(load_entry(c, e, Split::Val, 0, v, 0).clip);
    vexp::FileViews out;
    out.clips = at::stack(each);
    const int64_t crops = spatial_views(c);
    out.how = "kinetics's test views: " + std::to_string(n / crops) + " clip(s) x " + std::to_string(crops) +
              " crop(s), " + std::to_string(c.frames) + " frames (" + c.sampling + " sampling), " +
              (test_pipe_ ? std::string("the recipe's test_transforms")
                          : "shorter side " + std::to_string(c.scale_size) + ", " + std::to_string(c.input_size) +
                                "x" + std::to_string(c.input_size) + " crops, the dataset's mean and std");
    return out;
  }

  bool set_transforms(Split s, vexp::ClipPipeline pipeline) override {
    if (s == Split::Val && c_.test_crops != 1 && c_.test_crops != vexp::pipeline_views(pipeline))
      throw std::invalid_argument("test_crops = " + std::to_string(c_.test_crops) + " but data.test_transforms make " +
                                  std::to_string(vexp::pipeline_views(pipeline)) +
                                  " views of each clip: the list chooses the test crops (leave test_crops at 1)");
    if (s == Split::Train && !c_.flip)
      vexp::log_warn("kinetics: flip = false has no effect with data.train_transforms (the list replaces the "
                     "built-in pipeline: leave the flip transform out)");
    (s == Split::Train ? train_pipe_ : test_pipe_) = std::make_shared<const vexp::ClipPipeline>(std::move(pipeline));
    return true;
  }

  // The built-in pipelines as transform plugins (transforms.so), bit for bit.
  std::vector<vexp::TransformSpec> default_transforms(Split s) const override {
    using vexp::schema::Value;
    auto list = [](const std::vector<double>& v) {
      Value::Array a;
      for (double x : v) a.emplace_back(x);
      return Value::array(std::move(a));
    };
    std::vector<vexp::TransformSpec> out;
    if (s == Split::Train) {
      out.push_back({"multiscale_crop", {}});
      if (c_.flip) out.push_back({"flip", {{"p", Value(0.5)}}});
    } else {
      out.push_back({"test_crops", {{"crops", Value(c_.test_crops)}, {"scale_size", Value(c_.scale_size)}}});
    }
    out.push_back({"normalize", {{"mean", list(c_.mean)}, {"std", list(c_.std)}}});
    return out;
  }

  vexp::Sample get(Split s, int64_t index, uint64_t seed) const override { return get_view(s, index, 0, seed); }

  vexp::Sample get_view(Split s, int64_t index, int64_t view, uint64_t seed) const override {
    const int64_t n = size(s);
    if (index < 0 || index >= n)
      throw std::out_of_range("kinetics: index " + std::to_string(index) + " is outside the " +
                              vexp::split_name(s) + " split of " + std::to_string(n) + " clips");
    if (view < 0 || view >= views(s)) throw std::out_of_range("kinetics: view " + std::to_string(view) + " out of range");
    // The bad sample's replacement: the next index (cyclically) that loads.
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = (index + k) % n;
      if (k > 0 && is_bad(s, i)) continue;
      try {
        return load_entry(c_, entries(s)[static_cast<size_t>(i)], s, i, view, seed);
      } catch (const std::exception& e) {
        note_bad(s, i, e.what());
      }
    }
    throw std::runtime_error("kinetics: no file of the " + std::string(vexp::split_name(s)) + " split loads");
  }

  vexp::ItemReport inspect(Split s, int64_t index) const override {
    const Entry& e = entries(s).at(static_cast<size_t>(index));
    vexp::ItemReport r;
    r.path = e.path;
    r.label = e.label;
    r.listed_frames = e.frames;
    try {
      int W = 0, H = 0;
      if (!frames_layout(e)) {  // a video: the one definition of a good one (media.hpp)
        r.frames = vexp::media::verify_video(e.path);
        return r;
      }
      r.frames = frame_count(e, &W, &H);
      // Decode the first, middle and last frames.
      const int64_t last = r.frames - 1;
      std::vector<int64_t> idx{0, last / 2, last};
      std::vector<uint8_t> buf(3 * 16 * 16 * 3);
      read_frames(e, idx, {0, 0, W, H, false}, 16, 3, buf.data());
    } catch (const std::exception& ex) {
      r.error = ex.what();
    }
    return r;
  }

 private:
  const std::vector<Entry>& entries(Split s) const { return s == Split::Train ? train_ : val_; }

  bool is_bad(Split s, int64_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_.count({s == Split::Train ? 0 : 1, i}) != 0;
  }

  void note_bad(Split s, int64_t i, const std::string& why) const {
    if (c_.strict) throw std::runtime_error("kinetics: bad sample (strict = true): " + why);
    size_t count;
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = bad_.insert({s == Split::Train ? 0 : 1, i}).second;
      count = bad_.size();
    }
    skipped_.fetch_add(1);
    if (first) vexp::log_warn("kinetics: skipping " + why + " (replaced by another sample)");
    const double total = static_cast<double>(train_.size() + val_.size());
    if (static_cast<double>(count) > c_.max_bad_fraction * total)
      throw std::runtime_error("kinetics: " + std::to_string(count) + " of " + std::to_string(static_cast<int64_t>(total)) +
                               " files are bad, more than max_bad_fraction = " + std::to_string(c_.max_bad_fraction) +
                               " (last: " + why + "); run `vexp data check` on the recipe");
  }

  bool frames_layout(const Entry& e) const {
    if (c_.layout == "frames") return true;
    if (c_.layout == "video") return false;
    return fs::is_directory(e.path);
  }

  std::string frame_file(const Entry& e, int64_t i) const {
    char name[256];
    std::snprintf(name, sizeof name, c_.frame_template.c_str(), static_cast<int>(i + 1));
    return (fs::path(e.path) / name).string();
  }

  int64_t frame_count(const Entry& e, int* W, int* H) const {
    if (frames_layout(e)) {
      if (!fs::is_directory(e.path)) throw std::runtime_error("'" + e.path + "': frame folder does not exist");
      int64_t n = e.frames;
      if (n < 0) {  // not listed: count img files
        n = 0;
        while (fs::exists(frame_file(e, n))) ++n;
      }
      if (n <= 0) throw std::runtime_error("'" + e.path + "': no frames");
      vexp::media::jpeg_size(frame_file(e, 0), W, H);
      return n;
    }
    vexp::media::VideoReader r(e.path);
    *W = r.width();
    *H = r.height();
    return r.frames();
  }

  // Reads frames `idx` of `e` cropped to `crop`, out x out, into packed pixels.
  void read_frames(const Entry& e, const std::vector<int64_t>& idx, Crop crop, int out, int ch, uint8_t* buf) const {
    vexp::media::Rect r{crop.x, crop.y, crop.w, crop.h};
    const size_t bytes = static_cast<size_t>(out) * out * ch;
    if (frames_layout(e)) {
      for (size_t k = 0; k < idx.size(); ++k) vexp::media::read_jpeg(frame_file(e, idx[k]), r, out, out, ch, buf + k * bytes);
    } else {
      vexp::media::VideoReader v(e.path);
      v.read(idx, r, out, out, ch, buf);
    }
  }

  int64_t views_of(const Config& c, Split s) const {
    if (s == Split::Train) return 1;
    const int64_t clips = c.sampling == "tsn" && c.twice_sample ? 2 * c.test_clips : c.test_clips;
    return clips * spatial_views(c);
  }

  // Item `index` of split `s`, the file `e`, under the settings `c` (c_, or
  // file_views' with the request's clip).
  vexp::Sample load_entry(const Config& c, const Entry& e, Split s, int64_t index, int64_t view, uint64_t seed) const {
    const bool train = s == Split::Train;
    // The side of the clips: the input size, or at test time with test_full_res the
    // scale size (the official --full_res: crops of the resized frame's short side).
    const int out = static_cast<int>(!train && c.test_full_res ? c.scale_size : c.input_size);
    const int ch = static_cast<int>(c.channels);
    // The frame count and size: one open of the video serves both and the decode.
    std::unique_ptr<vexp::media::VideoReader> video;
    int64_t nf;
    int W = 0, H = 0;
    const bool frames = frames_layout(e);
    if (frames) {
      nf = frame_count(e, &W, &H);
    } else {
      video = std::make_unique<vexp::media::VideoReader>(e.path);
      nf = video->frames();
      W = video->width();
      H = video->height();
    }
    const int64_t T = c.frames;
    Rng rng(seed, static_cast<uint64_t>(index) * 2 + (train ? 0 : 1), 0x51);
    const vexp::ClipPipeline* pipe = (train ? train_pipe_ : test_pipe_).get();  // null: the built-in one
    std::vector<int64_t> idx;
    Crop crop;
    int64_t crop_i = 0;
    if (train) {
      idx = c.sampling == "tsn" ? tsn_train(nf, T, rng) : dense_train(nf, c.clip_len, c.frame_interval, rng);
      if (!pipe) crop = multiscale_crop(W, H, out, c.flip, rng);
    } else {
      const int64_t crops = spatial_views(c);
      const int64_t clip = view / crops;
      crop_i = view % crops;
      if (c.sampling == "tsn") {
        if (c.twice_sample && clip >= c.test_clips) idx = tsn_twice_starts(nf, T);
        else idx = tsn_test(nf, T, clip, c.test_clips);
      } else {
        idx = dense_test(nf, c.clip_len, c.frame_interval, clip, c.test_clips);
      }
      if (!pipe) crop = test_view(W, H, out, static_cast<int>(c.scale_size), static_cast<int>(crops), static_cast<int>(crop_i));
    }
    if (pipe) crop = pipeline_crop(*pipe, W, H, out, rng, train, index, crop_i);
    const size_t plane = static_cast<size_t>(out) * out;
    std::vector<uint8_t> buf(static_cast<size_t>(T) * plane * ch);
    if (frames) {
      read_frames(e, idx, crop, out, ch, buf.data());
    } else {
      video->read(idx, {crop.x, crop.y, crop.w, crop.h}, out, out, ch, buf.data());
    }
    // [T, H, W, C] bytes -> [T, C, H, W] floats, flipped when drawn: normalised
    // (built-in), or in [0, 1] for the pipeline's pixel transforms.
    at::Tensor clip = at::empty({T, ch, out, out}, at::TensorOptions().dtype(at::kFloat));
    float* dst = clip.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) {
      const uint8_t* src = buf.data() + static_cast<size_t>(t) * plane * ch;
      for (int k = 0; k < ch; ++k) {
        const float mean = pipe ? 0.f : static_cast<float>(c.mean.size() == 1 ? c.mean[0] : c.mean[k]);
        const float inv = pipe ? 1.f : 1.f / static_cast<float>(c.std.size() == 1 ? c.std[0] : c.std[k]);
        float lut[256];
        for (int v = 0; v < 256; ++v) lut[v] = pipe ? static_cast<float>(v) / 255.f : (static_cast<float>(v) / 255.f - mean) * inv;
        float* o = dst + (t * ch + k) * static_cast<int64_t>(plane);
        for (int y = 0; y < out; ++y) {
          const uint8_t* row = src + static_cast<size_t>(y) * out * ch + k;
          float* orow = o + static_cast<size_t>(y) * out;
          if (crop.flip) {
            for (int x = 0; x < out; ++x) orow[out - 1 - x] = lut[row[static_cast<size_t>(x) * ch]];
          } else {
            for (int x = 0; x < out; ++x) orow[x] = lut[row[static_cast<size_t>(x) * ch]];
          }
        }
      }
    }
    if (pipe) vexp::run_pixels(*pipe, clip, rng, train, index, crop_i);
    return {clip, e.label};
  }

  // Test crops per clip: the test pipeline's views, or test_crops.
  int64_t spatial_views(const Config& c) const { return test_pipe_ ? vexp::pipeline_views(*test_pipe_) : c.test_crops; }

  // The rectangle a pipeline chooses for a W x H video (checked: the decoder reads it).
  static Crop pipeline_crop(const vexp::ClipPipeline& pipe, int W, int H, int out, Rng& rng, bool train,
                            int64_t index, int64_t view) {
    const vexp::ClipGeometry g = vexp::run_geometry(pipe, W, H, out, out, rng, train, index, view);
    if (g.out_w != out || g.out_h != out)
      throw std::runtime_error("kinetics: a transform changed the output size to " + std::to_string(g.out_w) + "x" +
                               std::to_string(g.out_h) + "; clips are input_size (" + std::to_string(out) +
                               ") square");
    if (g.w < 1 || g.h < 1 || g.x < 0 || g.y < 0 || g.x + g.w > W || g.y + g.h > H)
      throw std::runtime_error("kinetics: the transforms chose the rectangle " + std::to_string(g.w) + "x" +
                               std::to_string(g.h) + "+" + std::to_string(g.x) + "+" + std::to_string(g.y) +
                               ", outside the " + std::to_string(W) + "x" + std::to_string(H) + " frame");
    return {g.x, g.y, g.w, g.h, g.flip};
  }

  Config c_;
  std::vector<std::string> names_;
  std::vector<Entry> train_, val_;
  mutable std::mutex mu_;
  mutable std::set<std::pair<int, int64_t>> bad_;
  mutable std::atomic<int64_t> skipped_{0};
  // The recipe's pipelines (set_transforms, before any loader runs); null: built-in.
  std::shared_ptr<const vexp::ClipPipeline> train_pipe_, test_pipe_;
};

}  // namespace

VEXP_PLUGIN("kinetics", "0.1.0") {
  vexp::PluginDecl d("kinetics",
      "Kinetics-style videos or frame folders from TSM, mmaction2 or Kinetics CSV lists (FFmpeg, libjpeg-turbo)");
  auto& s = d.schema;
  s.text("root", "", "Data root; list files and the paths in them are relative to it").require();
  s.text("train_list", "train_list.txt", "Training list file (relative to root)");
  s.text("val_list", "val_list.txt", "Validation list file (relative to root)");
  s.text("train_prefix", "", "Folder under root the training list's paths are relative to (mmaction2's data_prefix, e.g. videos_train); \"\": root");
  s.text("val_prefix", "", "Folder under root the validation list's paths are relative to (e.g. videos_val); \"\": root");
  s.text("format", "auto", "List format: tsm (path num_frames label), mmaction (path label), csv (Kinetics CSV); auto: by extension and column count")
      .one_of({"auto", "tsm", "mmaction", "csv"});
  s.text("label_map", "", "Class names, one per line (line k is label k); numbers CSV labels (without it: the train CSV's names sorted)");
  s.text("csv_path", "{label}/{id}_{start}_{end}.mp4",
         "CSV layout: a video's path under root from {label}, {id} (youtube_id), {start}, {end} (6 digits), {split}");
  s.text("layout", "auto", "video files, frame folders, or auto (a folder is a frame folder)")
      .one_of({"auto", "video", "frames"});
  s.text("frame_template", "img_%05d.jpg", "Frame file names in a frame folder (1-based)");
  s.integer("classes", 400, "Number of classes (labels must be below it)").at_least(1);
  s.text("sampling", "tsn", "tsn: one frame per segment; dense: `frames` frames `frame_interval` apart")
      .one_of({"tsn", "dense"});
  s.integer("frames", 8, "Frames per clip (T): TSN segments or dense clip length").at_least(1);
  s.integer("frame_interval", 8, "Dense sampling: frames between sampled frames").at_least(1);
  s.boolean("twice_sample", false, "TSN test: also the segment starts as a second clip (official TSM)");
  s.integer("test_clips", 1, "Temporal clips per test sample (dense: evenly spaced starts)").at_least(1);
  s.integer("test_crops", 1,
            "Spatial crops per test clip, as the official TSM test: 1 centre, 3 left/right/centre (full-height with "
            "test_full_res), 10 corners+centre and their flips")
      .one_of({1, 3, 10});
  s.boolean("test_full_res", false,
            "Test: crops of scale_size instead of input_size (the official TSM test's --full_res, the Non-local "
            "networks' 256x256 test): the model sees scale_size x scale_size clips");
  s.integer("input_size", 224, "Crop size fed to the model").range(8, 1024);
  s.integer("scale_size", 256, "Test: short side resized to this before cropping").range(8, 2048);
  s.boolean("flip", true, "Train: random horizontal flip (turn off for direction-sensitive classes)");
  s.integer("channels", 3, "3: RGB, 1: gray").one_of({1, 3});
  s.real_list("mean", {0.485, 0.456, 0.406}, "Per-channel mean subtracted (values in [0, 1])");
  s.real_list("std", {0.229, 0.224, 0.225}, "Per-channel standard deviation divided by");
  s.boolean("strict", false, "Fail on the first bad file instead of skipping it");
  s.real("max_bad_fraction", 0.01, "Fail when more than this fraction of the files is bad").range(0, 1);
  d.dataset_facts = [](const vexp::Params& p) {
    const Config c = read_config(p);
    vexp::schema::DatasetFacts f;
    f.clip = {c.frames, c.channels, c.input_size, c.input_size};
    f.classes = c.classes;
    return f;
  };
  d.check_data = [](const vexp::Params& p) { require_paths(read_config(p)); };
  registrar.add_dataset(
      std::move(d), [](const vexp::Params& p) { return std::make_shared<Kinetics>(p); },
      [](const vexp::Params& p) { return std::make_shared<Kinetics>(p, FileReaderOnly{}); });
}
