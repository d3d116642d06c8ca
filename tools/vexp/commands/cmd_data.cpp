// vexp data check RECIPE | extract-frames VIDEO_LIST --out DIR | make-synthetic --out DIR
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "vexp/media/media.hpp"
#include "vexp/dataset.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;

namespace {

int default_workers() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Runs fn(i) for i in [0, n) on `workers` threads.
template <class Fn>
void parallel(int64_t n, int workers, Fn fn) {
  std::atomic<int64_t> next{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < std::max(1, workers); ++w)
    ts.emplace_back([&] {
      for (int64_t i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  for (auto& t : ts) t.join();
}

// ------------------------------------------------------------------ data check
void run_check(RecipeArgs args, int workers, const std::string& json_out) {
  Session s;
  args.require_data = true;
  if (!open_session(s, args)) throw Exit{kExitInvalid, ""};
  const auto& plan = *s.plan;
  auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
  const auto names = data->class_names();
  nlohmann::json report = nlohmann::json::object();
  int64_t total_bad = 0;
  for (Split split : {Split::Train, Split::Val}) {
    const int64_t n = data->size(split);
    std::vector<ItemReport> items(static_cast<size_t>(n));
    parallel(n, workers, [&](int64_t i) { items[static_cast<size_t>(i)] = data->inspect(split, i); });
    std::vector<int64_t> per_class(static_cast<size_t>(std::max<int64_t>(1, data->num_classes())), 0);
    std::vector<int64_t> frames;
    int64_t bad = 0, mismatched = 0;
    nlohmann::json problems = nlohmann::json::array();
    std::cout << split_name(split) << ": " << n << " items\n";
    for (const auto& it : items) {
      if (it.label >= 0 && it.label < static_cast<int64_t>(per_class.size())) per_class[it.label]++;
      if (!it.error.empty()) {
        ++bad;
        std::cout << "  BAD " << it.error << "\n";
        problems.push_back({{"path", it.path}, {"error", it.error}});
        continue;
      }
      if (it.frames >= 0) frames.push_back(it.frames);
      if (it.listed_frames >= 0 && it.frames >= 0 && it.listed_frames != it.frames) {
        ++mismatched;
        std::cout << "  FRAMES '" << it.path << "': the list says " << it.listed_frames << " frames, the file has "
                  << it.frames << "\n";
        problems.push_back({{"path", it.path}, {"listed_frames", it.listed_frames}, {"frames", it.frames}});
      }
    }
    std::sort(frames.begin(), frames.end());
    std::cout << "  ok " << (n - bad) << ", bad " << bad << ", frame-count mismatches " << mismatched << "\n";
    if (!frames.empty())
      std::cout << "  frames per item: min " << frames.front() << ", median " << frames[frames.size() / 2] << ", max "
                << frames.back() << "\n";
    const auto [lo, hi] = std::minmax_element(per_class.begin(), per_class.end());
    const int64_t empty = std::count(per_class.begin(), per_class.end(), 0);
    std::cout << "  class balance: " << per_class.size() << " classes, " << *lo << " to " << *hi
              << " items per class, " << empty << " empty\n";
    report[split_name(split)] = {{"items", n},
                                 {"bad", bad},
                                 {"frame_mismatches", mismatched},
                                 {"per_class", per_class},
                                 {"problems", problems},
                                 {"frames_min", frames.empty() ? 0 : frames.front()},
                                 {"frames_max", frames.empty() ? 0 : frames.back()}};
    total_bad += bad;
  }
  if (!names.empty()) report["classes"] = names;
  if (!json_out.empty()) {
    std::ofstream o(json_out);
    o << report.dump(2) << "\n";
    if (!o) throw Exit{kExitFailure, "cannot write '" + json_out + "'"};
  }
  if (total_bad > 0)
    throw Exit{kExitFailure, std::to_string(total_bad) + " bad item(s) in '" + args.path + "'"};
  std::cout << args.path << ": data ok\n";
}

// ------------------------------------------------------------------ extract-frames
struct ListItem {
  std::string rel;    // path as listed
  std::string label;  // empty when the list has none
};

std::vector<ListItem> read_video_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Exit{kExitFailure, "cannot read video list '" + path + "'"};
  std::vector<ListItem> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<std::string> tok;
    for (std::string t; ss >> t;) tok.push_back(t);
    if (tok.empty() || tok[0][0] == '#') continue;
    out.push_back({tok[0], tok.size() >= 2 ? tok.back() : ""});
  }
  return out;
}

void run_extract(const std::string& list, const std::string& out_dir, std::string root, int workers, int quality) {
  const auto items = read_video_list(list);
  if (root.empty()) root = fs::path(list).parent_path().string();
  if (!root.empty() && !fs::is_directory(root)) throw Exit{kExitFailure, "video root '" + root + "' does not exist"};
  fs::create_directories(out_dir);
  media::quiet_ffmpeg_logs();
  std::vector<int64_t> counts(items.size(), -1);
  std::vector<std::string> errors(items.size());
  std::atomic<int64_t> done{0}, skipped{0};
  std::mutex print;
  parallel(static_cast<int64_t>(items.size()), workers, [&](int64_t i) {
    const ListItem& it = items[static_cast<size_t>(i)];
    fs::path src = fs::path(it.rel).is_absolute() ? fs::path(it.rel) : fs::path(root) / it.rel;
    fs::path rel = fs::path(it.rel).is_absolute() ? fs::path(it.rel).filename() : fs::path(it.rel);
    fs::path dst = fs::path(out_dir) / rel.replace_extension();
    fs::path partial = dst.string() + ".partial";
    try {
      if (fs::is_directory(dst)) {  // resumable: a finished folder is kept
        int64_t n = 0;
        for (auto& e : fs::directory_iterator(dst)) n += e.path().extension() == ".jpg";
        counts[static_cast<size_t>(i)] = n;
        skipped++;
        return;
      }
      fs::remove_all(partial);
      fs::create_directories(partial);
      media::VideoReader r(src.string());
      const int W = r.width(), H = r.height();
      const int64_t nf = r.frames();
      const int64_t chunk = 64;
      std::vector<uint8_t> buf(static_cast<size_t>(chunk) * W * H * 3);
      for (int64_t f0 = 0; f0 < nf; f0 += chunk) {
        std::vector<int64_t> idx;
        for (int64_t f = f0; f < std::min(nf, f0 + chunk); ++f) idx.push_back(f);
        r.read(idx, {0, 0, W, H}, W, H, 3, buf.data());
        for (size_t k = 0; k < idx.size(); ++k) {
          char name[32];
          std::snprintf(name, sizeof name, "img_%05lld.jpg", static_cast<long long>(idx[k] + 1));
          media::write_jpeg((partial / name).string(), buf.data() + k * W * H * 3, W, H, 3, quality);
        }
      }
      fs::rename(partial, dst);  // the folder appears complete or not at all
      counts[static_cast<size_t>(i)] = nf;
      done++;
    } catch (const std::exception& e) {
      std::error_code ec;
      fs::remove_all(partial, ec);
      errors[static_cast<size_t>(i)] = e.what();
      std::lock_guard<std::mutex> lock(print);
      std::cerr << "vexp: warning: " << e.what() << "\n";
    }
  });
  // The frame list in the official TSM format (path num_frames label).
  const fs::path frame_list = fs::path(out_dir) / (fs::path(list).stem().string() + "_frames.txt");
  std::ofstream o(frame_list.string() + ".tmp");
  int64_t failed = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (counts[i] < 0) {
      ++failed;
      continue;
    }
    fs::path rel = fs::path(items[i].rel).is_absolute() ? fs::path(items[i].rel).filename() : fs::path(items[i].rel);
    o << rel.replace_extension().string() << " " << counts[i] << " " << (items[i].label.empty() ? "0" : items[i].label)
      << "\n";
  }
  o.close();
  fs::rename(frame_list.string() + ".tmp", frame_list);
  std::cout << "extracted " << done.load() << " video(s), " << skipped.load() << " already done, " << failed
            << " failed; frame list " << frame_list.string() << "\n";
  if (failed > 0) throw Exit{kExitFailure, std::to_string(failed) + " video(s) could not be extracted"};
}

// ------------------------------------------------------------------ make-synthetic
struct SynthArgs {
  std::string out;
  int64_t classes = 8, frames = 16, size = 32, train_clips = 4000, val_clips = 800, seed = 0, fps = 25, crf = 12, gop = 250;
  double noise = 0.05;
};

void run_make_synthetic(const SynthArgs& a) {
  media::quiet_ffmpeg_logs();
  Session s;
  load_plugins(s);
  const dsl::PluginDecl* decl = s.host.find("dataset", "synthetic_motion");
  if (!decl) throw Exit{kExitFailure, "the synthetic_motion plugin is not loaded"};
  std::map<std::string, dsl::Value> given{{"classes", a.classes},         {"frames", a.frames},
                                          {"size", a.size},               {"channels", int64_t(1)},
                                          {"train_clips", a.train_clips}, {"val_clips", a.val_clips},
                                          {"noise", a.noise},             {"seed", a.seed}};
  std::shared_ptr<Dataset> data;
  try {
    data = s.host.make<Dataset>("dataset", "synthetic_motion", dsl::make_params(decl->schema, given));
  } catch (const std::exception& e) {
    throw Exit{kExitInvalid, e.what()};
  }
  if (a.size % 2) throw Exit{kExitInvalid, "--size must be even (H.264 with 4:2:0 chroma)"};
  const auto names = data->class_names();
  const fs::path root(a.out);
  fs::create_directories(root);
  {
    std::ofstream o(root / "classes.txt");
    for (auto& n : names) o << n << "\n";
  }
  for (Split split : {Split::Train, Split::Val}) {
    const std::string sp = split_name(split);
    const int64_t n = data->size(split);
    std::vector<std::string> rel(static_cast<size_t>(n)), ids(static_cast<size_t>(n));
    std::vector<int64_t> labels(static_cast<size_t>(n));
    parallel(n, default_workers(), [&](int64_t i) {
      Sample smp = data->get(split, i, 0);
      char id[32];
      std::snprintf(id, sizeof id, "%s%06lld", sp.c_str(), static_cast<long long>(i));
      char end[16];
      std::snprintf(end, sizeof end, "%06lld", static_cast<long long>(a.frames));
      const std::string r = sp + "/" + names[static_cast<size_t>(smp.label)] + "/" + id + "_000000_" + end + ".mp4";
      fs::create_directories((root / r).parent_path());
      // Back from (x - 0.5) / 0.25 to bytes.
      at::Tensor bytes = (smp.clip * 0.25 + 0.5).mul(255).round().clamp(0, 255).to(at::kByte).contiguous();
      const int64_t plane = a.size * a.size;
      const fs::path tmp = root / (r + ".tmp.mp4");
      {
        media::VideoWriter w(tmp.string(), static_cast<int>(a.size), static_cast<int>(a.size), 1,
                             static_cast<int>(a.fps), static_cast<int>(a.crf), static_cast<int>(a.gop));
        for (int64_t t = 0; t < a.frames; ++t) w.write(bytes.data_ptr<uint8_t>() + t * plane);
        w.close();
      }
      fs::rename(tmp, root / r);
      rel[static_cast<size_t>(i)] = r;
      ids[static_cast<size_t>(i)] = id;
      labels[static_cast<size_t>(i)] = smp.label;
    });
    std::ofstream tsm(root / (sp + "_list.txt")), mm(root / (sp + "_list_mmaction.txt")), csv(root / (sp + ".csv"));
    csv << "label,youtube_id,time_start,time_end,split\n";
    for (int64_t i = 0; i < n; ++i) {
      tsm << rel[i] << " " << a.frames << " " << labels[i] << "\n";
      mm << rel[i] << " " << labels[i] << "\n";
      csv << names[static_cast<size_t>(labels[i])] << "," << ids[i] << ",0," << a.frames << "," << sp << "\n";
    }
  }
  std::cout << "wrote " << a.train_clips << " train and " << a.val_clips << " val clips (" << a.frames << " frames of "
            << a.size << "x" << a.size << ", H.264) with lists train_list.txt / train_list_mmaction.txt / train.csv"
            << " (and val_*) and classes.txt to " << root.string() << "\n";
}

}  // namespace

void add_data(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Check, prepare and generate datasets");
  data->require_subcommand(1);

  auto* check = data->add_subcommand("check", "Check that every listed file exists and decodes; frame counts; class balance");
  auto args = std::make_shared<RecipeArgs>();
  auto workers = std::make_shared<int>(default_workers());
  auto json_out = std::make_shared<std::string>();
  args->add_to(check);
  check->add_option("--workers", *workers, "Threads")->check(CLI::Range(1, 1024));
  check->add_option("--json", *json_out, "Also write the report as JSON to this file");
  check->callback([args, workers, json_out] { run_check(*args, *workers, *json_out); });

  auto* ex = data->add_subcommand("extract-frames", "Decode every video of a list into img_00001.jpg frame folders (resumable)");
  auto list = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto root = std::make_shared<std::string>();
  auto ex_workers = std::make_shared<int>(default_workers());
  auto quality = std::make_shared<int>(95);
  ex->add_option("VIDEO_LIST", *list, "List of videos (path [num_frames] label per line)")->required();
  ex->add_option("--out", *out, "Output folder")->required();
  ex->add_option("--root", *root, "Folder the list's paths are relative to (default: the list's folder)");
  ex->add_option("--workers", *ex_workers, "Threads")->check(CLI::Range(1, 1024));
  ex->add_option("--quality", *quality, "JPEG quality (>= 90: 4:4:4 chroma)")->check(CLI::Range(1, 100));
  ex->callback([=] { run_extract(*list, *out, *root, *ex_workers, *quality); });

  auto* mk = data->add_subcommand("make-synthetic", "Write the quickstart's motion clips as H.264 mp4 files with Kinetics-style lists");
  auto sa = std::make_shared<SynthArgs>();
  mk->add_option("--out", sa->out, "Output folder")->required();
  mk->add_option("--classes", sa->classes, "Classes (even)");
  mk->add_option("--frames", sa->frames, "Frames per video");
  mk->add_option("--size", sa->size, "Frame width and height (even)");
  mk->add_option("--train-clips", sa->train_clips, "Training videos");
  mk->add_option("--val-clips", sa->val_clips, "Validation videos");
  mk->add_option("--noise", sa->noise, "Pixel noise");
  mk->add_option("--seed", sa->seed, "Seed");
  mk->add_option("--fps", sa->fps, "Frame rate")->check(CLI::Range(1, 240));
  mk->add_option("--crf", sa->crf, "libx264 quality (0: lossless)")->check(CLI::Range(0, 51));
  mk->add_option("--gop", sa->gop, "Keyframe interval")->check(CLI::Range(1, 10000));
  mk->callback([sa] { run_make_synthetic(*sa); });
}

}  // namespace vexp::cli
