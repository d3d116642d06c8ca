#include "vexp/data/synthetic.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

#include "vexp/data/kinetics400.hpp"
#include "vexp/data/parallel.hpp"
#include "vexp/dataset.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/kinetics/annotations.hpp"
#include "vexp/kinetics/label_map.hpp"
#include "vexp/kinetics/names.hpp"
#include "vexp/kinetics/video_list.hpp"
#include "vexp/media/media.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp::data {
namespace fs = std::filesystem;

namespace {

// The synthetic_motion dataset plugin, loaded for its clips.
class MotionSource {
 public:
  MotionSource(int64_t classes, int64_t frames, int64_t size, int64_t channels, int64_t train, int64_t val,
               double noise, int64_t seed) {
    load_plugins(s_);
    const dsl::PluginDecl* decl = s_.host.find("dataset", "synthetic_motion");
    if (!decl) throw base::failure("the synthetic_motion plugin is not loaded");
    std::map<std::string, dsl::Value> given{{"classes", classes}, {"frames", frames},   {"size", size},
                                            {"channels", channels}, {"train_clips", train}, {"val_clips", val},
                                            {"noise", noise},       {"seed", seed}};
    try {
      data_ = s_.host.make<Dataset>("dataset", "synthetic_motion", dsl::make_params(decl->schema, given));
    } catch (const std::exception& e) {
      throw base::invalid(e.what());
    }
  }
  Dataset& data() { return *data_; }
  // Clip i of `split` as packed 8-bit pixels [T][H][W][C] and its label.
  std::vector<uint8_t> pixels(Split split, int64_t i, int64_t* label) {
    Sample smp = data_->get(split, i, 0);
    *label = smp.label;
    // Back from (x - 0.5) / 0.25 to bytes; [T, C, H, W] -> [T, H, W, C].
    at::Tensor bytes =
        (smp.clip * 0.25 + 0.5).mul(255).round().clamp(0, 255).to(at::kByte).permute({0, 2, 3, 1}).contiguous();
    return std::vector<uint8_t>(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
  }

 private:
  Session s_;
  std::shared_ptr<Dataset> data_;
};

void write_video(const fs::path& path, const std::vector<uint8_t>& px, int w, int h, int c, int64_t frames, int fps,
                 int crf, int gop) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = partial_name(path.string(), true);
  {
    media::VideoWriter wr(tmp.string(), w, h, c, fps, crf, gop);
    for (int64_t t = 0; t < frames; ++t) wr.write(px.data() + t * w * h * c);
    wr.close();
  }
  fs::rename(tmp, path);
}

// Frames as img_00001.jpg ... in `dir` (quality 95: 4:4:4 chroma), complete or absent.
void write_frames(const fs::path& dir, const std::vector<uint8_t>& px, int w, int h, int c, int64_t frames) {
  fs::create_directories(dir.parent_path());
  const fs::path tmp = partial_name(dir.string(), false);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (int64_t t = 0; t < frames; ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "img_%05lld.jpg", static_cast<long long>(t + 1));
    media::write_jpeg((tmp / name).string(), px.data() + t * w * h * c, w, h, c, 95);
  }
  fs::rename(tmp, dir);
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream o(path, std::ios::binary);
  o << text;
  if (!o) throw base::failure("cannot write '" + path.string() + "'");
}

}  // namespace

void make_synthetic_motion(const SynthArgs& a) {
  const bool video = a.as == "video";
  if (video && !media::video_supported())
    throw base::invalid(std::string("make-synthetic --as video: ") + media::kNoVideoMessage +
                                      "; --as frames writes JPEG frame folders");
  media::quiet_ffmpeg_logs();
  MotionSource src(a.classes, a.frames, a.size, a.channels, a.train_clips, a.val_clips, a.noise, a.seed);
  if (video && a.size % 2) throw base::invalid("--size must be even (H.264 with 4:2:0 chroma)");
  const auto names = src.data().class_names();
  const fs::path root(a.out);
  fs::create_directories(root);
  {
    std::ofstream o(root / "classes.txt");
    o << kinetics::label_map_text(names);
  }
  for (Split split : {Split::Train, Split::Val}) {
    const std::string sp = split_name(split);
    const int64_t n = src.data().size(split);
    std::vector<std::string> rel(static_cast<size_t>(n)), ids(static_cast<size_t>(n));
    std::vector<int64_t> labels(static_cast<size_t>(n));
    parallel_for(n, default_workers(), [&](int64_t i) {
      int64_t label = 0;
      const auto px = src.pixels(split, i, &label);
      char id[32];
      std::snprintf(id, sizeof id, "%s%06lld", sp.c_str(), static_cast<long long>(i));
      const int w = static_cast<int>(a.size), c = static_cast<int>(a.channels);
      const std::string r =
          sp + "/" + names[static_cast<size_t>(label)] + "/" + kinetics::clip_name(id, 0, a.frames) + (video ? ".mp4" : "");
      if (video)
        write_video(root / r, px, w, w, c, a.frames, static_cast<int>(a.fps), static_cast<int>(a.crf),
                    static_cast<int>(a.gop));
      else
        write_frames(root / r, px, w, w, c, a.frames);
      rel[static_cast<size_t>(i)] = r;
      ids[static_cast<size_t>(i)] = id;
      labels[static_cast<size_t>(i)] = label;
    });
    std::ofstream tsm(root / (sp + "_list.txt")), mm(root / (sp + "_list_mmaction.txt")), csv(root / (sp + ".csv"));
    csv << kinetics::annotation_header(false);
    for (int64_t i = 0; i < n; ++i) {
      tsm << kinetics::tsm_line(rel[i], a.frames, labels[i]);
      mm << kinetics::mmaction_line(rel[i], labels[i]);
      kinetics::Clip clip;
      clip.label = names[static_cast<size_t>(labels[i])];
      clip.youtube_id = ids[i];
      clip.start = 0;
      clip.end = a.frames;
      clip.split = sp;
      csv << kinetics::annotation_row(clip, false);
    }
  }
  std::cout << "wrote " << a.train_clips << " train and " << a.val_clips << " val clips (" << a.frames << " frames of "
            << a.size << "x" << a.size << (a.channels == 1 ? " gray" : " RGB")
            << (video ? ", H.264" : ", JPEG frame folders") << ") with lists train_list.txt / train_list_mmaction.txt / train.csv"
            << " (and val_*) and classes.txt to " << root.string() << "\n";
}

// ---------------------------------------------------------------- miniature Kinetics-400
namespace {

// Real Kinetics-400 class names: spaces, parentheses, an apostrophe, a capital,
// and the one pair whose order changes if TSM's folder names were sorted
// ("skiing (not slalom or crosscountry)" / "skiing crosscountry").
const char* const kFixtureClasses[] = {"abseiling",
                                       "air drumming",
                                       "massaging person's head",
                                       "passing American football (in game)",
                                       "passing American football (not in game)",
                                       "skiing (not slalom or crosscountry)",
                                       "skiing crosscountry",
                                       "tying knot (not on a tie)"};
constexpr int64_t kClasses = 8, kFrames = 25, kFps = 25, kW = 64, kH = 48, kSquare = 48;

enum class Kind { Good, Truncated, Garbage, Missing };

struct Row {
  std::string label, id;
  int64_t start = 0, end = 0;
  Split split = Split::Train;
  Kind kind = Kind::Good;
  int64_t motion_index = 0;  // the synthetic clip (its label picks the class)
};

std::string youtube_id(std::mt19937_64& rng, bool dash_first) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string id;
  for (int i = 0; i < 11; ++i) id += kAlphabet[rng() % 64];
  if (dash_first) id[0] = '-';
  return id;
}

// The 48x48 motion clip centred in a 64x48 frame (edge pixels repeated).
std::vector<uint8_t> widen(const std::vector<uint8_t>& sq) {
  std::vector<uint8_t> out(static_cast<size_t>(kFrames * kH * kW * 3));
  const int64_t pad = (kW - kSquare) / 2;
  for (int64_t t = 0; t < kFrames; ++t)
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x) {
        const int64_t sx = std::clamp<int64_t>(x - pad, 0, kSquare - 1);
        for (int c = 0; c < 3; ++c)
          out[static_cast<size_t>(((t * kH + y) * kW + x) * 3 + c)] =
              sq[static_cast<size_t>(((t * kSquare + y) * kSquare + sx) * 3 + c)];
      }
  return out;
}

std::string kinetics_csv(const std::vector<Row>& rows, Split split) {
  std::string out = kinetics::annotation_header(true);
  for (const Row& r : rows) {
    if (r.split != split) continue;
    kinetics::Clip clip;
    clip.label = r.label;
    clip.youtube_id = r.id;
    clip.start = r.start;
    clip.end = r.end;
    clip.split = split_name(split);
    out += kinetics::annotation_row(clip, true);
  }
  return out;
}

}  // namespace

void make_kinetics400_fixture(const SynthArgs& a) {
  media::quiet_ffmpeg_logs();
  // Per class: 2 good train clips and 1 good val clip; plus broken and missing ones.
  const int64_t good_train = 2 * kClasses, good_val = kClasses;
  MotionSource src(kClasses, kFrames, kSquare, 3, good_train + 3, good_val + 1, a.noise, a.seed);
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed) * 7919 + 17);
  std::vector<Row> rows;
  auto add = [&](Split split, Kind kind, int64_t motion_index) {
    Row r;
    r.split = split;
    r.kind = kind;
    r.motion_index = motion_index;
    r.label = kFixtureClasses[motion_index % kClasses];  // synthetic_motion: label = index % classes
    r.id = youtube_id(rng, rows.empty());
    r.start = static_cast<int64_t>(rng() % 300);
    r.end = r.start + 10;  // real clips are 10 s; these are 1 s
    rows.push_back(r);
  };
  for (int64_t i = 0; i < good_train; ++i) add(Split::Train, Kind::Good, i);
  add(Split::Train, Kind::Truncated, good_train);
  add(Split::Train, Kind::Truncated, good_train + 1);
  add(Split::Train, Kind::Garbage, good_train + 2);
  add(Split::Train, Kind::Missing, 1);
  add(Split::Train, Kind::Missing, 6);
  for (int64_t i = 0; i < good_val; ++i) add(Split::Val, Kind::Good, i);
  add(Split::Val, Kind::Truncated, good_val);
  add(Split::Val, Kind::Missing, 4);
  // The official CSVs list clips by label, then by id.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return std::tie(x.split, x.label, x.id) < std::tie(y.split, y.label, y.id);
  });

  const fs::path root(a.out);
  const fs::path flat = root / "k400", per_class = root / "videos", mm = root / "mmaction2/data/kinetics400",
                 tsm = root / "tsm/kinetics";
  // Annotations: DeepMind's release (kinetics400.tar.gz) and the CVDF mirror name them differently.
  for (Split s : {Split::Train, Split::Val}) {
    const std::string text = kinetics_csv(rows, s);
    const std::string sp = split_name(s);
    write_text(root / "kinetics400" / (s == Split::Train ? "train.csv" : "validate.csv"), text);
    write_text(flat / "annotations" / (sp + ".csv"), text);
    write_text(mm / "annotations" / ("kinetics_" + sp + ".csv"), text);
  }

  // Videos: encoded once (flat, as the mirror has them), copied into the per-class layouts.
  std::vector<std::string> truncated_of(rows.size());
  parallel_for(static_cast<int64_t>(rows.size()), default_workers(), [&](int64_t k) {
    const Row& r = rows[static_cast<size_t>(k)];
    if (r.kind == Kind::Missing) return;
    const std::string sp = split_name(r.split);
    const std::string file = kinetics::clip_name(r.id, r.start, r.end) + ".mp4";
    const fs::path dst = flat / sp / file;
    if (r.kind == Kind::Garbage) {
      std::string junk(2048, '\0');
      std::mt19937_64 g(static_cast<uint64_t>(k));
      for (auto& ch : junk) ch = static_cast<char>(g() & 0xff);
      write_text(dst, junk);
    } else {
      int64_t label = 0;
      const auto px = widen(src.pixels(r.split, r.motion_index, &label));
      write_video(dst, px, kW, kH, 3, kFrames, kFps, 18, kFps);
      if (r.kind == Kind::Truncated) fs::resize_file(dst, 600);  // an interrupted download
      if (r.kind == Kind::Good) {
        // The official TSM scripts' frames: <label as TSM's gen_label_kinetics.py writes it>/<id>_<start>/.
        const fs::path dir = tsm / "images" / kinetics::tsm_name(r.label) / (r.id + "_" + std::to_string(r.start));
        fs::create_directories(dir);
        for (int64_t t = 0; t < kFrames; ++t) {
          char name[32];
          std::snprintf(name, sizeof name, "img_%05lld.jpg", static_cast<long long>(t + 1));
          media::write_jpeg((dir / name).string(), px.data() + t * kW * kH * 3, kW, kH, 3, 95);
        }
      }
    }
    // The ActivityNet Crawler's per-class folders keep the label's spaces; mmaction2's
    // (after its rename_classnames.sh) have underscores.
    for (const fs::path& d : {per_class / sp / r.label, mm / ("videos_" + sp) / kinetics::mmaction_name(r.label)}) {
      fs::create_directories(d);
      fs::copy_file(dst, d / file, fs::copy_options::overwrite_existing);
    }
  });

  // The scripts' lists, numbered as both number classes: the names' alphabetical order.
  std::set<std::string> names(std::begin(kFixtureClasses), std::end(kFixtureClasses));
  const std::vector<std::string> classes(names.begin(), names.end());
  auto label_of = [&](const std::string& n) {
    return std::find(classes.begin(), classes.end(), n) - classes.begin();
  };
  for (Split s : {Split::Train, Split::Val}) {
    const std::string sp = split_name(s);
    std::vector<std::string> tsm_lines;
    std::string mm_list;
    for (const Row& r : rows) {
      if (r.split != s) continue;
      const auto label = std::to_string(label_of(r.label));
      if (r.kind == Kind::Good)  // TSM lists the frame folders that exist, with their file counts
        tsm_lines.push_back(kinetics::tsm_name(r.label) + "/" + r.id + "_" + std::to_string(r.start) + " " +
                            std::to_string(kFrames) + " " + label);
      if (r.kind != Kind::Missing)  // mmaction2 lists every video file found, broken or not
        mm_list += kinetics::mmaction_line(kinetics::mmaction_name(r.label) + "/" + kinetics::clip_name(r.id, r.start, r.end) + ".mp4",
                                           label_of(r.label));
    }
    std::string tsm_list;  // gen_label_kinetics.py joins with '\n': no newline at the end
    for (size_t i = 0; i < tsm_lines.size(); ++i) tsm_list += (i ? "\n" : "") + tsm_lines[i];
    write_text(tsm / "labels" / (sp + "_videofolder.txt"), tsm_list);
    write_text(mm / ("kinetics400_" + sp + "_list_videos.txt"), mm_list);
  }
  // TSM's tools/kinetics_label_map.txt: the names, alphabetical
  write_text(tsm / "labels/kinetics_label_map.txt", kinetics::label_map_text(classes));

  std::cout << "wrote a miniature Kinetics-400 to " << root.string() << ": " << kClasses << " classes, "
            << good_train << " train and " << good_val << " val videos (" << kFrames << " frames of " << kW << "x" << kH
            << ", H.264), broken: 3 train and 1 val, missing: 2 train and 1 val\n"
            << "  kinetics400/{train,validate}.csv     the official CSVs (DeepMind's release)\n"
            << "  k400/annotations/{train,val}.csv     the same, as the CVDF mirror names them\n"
            << "  k400/{train,val}/*.mp4               flat videos (CVDF mirror)\n"
            << "  videos/{train,val}/<label>/*.mp4     per-class videos (ActivityNet Crawler: folder names keep spaces)\n"
            << "  mmaction2/data/kinetics400/          videos_{train,val}/<label_with_underscores>/ and "
               "kinetics400_{train,val}_list_videos.txt\n"
            << "  tsm/kinetics/                        images/<label>/<id>_<start>/img_00001.jpg and "
               "labels/{train,val}_videofolder.txt\n";
}

}  // namespace vexp::data
