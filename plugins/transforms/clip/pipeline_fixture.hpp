// The clips the pipeline tests read: three tiny lossless videos (ffmpeg's testsrc2,
// 80x60, 4:4:4, crf 0) and the same frames as JPEG folders, listed for the kinetics
// dataset, made once per test binary in a private folder; and FNV-1a hashes of
// samples, to compare a pipeline with the clips the old code path made (recorded
// before the transform plugins existed).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/base/process.hpp"
#include "vexp/dataset.hpp"
#include "vexp/media/media.hpp"

namespace vexp::testing::pipelines {

namespace fs = std::filesystem;

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

inline fs::path root() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("vexp_pipeline_test_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d / "vid");
    std::ofstream videos(d / "videos.txt"), frames(d / "frames.txt");
    for (int i = 0; i < 3; ++i) {
      const fs::path v = d / "vid" / ("c" + std::to_string(i) + ".mp4");
      vexp::base::SpawnOptions o;
      o.stdin_path = "/dev/null";
      o.stdout_path = "/dev/null";
      o.stderr_path = "=stdout";
      const std::vector<std::string> argv{"ffmpeg", "-y", "-f", "lavfi", "-i", "testsrc2=size=80x60:rate=25", "-ss",
                                          std::to_string(i), "-frames:v", "24", "-c:v", "libx264", "-crf", "0",
                                          "-pix_fmt", "yuv444p", "-g", "8", "-threads", "1", v.string()};
      if (!vexp::base::run_program(argv, o).ok()) throw std::runtime_error("ffmpeg failed making " + v.string());
      const fs::path dir = d / "frames" / ("c" + std::to_string(i));
      fs::create_directories(dir);
      vexp::media::VideoReader r(v.string());
      std::vector<uint8_t> px(80 * 60 * 3);
      for (int64_t k = 0; k < r.frames(); ++k) {
        r.read({k}, {0, 0, 80, 60}, 80, 60, 3, px.data());
        char name[32];
        std::snprintf(name, sizeof name, "img_%05d.jpg", static_cast<int>(k + 1));
        vexp::media::write_jpeg((dir / name).string(), px.data(), 80, 60, 3, 95);
      }
      videos << "vid/c" << i << ".mp4 " << i << "\n";
      frames << "frames/c" << i << " 24 " << i << "\n";
    }
    return d;
  }();
  return dir;
}

// The fixture as this machine's FFmpeg and libjpeg-turbo decode it (every frame of
// both layouts, full size, RGB): the golden hashes hold for the decoders that made
// them, so a test compares them only where this hash is the recorded one.
inline uint64_t decoded_fixture_hash() {
  uint64_t h = 1469598103934665603ull;
  std::vector<uint8_t> px(80 * 60 * 3);
  for (int i = 0; i < 3; ++i) {
    vexp::media::VideoReader r((root() / "vid" / ("c" + std::to_string(i) + ".mp4")).string());
    for (int64_t k = 0; k < r.frames(); ++k) {
      r.read({k}, {0, 0, 80, 60}, 80, 60, 3, px.data());
      h = fnv1a(px.data(), px.size(), h);
      char name[32];
      std::snprintf(name, sizeof name, "img_%05d.jpg", static_cast<int>(k + 1));
      vexp::media::read_jpeg((root() / "frames" / ("c" + std::to_string(i)) / name).string(), {0, 0, 80, 60}, 80, 60, 3,
                             px.data());
      h = fnv1a(px.data(), px.size(), h);
    }
  }
  return h;
}

// Kinetics parameters over the fixture: 4 frames of 32x32, test views at 40.
inline std::map<std::string, schema::Value> kinetics_params(const std::string& list,
                                                            std::map<std::string, schema::Value> more = {}) {
  std::map<std::string, schema::Value> p{{"root", root().string()}, {"train_list", list}, {"val_list", list},
                                         {"classes", 3},            {"frames", 4},        {"input_size", 32},
                                         {"scale_size", 40}};
  for (auto& [k, v] : more) p[k] = v;
  return p;
}

// A sample's bits: its label, shape and every float of its clip.
inline uint64_t hash_sample(const vexp::Sample& s) {
  const at::Tensor c = s.clip.contiguous();
  uint64_t h = fnv1a(&s.label, sizeof s.label);
  for (int64_t d : c.sizes()) h = fnv1a(&d, sizeof d, h);
  return fnv1a(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size(), h);
}

// The hash of every sample a case reads: train indices 0..2 under seeds 5 and 77,
// then every view of every val index.
inline uint64_t hash_dataset(const vexp::Dataset& d) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t seed : {5ull, 77ull})
    for (int64_t i = 0; i < d.size(Split::Train) && i < 3; ++i) {
      const uint64_t s = hash_sample(d.get(Split::Train, i, seed));
      h = fnv1a(&s, sizeof s, h);
    }
  for (int64_t i = 0; i < d.size(Split::Val) && i < 3; ++i)
    for (int64_t v = 0; v < d.views(Split::Val); ++v) {
      const uint64_t s = hash_sample(d.get_view(Split::Val, i, v, 9));
      h = fnv1a(&s, sizeof s, h);
    }
  return h;
}

// The cases the golden hashes cover: name -> (dataset, parameters).
struct Case {
  std::string name, dataset;
  std::map<std::string, schema::Value> params;
};
inline std::vector<Case> golden_cases() {
  using schema::Value;
  auto one = [](double v) { return Value::array({Value(v)}); };
  return {
      {"kinetics_video_tsn", "kinetics", kinetics_params("videos.txt")},
      {"kinetics_frames_tsn", "kinetics", kinetics_params("frames.txt")},
      {"kinetics_video_dense", "kinetics",
       kinetics_params("videos.txt", {{"sampling", "dense"}, {"frame_interval", 2}, {"test_clips", 2}})},
      {"kinetics_video_3crops", "kinetics", kinetics_params("videos.txt", {{"test_crops", 3}})},
      {"kinetics_video_10crops", "kinetics",
       kinetics_params("videos.txt", {{"test_crops", 10}, {"test_clips", 2}, {"twice_sample", true}})},
      {"kinetics_gray_noflip", "kinetics",
       kinetics_params("videos.txt", {{"channels", 1}, {"flip", false}, {"mean", one(0.5)}, {"std", one(0.25)}})},
      {"kinetics_snap_sizes", "kinetics", kinetics_params("frames.txt", {{"input_size", 58}, {"scale_size", 60}})},
      {"synthetic_gray", "synthetic_motion", {{"train_clips", 3}, {"val_clips", 3}, {"size", 24}}},
      {"synthetic_rgb", "synthetic_motion",
       {{"train_clips", 3}, {"val_clips", 3}, {"channels", 3}, {"classes", 4}, {"noise", 0.2}}},
  };
}

}  // namespace vexp::testing::pipelines
