// kinetics: sampling formulas, frame-accurate decoding against FFmpeg's own
// extraction (CFR and VFR), JPEG vs video layouts, list formats, bad files,
// determinism across threads. Videos are tiny and generated with the ffmpeg CLI.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "vexp/media/media.hpp"
#include "plugin_testing.hpp"
#include "vexp/base/process.hpp"
#include "vexp/dataset.hpp"
#include "vexp/kinetics/sampling.hpp"

namespace {

namespace fs = std::filesystem;
using vexp::kinetics::Crop;
using vexp::kinetics::dense_test;
using vexp::kinetics::dense_train;
using vexp::kinetics::fix_offsets;
using vexp::kinetics::multiscale_crop;
using vexp::kinetics::Rng;
using vexp::kinetics::test_crops;
using vexp::kinetics::tsn_test;
using vexp::kinetics::tsn_train;
using vexp::kinetics::tsn_twice_starts;
using vexp::Split;
using vexp::schema::Value;

fs::path tmpdir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("vexp_kinetics_test_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs a tool by argv (no shell: paths need no quoting), its output discarded.
void run(const std::vector<std::string>& argv) {
  vexp::base::SpawnOptions o;
  o.stdin_path = "/dev/null";
  o.stdout_path = "/dev/null";
  o.stderr_path = "=stdout";
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  ASSERT_TRUE(vexp::base::run_program(argv, o).ok()) << cmd;
}

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A 64x48 clip whose every frame differs (testsrc2 draws a frame counter), B-frames on.
fs::path make_video(const std::string& name, int frames, int gop, const std::string& extra_vf = "",
                    const std::vector<std::string>& extra = {}) {
  fs::path p = tmpdir() / name;
  if (!fs::exists(p)) {
    std::vector<std::string> argv{"ffmpeg", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v",
                                  std::to_string(frames)};
    if (!extra_vf.empty()) argv.insert(argv.end(), {"-vf", extra_vf});
    argv.insert(argv.end(), {"-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", std::to_string(gop), "-bf", "2"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(p.string());
    run(argv);
  }
  return p;
}

// Every frame as FFmpeg's CLI decodes it, gray, in presentation order.
std::vector<uint8_t> ffmpeg_frames(const fs::path& video, const std::string& select = "") {
  fs::path raw = video.string() + (select.empty() ? ".all" : ".sel") + ".gray";
  std::vector<std::string> argv{"ffmpeg", "-y", "-i", video.string()};
  if (!select.empty()) argv.insert(argv.end(), {"-vf", "select='" + select + "'"});
  argv.insert(argv.end(), {"-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", raw.string()});
  run(argv);
  return slurp(raw);
}

TEST(KineticsSampling, TsnTrainFollowsTheReferenceFormula) {
  for (int64_t nf : {8, 9, 30, 301}) {
    Rng a(11, 3, 1), b(11, 3, 1);
    auto idx = tsn_train(nf, 8, a);
    const int64_t avg = nf / 8;
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(idx[i], i * avg + b.below(avg)) << nf;
      EXPECT_GE(idx[i], i * avg);
      EXPECT_LT(idx[i], (i + 1) * avg);
    }
  }
  Rng r(1, 1, 1);
  EXPECT_EQ(tsn_train(5, 8, r), std::vector<int64_t>(8, 0));  // avg == 0, nf <= T: zeros
}

TEST(KineticsSampling, TsnTestIsSegmentCentresAndTwiceAddsStarts) {
  for (int64_t nf : {8, 30, 100, 301}) {
    auto idx = tsn_test(nf, 8);
    const double tick = static_cast<double>(nf) / 8;
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(idx[i], static_cast<int64_t>(tick / 2 + tick * i)) << nf;
    auto starts = tsn_twice_starts(nf, 8);
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(starts[i], static_cast<int64_t>(tick * i));
  }
  EXPECT_EQ(tsn_test(300, 3, 0, 2), (std::vector<int64_t>{25, 125, 225}));
  EXPECT_EQ(tsn_test(300, 3, 1, 2), (std::vector<int64_t>{75, 175, 275}));
}

TEST(KineticsSampling, DenseWindowsWrapAndSpreadOverTheVideo) {
  Rng r(2, 2, 2);
  for (int k = 0; k < 20; ++k) {
    auto idx = dense_train(300, 8, 8, r);
    for (int i = 1; i < 8; ++i) EXPECT_EQ(idx[i] - idx[i - 1], 8);
    EXPECT_LE(idx.back(), 299);
  }
  EXPECT_EQ(dense_train(20, 4, 8, r), (std::vector<int64_t>{0, 8, 16, 4}));  // shorter than the window: wraps
  // Ten clips over nf - 64 = 236, both ends included: the official code's
  // np.linspace(0, 236, 10, dtype=int).
  const std::vector<int64_t> starts{0, 26, 52, 78, 104, 131, 157, 183, 209, 236};
  for (int64_t c = 0; c < 10; ++c) EXPECT_EQ(dense_test(300, 8, 8, c, 10)[0], starts[c]) << c;
  // np.linspace(0, 5, 10, dtype=int) and a video shorter than the window (all at 0).
  const std::vector<int64_t> small{0, 0, 1, 1, 2, 2, 3, 3, 4, 5};
  for (int64_t c = 0; c < 10; ++c) EXPECT_EQ(dense_test(69, 8, 8, c, 10)[0], small[c]) << c;
  for (int64_t c = 0; c < 10; ++c) EXPECT_EQ(dense_test(40, 8, 8, c, 10)[0], 0);
  EXPECT_EQ(dense_test(300, 8, 8, 0, 1)[0], 118);
}

TEST(KineticsAugment, MultiScaleCropUsesTheFixedScalesAndOffsets) {
  std::set<std::pair<int, int>> sizes;
  std::set<std::pair<int, int>> offsets;
  int flips = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    Rng r(0, i, 9);
    Crop c = multiscale_crop(340, 256, 224, true, r);
    sizes.insert({c.w, c.h});
    const int ws = (340 - c.w) / 4, hs = (256 - c.h) / 4;
    if (ws > 0 && hs > 0) {  // offsets are multiples of the quarter steps
      ASSERT_EQ(c.x % ws, 0);
      ASSERT_EQ(c.y % hs, 0);
      offsets.insert({c.x / ws, c.y / hs});
    }
    flips += c.flip;
  }
  // Sizes from {256, 224 (snapped from 224), 192, 168}: width and height indices differ by <= 1.
  const std::set<int> allowed{256, 224, 192, 168};
  for (auto [w, h] : sizes) {
    EXPECT_TRUE(allowed.count(w) && allowed.count(h)) << w << "x" << h;
  }
  EXPECT_EQ(sizes.size(), 10u);
  EXPECT_EQ(sizes.count({256, 168}), 0u);
  std::set<std::pair<int, int>> fixed;
  for (auto& o : fix_offsets()) fixed.insert({o[0], o[1]});
  EXPECT_EQ(offsets, fixed);
  EXPECT_GT(flips, 800);
  EXPECT_LT(flips, 1200);
  Rng r(0, 0, 9);
  EXPECT_FALSE(multiscale_crop(340, 256, 224, false, r).flip);
}

TEST(KineticsAugment, TestCropsCoverOneThreeAndTenViews) {
  // A 341 x 256 frame at scale 256 (no resize): the official transforms' offsets.
  auto one = test_crops(341, 256, 224, 256, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].w, 224);
  EXPECT_EQ(one[0].x, 58);  // round(117 / 2) = 58, ties to even (torchvision's CenterCrop)
  EXPECT_EQ(one[0].y, 16);
  EXPECT_EQ(test_crops(343, 256, 224, 256, 1)[0].x, 60);  // round(59.5) = 60
  // 3 crops: left, right, centre at w = 117 // 4 = 29, h = 32 // 4 = 8 (GroupFullResSample).
  auto three = test_crops(341, 256, 224, 256, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].x, 0);
  EXPECT_EQ(three[1].x, 116);
  EXPECT_EQ(three[2].x, 58);
  for (const auto& c : three) EXPECT_EQ(c.y, 16);
  // Full resolution (crops of the scale): full-height crops.
  auto full = test_crops(341, 256, 256, 256, 3);
  for (const auto& c : full) {
    EXPECT_EQ(c.h, 256);
    EXPECT_EQ(c.y, 0);
    EXPECT_EQ(c.w, 256);
  }
  EXPECT_EQ(full[1].x, 84);  // 4 * (85 // 4)
  // 10 crops: each of the five offsets, then its mirror image (GroupOverSample).
  auto ten = test_crops(341, 256, 224, 256, 10);
  ASSERT_EQ(ten.size(), 10u);
  const std::vector<std::pair<int, int>> offsets{{0, 0}, {116, 0}, {0, 32}, {116, 32}, {58, 16}};
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(ten[i].flip, i % 2 == 1) << i;
    EXPECT_EQ(std::make_pair(ten[i].x, ten[i].y), offsets[i / 2]) << i;
  }
  // Frames of another size: the rectangle in source pixels (680 x 512 is 341 x 256 x 2
  // after torchvision's int(256 * 680 / 512) = 340).
  auto big = test_crops(680, 512, 224, 256, 1);
  EXPECT_EQ(big[0].w, 448);
  EXPECT_EQ(big[0].x, 116);  // round(116 / 2) = 58 resized pixels
  // Portrait: the three crops move along the width only, as the official code's.
  auto tall = test_crops(256, 341, 224, 256, 3);
  EXPECT_EQ(tall[0].x, 0);
  EXPECT_EQ(tall[1].x, 32);
  EXPECT_EQ(tall[2].x, 16);
  for (const auto& c : tall) EXPECT_EQ(c.y, 2 * (117 / 4));
}

// Frame k from VideoReader is FFmpeg's frame k, whatever the order asked.
void expect_frames_match(const fs::path& video) {
  auto all = ffmpeg_frames(video);
  vexp::media::VideoReader r(video.string());
  const int64_t nf = r.frames();
  const size_t fb = 64 * 48;
  ASSERT_EQ(static_cast<size_t>(nf) * fb, all.size());
  std::vector<int64_t> want{nf - 1, 3, 17, 3, nf / 2, 0};
  std::vector<uint8_t> got(want.size() * fb);
  r.read(want, {0, 0, 64, 48}, 64, 48, 1, got.data());
  for (size_t k = 0; k < want.size(); ++k) {
    int maxdiff = 0;
    for (size_t i = 0; i < fb; ++i)
      maxdiff = std::max(maxdiff, std::abs(int(got[k * fb + i]) - int(all[want[k] * fb + i])));
    EXPECT_LE(maxdiff, 1) << video << " frame " << want[k];
  }
  // FFmpeg's select filter agrees on what "frame 17" is.
  auto sel = ffmpeg_frames(video, "eq(n\\,17)");
  ASSERT_EQ(sel.size(), fb);
  EXPECT_TRUE(std::equal(sel.begin(), sel.end(), all.begin() + 17 * fb));
}

TEST(KineticsDecode, FramesMatchFfmpegExtractionCfr) {
  expect_frames_match(make_video("cfr.mp4", 60, 12));
}

TEST(KineticsDecode, FramesMatchFfmpegExtractionVfr) {
  // Irregular timestamps: frames 0-19 at 25 fps, then spaced 3x wider.
  fs::path v = make_video("vfr.mkv", 45, 10, "setpts='if(lt(N,20),N,20+3*(N-20))/25/TB'", {"-fps_mode", "vfr"});
  expect_frames_match(v);
}

TEST(KineticsDecode, SkipsDecodingUnneededFrames) {
  fs::path v = make_video("long.mp4", 250, 50);
  vexp::media::VideoReader r(v.string());
  std::vector<uint8_t> buf(8 * 16 * 16);
  r.read(tsn_test(250, 8), {0, 0, 64, 48}, 16, 16, 1, buf.data());
  EXPECT_LT(r.decoded_frames(), 250) << "keyframe seeks and non-reference skipping";
}

// Picture types (I, P, B) of every frame in presentation order, from ffprobe.
std::string picture_types(const fs::path& video) {
  fs::path out = video.string() + ".types";
  run({"ffprobe", "-v", "error", "-select_streams", "v:0", "-show_frames", "-show_entries", "frame=pict_type", "-of",
       "csv=p=0", "-o", out.string(), video.string()});
  std::ifstream in(out);
  std::string types, line;
  while (std::getline(in, line))  // "I", "B", ... (side data may follow after a comma)
    if (!line.empty() && (line[0] == 'I' || line[0] == 'P' || line[0] == 'B')) types += line[0];
  return types;
}

// Reads `want` from `video` (64x48) and compares each frame with FFmpeg's own decoding.
void expect_same_as_ffmpeg(const fs::path& video, vexp::media::VideoReader& r, const std::vector<int64_t>& want) {
  auto all = ffmpeg_frames(video);
  const size_t fb = 64 * 48;
  std::vector<uint8_t> got(want.size() * fb);
  r.read(want, {0, 0, 64, 48}, 64, 48, 1, got.data());
  ASSERT_EQ(static_cast<size_t>(r.frames()) * fb, all.size());
  for (size_t k = 0; k < want.size(); ++k) {
    int maxdiff = 0;
    for (size_t i = 0; i < fb; ++i)
      maxdiff = std::max(maxdiff, std::abs(int(got[k * fb + i]) - int(all[want[k] * fb + i])));
    EXPECT_LE(maxdiff, 1) << video << " frame " << want[k];
  }
}

TEST(KineticsDecode, NonReferenceFramesThatAreNotSampledAreNotDecoded) {
  // One keyframe for the whole clip and plain (non-reference) B-frames: reaching the
  // last TSN frame needs every I/P frame before it but none of the B-frames in
  // between except the sampled ones.
  fs::path v = make_video("nonref.mp4", 200, 300, "", {"-x264-params", "b-pyramid=none:b-adapt=0:scenecut=0"});
  const std::string types = picture_types(v);
  vexp::media::VideoReader r(v.string());
  ASSERT_EQ(static_cast<int64_t>(types.size()), r.frames());
  const std::vector<int64_t> want = tsn_test(r.frames(), 8);
  const int64_t last = *std::max_element(want.begin(), want.end());
  int64_t skippable = 0;  // B-frames up to the last sampled one that are not sampled
  for (int64_t k = 0; k <= last; ++k)
    skippable += types[k] == 'B' && std::find(want.begin(), want.end(), k) == want.end();
  ASSERT_GT(skippable, last / 2) << "the test video should be mostly B-frames: " << types;
  expect_same_as_ffmpeg(v, r, want);
  // The decoder outputs each frame once its successor in decoding order arrives:
  // at most the reference frame after `last` comes on top.
  EXPECT_LE(r.decoded_frames(), last + 1 - skippable + 1) << "frames decoded for " << types;
  EXPECT_GE(r.decoded_frames(), last + 1 - skippable) << "every needed frame is decoded once";
}

TEST(KineticsDecode, PyramidBFramesStayFrameExactWhileSkipping) {
  // x264's default B-pyramid: some B-frames are references, others are not.
  fs::path v = make_video("pyramid.mp4", 120, 300, "", {"-bf", "3", "-x264-params", "b-pyramid=normal:scenecut=0"});
  vexp::media::VideoReader r(v.string());
  const std::vector<int64_t> want = tsn_test(r.frames(), 8);
  expect_same_as_ffmpeg(v, r, want);
  const int64_t last = *std::max_element(want.begin(), want.end());
  EXPECT_LT(r.decoded_frames(), last + 1) << "some unsampled B-frames before the last sampled frame are skipped";
}

// Writes list files for a small dataset of generated videos.
struct Fixture {
  fs::path root;
  std::vector<std::string> videos;
};

Fixture video_fixture() {
  Fixture f;
  f.root = tmpdir() / "ds";
  fs::create_directories(f.root / "vid");
  for (int i = 0; i < 6; ++i) {
    fs::path v = f.root / "vid" / ("c" + std::to_string(i) + ".mp4");
    if (!fs::exists(v))
      run({"ffmpeg", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-ss", std::to_string(i), "-frames:v",
           "20", "-c:v", "libx264", "-crf", "0", "-pix_fmt", "yuv444p", "-g", "8", v.string()});
    f.videos.push_back("vid/c" + std::to_string(i) + ".mp4");
  }
  std::ofstream mm(f.root / "mm.txt"), tsm(f.root / "frames.txt"), csv(f.root / "k.csv"), map(f.root / "map.txt");
  for (int i = 0; i < 6; ++i) {
    mm << f.videos[i] << " " << i % 3 << "\n";
    tsm << "frames/c" << i << " 20 " << i % 3 << "\n";
  }
  map << "zero\none\ntwo\n";
  csv << "label,youtube_id,time_start,time_end,split\n";
  for (int i = 0; i < 6; ++i) csv << (i % 3 == 0 ? "zero" : i % 3 == 1 ? "one" : "two") << ",c" << i << ",0,20,vid\n";
  return f;
}

std::shared_ptr<vexp::Dataset> kinetics(std::map<std::string, Value> given) {
  return vexp::testing::make<vexp::Dataset>("dataset", "kinetics", std::move(given));
}

std::map<std::string, Value> base(const Fixture& f, const std::string& list) {
  return {{"root", f.root.string()}, {"train_list", list}, {"val_list", list}, {"classes", 3}, {"frames", 4},
          {"input_size", 32},        {"scale_size", 40},  {"mean", Value::array({Value(0.0)})},
          {"std", Value::array({Value(1.0)})}};
}

TEST(KineticsDataset, JpegFramesAndVideosGiveTheSameClips) {
  Fixture f = video_fixture();
  // Frame folders from the (lossless, 4:4:4) videos at JPEG quality 100, 4:4:4.
  for (int i = 0; i < 6; ++i) {
    fs::path dir = f.root / "frames" / ("c" + std::to_string(i));
    fs::create_directories(dir);
    vexp::media::VideoReader r((f.root / f.videos[i]).string());
    std::vector<uint8_t> px(64 * 48 * 3);
    for (int64_t k = 0; k < r.frames(); ++k) {
      r.read({k}, {0, 0, 64, 48}, 64, 48, 3, px.data());
      char name[32];
      std::snprintf(name, sizeof name, "img_%05d.jpg", static_cast<int>(k + 1));
      vexp::media::write_jpeg((dir / name).string(), px.data(), 64, 48, 3, 100);
    }
  }
  // Gray: both layouts reduce to the same luma plane, so only JPEG's rounding
  // separates them. RGB: the video path converts YUV to RGB after scaling, the
  // JPEG path before, which differs on testsrc2's sharp colour edges.
  auto gray = [&](std::map<std::string, Value> p) {
    p["channels"] = 1;
    return kinetics(p);
  };
  auto gv = gray(base(f, "mm.txt")), gf = gray(base(f, "frames.txt"));
  for (int64_t i = 0; i < 6; ++i) {
    vexp::Sample a = gv->get(Split::Val, i, 0), b = gf->get(Split::Val, i, 0);
    // (testsrc2 has out-of-gamut colours: YUV->RGB clips them before the JPEG, up to ~9 levels.)
    EXPECT_LT((a.clip - b.clip).abs().max().item<double>(), 12.0 / 255) << i;
    EXPECT_LT((a.clip - b.clip).abs().mean().item<double>(), 1.0 / 255) << i;
  }
  auto video = kinetics(base(f, "mm.txt"));
  auto frames = kinetics(base(f, "frames.txt"));
  ASSERT_EQ(video->size(Split::Train), 6);
  for (int64_t i = 0; i < 6; ++i)
    for (Split s : {Split::Train, Split::Val}) {
      vexp::Sample a = video->get(s, i, 77), b = frames->get(s, i, 77);
      EXPECT_EQ(a.label, b.label);
      ASSERT_EQ(a.clip.sizes(), (std::vector<int64_t>{4, 3, 32, 32}));
      // JPEG at quality 100 is not bit-exact: a few levels of 255 at edges.
      const double maxdiff = (a.clip - b.clip).abs().max().item<double>();
      const double meandiff = (a.clip - b.clip).abs().mean().item<double>();
      EXPECT_LT(maxdiff, 48.0 / 255) << i;
      EXPECT_LT(meandiff, 3.0 / 255) << i;
    }
}

TEST(KineticsDataset, ListFormatsAgree) {
  Fixture f = video_fixture();
  auto mm = kinetics(base(f, "mm.txt"));
  auto p = base(f, "k.csv");
  p["label_map"] = "map.txt";
  p["csv_path"] = "{split}/{id}.mp4";
  auto csv = kinetics(p);
  ASSERT_EQ(csv->size(Split::Val), 6);
  EXPECT_EQ(csv->class_names(), (std::vector<std::string>{"zero", "one", "two"}));
  for (int64_t i = 0; i < 6; ++i) {
    vexp::Sample a = mm->get(Split::Val, i, 0), b = csv->get(Split::Val, i, 0);
    EXPECT_EQ(a.label, b.label);
    EXPECT_TRUE(at::equal(a.clip, b.clip));
  }
  // mmaction2's layout: list paths relative to a folder under root (train_prefix /
  // val_prefix, its data_prefix), and a path holding spaces is still `path label`.
  fs::create_directories(f.root / "videos val");
  {
    std::ofstream pre(f.root / "prefixed.txt");
    for (int i = 0; i < 6; ++i) {
      const fs::path link = f.root / "videos val" / ("clip " + std::to_string(i) + ".mp4");
      if (!fs::exists(link)) fs::create_symlink(f.root / f.videos[i], link);
      pre << "clip " << i << ".mp4 " << i % 3 << "\n";
    }
  }
  auto pp = base(f, "prefixed.txt");
  pp["val_prefix"] = "videos val";
  pp["train_list"] = "mm.txt";
  auto prefixed = kinetics(pp);
  ASSERT_EQ(prefixed->size(Split::Val), 6);
  for (int64_t i = 0; i < 6; ++i) {
    vexp::Sample a = mm->get(Split::Val, i, 0), b = prefixed->get(Split::Val, i, 0);
    EXPECT_EQ(a.label, b.label);
    EXPECT_TRUE(at::equal(a.clip, b.clip));
  }
  // Test views: 2 clips x 3 crops; view 0 is get().
  auto q = base(f, "mm.txt");
  q["test_clips"] = 2;
  q["test_crops"] = 3;
  auto multi = kinetics(q);
  EXPECT_EQ(multi->views(Split::Val), 6);
  EXPECT_EQ(multi->views(Split::Train), 1);
  EXPECT_TRUE(at::equal(multi->get_view(Split::Val, 2, 0, 0).clip, multi->get(Split::Val, 2, 0).clip));
  EXPECT_FALSE(at::equal(multi->get_view(Split::Val, 2, 5, 0).clip, multi->get(Split::Val, 2, 0).clip));
  // test_full_res: the test clips are scale_size (40) square, training clips input_size (32).
  q["test_full_res"] = true;
  auto full = kinetics(q);
  EXPECT_EQ(full->get_view(Split::Val, 2, 5, 0).clip.sizes(), (at::IntArrayRef{4, 3, 40, 40}));
  EXPECT_EQ(full->get(Split::Train, 2, 0).clip.sizes(), (at::IntArrayRef{4, 3, 32, 32}));
}

TEST(KineticsDataset, CsvFollowsTheRulesOfVexpData) {
  // #26: this plugin refused a time of 59.0 and dropped the doubled quotes of a label,
  // both of which `vexp data prepare` read. One reader now (vexp::kinetics).
  Fixture f = video_fixture();
  std::ofstream(f.root / "q.csv") << "label,youtube_id,time_start,time_end,split\n"
                                     "\"say \"\"hi\"\"\",c0,59.0,69.0,vid\nzero,c1,0,10,vid\n";
  std::ofstream(f.root / "qmap.txt") << "zero\nsay \"hi\"\n";
  auto p = base(f, "q.csv");
  p["label_map"] = "qmap.txt";
  p["csv_path"] = "{split}/{id}.mp4";
  auto mapped = kinetics(p);
  EXPECT_EQ(mapped->class_names(), (std::vector<std::string>{"zero", "say \"hi\""}));
  EXPECT_EQ(mapped->inspect(Split::Train, 0).label, 1);
  EXPECT_EQ(mapped->inspect(Split::Train, 0).error, "");
  // Without a map: the train CSV's names sorted, as `vexp data prepare` numbers them.
  p["label_map"] = "";
  auto sorted = kinetics(p);
  EXPECT_EQ(sorted->class_names(), (std::vector<std::string>{"say \"hi\"", "zero"}));
  EXPECT_EQ(sorted->inspect(Split::Train, 0).label, 0);
  // 59.5 names no downloaded clip: refused at its line, in `vexp data`'s words.
  std::ofstream(f.root / "q.csv") << "label,youtube_id,time_start,time_end,split\nzero,c0,59.5,69,vid\n";
  try {
    kinetics(p);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("q.csv:2: time_start '59.5' is not a number of seconds"), std::string::npos)
        << e.what();
  }
}

TEST(KineticsDataset, TrainClipsAreDeterministicAcrossThreadsAndSeedDependent) {
  Fixture f = video_fixture();
  auto d = kinetics(base(f, "mm.txt"));
  std::vector<at::Tensor> serial;
  for (int64_t i = 0; i < 6; ++i) serial.push_back(d->get(Split::Train, i, 123).clip);
  std::vector<at::Tensor> par(6);
  std::vector<std::thread> ts;
  for (int64_t i = 5; i >= 0; --i) ts.emplace_back([&, i] { par[i] = d->get(Split::Train, i, 123).clip; });
  for (auto& t : ts) t.join();
  for (int64_t i = 0; i < 6; ++i) EXPECT_TRUE(at::equal(serial[i], par[i])) << i;
  int differ = 0;
  for (int64_t i = 0; i < 6; ++i) differ += !at::equal(serial[i], d->get(Split::Train, i, 124).clip);
  EXPECT_GT(differ, 0) << "the epoch seed changes augmentation";
}

TEST(KineticsDataset, BadFilesAreSkippedCountedOrFatal) {
  Fixture f = video_fixture();
  fs::path bad = f.root / "bad";
  fs::create_directories(bad);
  auto bytes = slurp(f.root / f.videos[0]);
  {
    std::ofstream t(bad / "truncated.mp4", std::ios::binary);
    t.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size() / 3));
    std::ofstream g(bad / "garbage.mp4");
    g << "this is not a video";
  }
  std::ofstream(f.root / "bad.txt") << f.videos[0] << " 0\nbad/missing.mp4 1\nbad/truncated.mp4 2\nbad/garbage.mp4 0\n"
                                    << f.videos[1] << " 1\n" << f.videos[2] << " 2\n";
  auto p = base(f, "bad.txt");
  p["max_bad_fraction"] = 0.5;
  auto d = kinetics(p);
  // Index 1 (missing) is replaced by the next good sample (index 4, label 1).
  vexp::Sample s = d->get(Split::Val, 1, 0);
  EXPECT_EQ(s.label, 1);
  EXPECT_TRUE(at::equal(s.clip, d->get(Split::Val, 4, 0).clip));
  EXPECT_EQ(d->skipped_samples(), 3);  // missing, truncated, garbage on the way
  auto r = d->inspect(Split::Val, 2);
  EXPECT_NE(r.error.find("truncated.mp4"), std::string::npos) << r.error;
  EXPECT_TRUE(d->inspect(Split::Val, 0).error.empty());
  EXPECT_EQ(d->inspect(Split::Val, 0).frames, 20);
  // strict: the first bad file fails, naming it.
  p["strict"] = true;
  auto strict = kinetics(p);
  try {
    strict->get(Split::Train, 1, 0);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.mp4"), std::string::npos) << e.what();
  }
  // Past max_bad_fraction the run fails.
  p["strict"] = false;
  p["max_bad_fraction"] = 0.1;
  auto tight = kinetics(p);
  EXPECT_THROW(tight->get(Split::Train, 1, 0), std::runtime_error);
}

TEST(KineticsDataset, MissingRootOrListFailsEarlyPointingToTheDocs) {
  const vexp::PluginDecl* decl = vexp::testing::host().find("dataset", "kinetics");
  ASSERT_NE(decl, nullptr);
  ASSERT_TRUE(decl->check_data);
  // Facts come from the parameters alone (planning works without data) ...
  EXPECT_EQ(decl->dataset_facts(vexp::testing::params("dataset", "kinetics", {{"root", "/nonexistent/k400"}})).classes,
            400);
  // ... while check_data, which vexp run calls before anything starts, names what is missing.
  auto facts = [&](std::map<std::string, Value> g) {
    decl->check_data(vexp::testing::params("dataset", "kinetics", std::move(g)));
  };
  try {
    facts({{"root", "/nonexistent/k400"}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/k400"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("docs/data.md"), std::string::npos);
  }
  Fixture f = video_fixture();
  try {
    facts({{"root", f.root.string()}, {"train_list", "nope.txt"}, {"val_list", "mm.txt"}});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.txt"), std::string::npos);
  }
  std::map<std::string, Value> good{{"root", f.root.string()}, {"train_list", "mm.txt"}, {"val_list", "mm.txt"}, {"frames", 4}};
  EXPECT_NO_THROW(facts(good));
  EXPECT_EQ(decl->dataset_facts(vexp::testing::params("dataset", "kinetics", good)).clip,
            (vexp::schema::Shape{4, 3, 224, 224}));
  // A malformed line names file:line.
  std::ofstream(f.root / "broken.txt") << f.videos[0] << " 0\n" << f.videos[1] << " notalabel\n";
  try {
    kinetics(base(f, "broken.txt"));
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("broken.txt:2"), std::string::npos) << e.what();
  }
}

// vexp predict's video: the file reader, made without the data (the root need not
// exist, no list is read), gives the file's views exactly as the dataset gives
// those of a val item naming the same file; another clip keeps the resize ratio.
TEST(KineticsDataset, FileViewsAreTheTestViewsOfTheFileWithoutTheData) {
  Fixture f = video_fixture();
  auto p = base(f, "mm.txt");
  p["test_clips"] = 2;
  p["test_crops"] = 3;
  auto full = kinetics(p);
  ASSERT_EQ(full->views(Split::Val), 6);
  auto elsewhere = p;
  elsewhere["root"] = "/nonexistent/k400";
  const vexp::Params where = vexp::testing::params("dataset", "kinetics", elsewhere);
  EXPECT_THROW(vexp::testing::host().make<vexp::Dataset>("dataset", "kinetics", where), std::exception);
  ASSERT_TRUE(vexp::testing::host().has_file_reader("kinetics"));
  auto reader = vexp::testing::host().make_file_reader("kinetics", where);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->size(Split::Val), 0);
  const std::string video = (f.root / f.videos[0]).string();
  vexp::FileViews v = reader->file_views({video, {4, 3, 32, 32}, 0});
  ASSERT_TRUE(v.clips.defined());
  ASSERT_EQ(v.clips.sizes(), (std::vector<int64_t>{6, 4, 3, 32, 32}));
  for (int64_t k = 0; k < 6; ++k) EXPECT_TRUE(v.clips[k].equal(full->get_view(Split::Val, 0, k, 0).clip)) << k;
  EXPECT_NE(v.how.find("2 clip(s) x 3 crop(s)"), std::string::npos) << v.how;
  // --clip 8x3x16x16: 8 frames, 16 crops of the frame resized to 40 x 16/32 = 20.
  auto small = p;
  small["frames"] = 8;
  small["input_size"] = 16;
  small["scale_size"] = 20;
  vexp::FileViews w = reader->file_views({video, {8, 3, 16, 16}, 0});
  ASSERT_EQ(w.clips.sizes(), (std::vector<int64_t>{6, 8, 3, 16, 16}));
  auto same = kinetics(small);
  for (int64_t k = 0; k < 6; ++k) EXPECT_TRUE(w.clips[k].equal(same->get_view(Split::Val, 0, k, 0).clip)) << k;
  // --short-side wins over the ratio; a shape the dataset does not make is refused.
  EXPECT_NE(reader->file_views({video, {8, 3, 16, 16}, 24}).how.find("shorter side 24"), std::string::npos);
  EXPECT_THROW(reader->file_views({video, {4, 3, 32, 24}, 0}), std::invalid_argument);
  EXPECT_THROW(reader->file_views({video, {4, 1, 32, 32}, 0}), std::invalid_argument);
  // A file that is not a video names it.
  std::ofstream(f.root / "not_a_video.mp4") << "text";
  const std::string bad = (f.root / "not_a_video.mp4").string();
  EXPECT_TRUE(vexp::testing::contains(vexp::testing::error_of([&] { reader->file_views({bad, {4, 3, 32, 32}, 0}); }),
                                      "not_a_video.mp4"));
}

}  // namespace
