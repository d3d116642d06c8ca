// vexp data check RECIPE | extract-frames VIDEO_LIST --out DIR | make-synthetic --out DIR [--layout kinetics400]
// | prepare kinetics400 ...: the command line; the work is in pkg/data/.
#include <sys/stat.h>

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

#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/data/kinetics400.hpp"
#include "vexp/data/parallel.hpp"
#include "vexp/data/synthetic.hpp"
#include "vexp/data/video_ops.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/media/media.hpp"
#include "vexp/dataset.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/video_list.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;

namespace {

using data::default_workers;

template <class Fn>
void parallel(int64_t n, int workers, Fn fn) {
  data::parallel_for(n, workers, fn);
}

// ------------------------------------------------------------------ data check
void run_check(RecipeArgs args, int workers, const std::string& json_out) {
  Session s;
  args.require_data = true;
  if (!open_session(s, args)) throw base::invalid("");
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
  // What "ok" means, as `prepare` says it (media::verify_video for videos).
  std::cout << "checked: every frame of each video decoded; the first, middle and last image of each frame folder\n";
  if (!names.empty()) report["classes"] = names;
  if (!json_out.empty()) {
    std::ofstream o(json_out);
    o << report.dump(2) << "\n";
    if (!o) throw base::failure("cannot write '" + json_out + "'");
  }
  if (total_bad > 0)
    throw base::failure(std::to_string(total_bad) + " bad item(s) in '" + args.path + "'");
  std::cout << args.path << ": data ok\n";
}

// ------------------------------------------------------------------ extract-frames
struct ListItem {
  std::string rel;     // path as listed
  int64_t label = -1;  // -1 when the list has none
  int64_t line = 0;
};

// The frame folder of a listed video, relative to --out: the listed path without its
// extension (an absolute path: its file name only). Every part must be one plain path
// component, so that the folder, which is replaced, lies inside --out.
fs::path frame_folder(const std::string& listed, std::string* problem) {
  const fs::path p(listed);
  fs::path rel = p.is_absolute() ? p.filename() : p;
  rel.replace_extension();
  if (rel.empty()) {
    *problem = "it names no file";
    return {};
  }
  for (const auto& part : rel) {
    const std::string why = base::path_component_problem(part.string());
    if (!why.empty()) {
      *problem = "its part '" + base::printable(part.string()) + "' cannot be a folder name: " + why;
      return {};
    }
  }
  return rel;
}

// The list, read by vexp::kinetics (the rules of the lists the kinetics dataset reads;
// a line of one column is a video without a label), each entry's frame folder checked.
std::vector<ListItem> read_video_list(const std::string& path) {
  // (its errors name the file, and the line)
  const std::vector<kinetics::ListEntry> entries =
      kinetics::read_video_list(path, kinetics::ListFormat::Auto, /*labels_optional=*/true);
  std::vector<ListItem> out;
  for (const auto& e : entries) {
    std::string why;
    frame_folder(e.path, &why);
    if (!why.empty())
      throw base::failure(path + ":" + std::to_string(e.line) + ": '" + base::printable(e.path) + "': " + why);
    out.push_back({e.path, e.label, e.line});
  }
  return out;
}

// Two entries of the list must not share a frame folder (`a.mp4` and `a.avi` are both
// `a`: one would replace the other), nor may one's folder lie inside another's (`x.mp4`
// and `x/y.mp4`: extracting `x` replaces `x/y`). Exit naming both lines.
void refuse_shared_folders(const std::string& list, const std::vector<ListItem>& items) {
  std::map<fs::path, size_t> by_folder;
  std::string unused;
  for (size_t i = 0; i < items.size(); ++i) {
    const fs::path f = frame_folder(items[i].rel, &unused);
    auto [it, fresh] = by_folder.emplace(f, i);
    if (!fresh) {
      const ListItem& a = items[it->second];
      throw base::failure(list + ":" + std::to_string(items[i].line) + ": '" + base::printable(items[i].rel) +
                                   "' and line " + std::to_string(a.line) + "'s '" + base::printable(a.rel) +
                                   "' have one frame folder '" + base::printable(f.string()) +
                                   "' (the path without its extension): one would replace the other; rename one");
    }
  }
  for (const auto& [f, i] : by_folder)
    for (fs::path up = f.parent_path(); !up.empty(); up = up.parent_path())
      if (auto it = by_folder.find(up); it != by_folder.end()) {
        const ListItem &inner = items[i], &outer = items[it->second];
        throw base::failure(list + ":" + std::to_string(inner.line) + ": the frame folder '" +
                                     base::printable(f.string()) + "' of '" + base::printable(inner.rel) +
                                     "' lies inside the frame folder '" + base::printable(up.string()) + "' of line " +
                                     std::to_string(outer.line) + "'s '" + base::printable(outer.rel) +
                                     "', which is replaced when extracted; rename one");
      }
}

// OUT/.vexp_extract/journal.tsv: one line per frame folder this command made, appended
// once the folder is complete and before it appears under its name:
// FOLDER \t FRAMES \t SOURCE (absolute) \t SIZE \t MTIME \t SETTINGS. A folder is
// "already done" only when its last record names the same source (path, size,
// modification time) and settings, and the folder holds that many frames; a folder
// without a record is not this command's and is never replaced.
constexpr const char* kExtractJournal = ".vexp_extract/journal.tsv";

struct FrameRecord {
  int64_t frames = 0;
  std::string source, size, mtime, settings;
};

// A path as the tab-separated journal holds it: control characters escaped.
std::string journal_field(const std::string& s) { return base::printable(s, s.size() + 1); }

std::string source_stamp(const fs::path& p, std::string* size) {
  std::error_code ec;
  *size = std::to_string(fs::file_size(p, ec));
  return std::to_string(fs::last_write_time(p, ec).time_since_epoch().count());
}

std::map<std::string, FrameRecord> read_extract_journal(const fs::path& path) {
  std::map<std::string, FrameRecord> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return out;
  const std::string text = base::read_file_bounded(path.string(), uint64_t{1} << 30, "the extract-frames journal");
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {  // complete lines only
    std::vector<std::string> f(1);
    for (size_t i = pos; i < nl; ++i) {
      if (text[i] == '\t') f.emplace_back();
      else f.back() += text[i];
    }
    if (f.size() != 6 || f[1].empty() || f[1].find_first_not_of("0123456789") != std::string::npos || f[1].size() > 12)
      continue;
    out[f[0]] = FrameRecord{std::stoll(f[1]), f[2], f[3], f[4], f[5]};
  }
  return out;
}

int64_t count_frames(const fs::path& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) n += it->path().extension() == ".jpg";
  return n;
}

void run_extract(const std::string& list, const std::string& out_dir, std::string root, int workers,
                 const data::JpegOptions& jpeg) {
  const auto items = read_video_list(list);
  refuse_shared_folders(list, items);
  if (root.empty()) root = fs::path(list).parent_path().string();
  if (!root.empty() && !fs::is_directory(root)) throw base::failure("video root '" + root + "' does not exist");
  const fs::path frame_list = fs::path(out_dir) / (fs::path(list).stem().string() + "_frames.txt");
  if (base::same_file(frame_list, list))
    throw base::failure("the frame list '" + frame_list.string() + "' would replace the video list '" + list +
                                 "'; give another --out");
  // Each item's folder is replaced: it must not hold (or be) a video that is read.
  std::vector<fs::path> srcs, dsts;
  for (const ListItem& it : items) {
    std::string unused;
    srcs.push_back(fs::path(it.rel).is_absolute() ? fs::path(it.rel) : fs::path(root.empty() ? "." : root) / it.rel);
    dsts.push_back(fs::path(out_dir) / frame_folder(it.rel, &unused));
    if (base::is_within(dsts.back(), srcs.back()))
      throw base::failure(list + ":" + std::to_string(it.line) + ": the frame folder '" + dsts.back().string() +
                                   "' would replace the video '" + srcs.back().string() + "' it is made from");
  }
  // What is there already: a folder this command finished for the same source and
  // settings is kept; one it made for another source is replaced; anything else at a
  // frame folder's name (a file, a link, a folder it did not make) is refused before
  // anything is written: it is never removed.
  const fs::path journal_path = fs::path(out_dir) / kExtractJournal;
  const auto journal = read_extract_journal(journal_path);
  const std::string settings = "quality " + std::to_string(jpeg.quality) + " chroma " + std::to_string(jpeg.chroma);
  std::vector<int64_t> counts(items.size(), -1);
  std::vector<std::string> keys(items.size()), stamps(items.size()), sizes(items.size()), sources(items.size());
  std::string refusal;
  int64_t refused = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string unused;
    keys[i] = journal_field(frame_folder(items[i].rel, &unused).string());
    sources[i] = journal_field(fs::absolute(srcs[i]).lexically_normal().string());
    stamps[i] = source_stamp(srcs[i], &sizes[i]);
    const std::string where = " (" + list + ":" + std::to_string(items[i].line) + ": '" + base::printable(items[i].rel) + "')";
    std::string why;
    std::error_code ec;
    for (const fs::path& p : {dsts[i], fs::path(data::partial_name(dsts[i].string(), false))}) {
      const fs::file_status st = fs::symlink_status(p, ec);
      if (!fs::exists(st) || fs::is_directory(st)) continue;
      struct stat sb {};
      const std::string kind = fs::is_symlink(st) ? "a symbolic link"
                               : ::lstat(p.c_str(), &sb) == 0 ? base::file_kind(sb.st_mode) : "not a folder";
      why = "'" + base::printable(p.string()) + "' is " + kind + ", not a frame folder this command made" + where +
            "; vexp data extract-frames never removes a file it did not make: move it away or choose another --out";
      break;
    }
    if (why.empty() && fs::is_directory(fs::symlink_status(dsts[i], ec))) {
      auto rec = journal.find(keys[i]);
      if (rec == journal.end())
        why = "'" + base::printable(dsts[i].string()) + "' is a folder this command did not make ('" +
              base::printable(journal_path.string()) + "' has no record of it)" + where +
              "; vexp data extract-frames replaces only frame folders it made: move it away or choose another --out";
      else if (rec->second.source == sources[i] && rec->second.size == sizes[i] && rec->second.mtime == stamps[i] &&
               rec->second.settings == settings && count_frames(dsts[i]) == rec->second.frames)
        counts[i] = rec->second.frames;  // finished: kept
    }
    if (!why.empty() && refused++ == 0) refusal = why;
  }
  if (refused > 0)
    throw base::failure(refusal + (refused > 1 ? " (and " + std::to_string(refused - 1) + " more)" : "") +
                                 "; nothing extracted");
  fs::create_directories(journal_path.parent_path());
  base::append_file(journal_path.string(), "");  // appendable (no link planted), before any work
  media::quiet_ffmpeg_logs();
  std::vector<std::string> errors(items.size());
  std::atomic<int64_t> done{0}, skipped{0};
  std::mutex print, journal_mu;
  parallel(static_cast<int64_t>(items.size()), workers, [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    const fs::path& src = srcs[k];
    const fs::path& dst = dsts[k];
    try {
      if (counts[k] >= 0) {  // resumable: a folder this command finished is kept
        skipped++;
        return;
      }
      counts[k] = data::extract_frames(src.string(), dst.string(), 0, jpeg, out_dir, [&](int64_t frames) {
        std::lock_guard<std::mutex> lock(journal_mu);
        base::append_file(journal_path.string(), keys[k] + "\t" + std::to_string(frames) + "\t" + sources[k] + "\t" +
                                                     sizes[k] + "\t" + stamps[k] + "\t" + settings + "\n");
      });
      done++;
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(i)] = e.what();
      std::lock_guard<std::mutex> lock(print);
      std::cerr << "vexp: warning: " << base::printable(e.what(), 4096) << "\n";
    }
  });
  // The frame list in the official TSM format (path num_frames label).
  std::ostringstream o;
  int64_t failed = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (counts[i] < 0) {
      ++failed;
      continue;
    }
    std::string unused;
    o << kinetics::tsm_line(frame_folder(items[i].rel, &unused).string(), counts[i], std::max<int64_t>(items[i].label, 0));
  }
  base::write_file_atomic(frame_list.string(), o.str());
  std::cout << "extracted " << done.load() << " video(s), " << skipped.load() << " already done, " << failed
            << " failed; frame list " << frame_list.string() << "\n";
  if (failed > 0) throw base::failure(std::to_string(failed) + " video(s) could not be extracted");
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
  auto ex_jpeg = std::make_shared<data::JpegOptions>();
  ex->add_option("VIDEO_LIST", *list, "List of videos (path [[num_frames] label] per line, TSM or mmaction2)")->required();
  ex->add_option("--out", *out, "Output folder")->required();
  ex->add_option("--root", *root, "Folder the list's paths are relative to (default: the list's folder)");
  ex->add_option("--workers", *ex_workers, "Threads")->check(CLI::Range(1, 1024));
  ex->add_option("--quality", ex_jpeg->quality, "JPEG quality (default 95)")->check(CLI::Range(1, 100));
  ex->add_option("--chroma", ex_jpeg->chroma,
                 "JPEG colour resolution: 420 (half, as FFmpeg and the official TSM frames; default) or 444 (full)")
      ->check(CLI::IsMember({420, 444}));
  ex->callback([=] { run_extract(*list, *out, *root, *ex_workers, *ex_jpeg); });

  auto* mk = data->add_subcommand(
      "make-synthetic",
      "Write the quickstart's motion clips as H.264 mp4 files with Kinetics-style lists, or (--layout kinetics400) "
      "a miniature Kinetics-400 download");
  auto sa = std::make_shared<data::SynthArgs>();
  mk->add_option("--out", sa->out, "Output folder")->required();
  mk->add_option("--layout", sa->layout,
                 "motion: the quickstart's clips and lists; kinetics400: a miniature Kinetics-400 (official CSVs, "
                 "per-class and flat videos with broken and missing ones, TSM and mmaction2 lists; only --seed and "
                 "--noise apply)")
      ->check(CLI::IsMember({"motion", "kinetics400"}));
  mk->add_option("--as", sa->as,
                 "motion: video (H.264 mp4 files) or frames (folders of img_00001.jpg ..., which need no FFmpeg)")
      ->check(CLI::IsMember({"video", "frames"}));
  mk->add_option("--channels", sa->channels, "motion: 1 (gray) or 3 (RGB, the gray clip in every channel)")
      ->check(CLI::IsMember({1, 3}));
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
  mk->callback([sa, mk] {
    if (sa->layout == "kinetics400") {
      for (const char* opt : {"--as", "--channels", "--classes", "--frames", "--size", "--train-clips", "--val-clips", "--fps",
                              "--crf", "--gop"})
        if (mk->count(opt) > 0)
          throw base::invalid(std::string(opt) + " does not apply to --layout kinetics400 (its shapes are fixed)");
      data::make_kinetics400_fixture(*sa);
    } else {
      data::make_synthetic_motion(*sa);
    }
  });

  auto* prep = data->add_subcommand("prepare", "Turn a downloaded dataset into the lists the recipes read");
  prep->require_subcommand(1);
  auto* k400 = prep->add_subcommand(
      "kinetics400",
      "From the official Kinetics-400 CSVs and a folder of videos (per-class or flat) to TSM and mmaction2 lists, "
      "classes.txt and a report of missing and undecodable videos (parallel, resumable)");
  auto po = std::make_shared<data::PrepareOptions>();
  po->workers = default_workers();
  auto reencode = std::make_shared<bool>(false);
  auto frames = std::make_shared<bool>(false);
  k400->add_option("--annotations", po->annotations,
                   "Folder of the official CSVs (train.csv/validate.csv of DeepMind's release, train.csv/val.csv "
                   "of the CVDF mirror, kinetics_train.csv/kinetics_val.csv, ...)");
  k400->add_option("--train-csv", po->train_csv, "The train CSV (instead of --annotations)");
  k400->add_option("--val-csv", po->val_csv, "The validation CSV (instead of --annotations)");
  k400->add_option("--videos", po->videos,
                   "Folder of the downloaded videos, {id}_{start:06d}_{end:06d}.mp4 in per-class folders or flat "
                   "(found per file, up to 4 levels deep)")
      ->required();
  k400->add_option("--out", po->out, "Output folder (the recipes' data root, KINETICS_ROOT)")->required();
  k400->add_option("--label-map", po->label_map,
                   "Class names, one per line: line i is label i (default: the train CSV's names sorted, as the "
                   "official TSM code and mmaction2 number them)");
  auto* re_flag = k400->add_flag("--reencode", *reencode,
                                 "Write H.264 copies at short side 256 (mmaction2's resize_videos.py) instead of "
                                 "linking the videos");
  k400->add_flag("--frames", *frames,
                 "Extract JPEG frame folders img_00001.jpg... (the official TSM vid2img_kinetics.py) instead of "
                 "linking the videos")
      ->excludes(re_flag);
  k400->add_option("--short-side", po->short_side,
                   "Shorter side of re-encoded videos or frames in pixels, 0 keeps the size (default: 256 with "
                   "--reencode, 331 with --frames)")
      ->check(CLI::Range(0, 4096));
  k400->add_option("--quality", po->jpeg.quality, "--frames: JPEG quality (default 95)")->check(CLI::Range(1, 100));
  k400->add_option("--chroma", po->jpeg.chroma,
                   "--frames: JPEG colour resolution: 420 (half, as the official TSM frames; default) or 444 (full)")
      ->check(CLI::IsMember({420, 444}));
  k400->add_option("--crf", po->crf, "--reencode: libx264 quality")->check(CLI::Range(0, 51));
  k400->add_option("--gop", po->gop, "--reencode: frames between keyframes")->check(CLI::Range(1, 10000));
  k400->add_option("--workers", po->workers, "Threads (default: every core)")->check(CLI::Range(1, 1024));
  k400->callback([po, reencode, frames] {
    po->mode = *frames ? data::PrepareMode::Frames : *reencode ? data::PrepareMode::Reencode : data::PrepareMode::Link;
    const int rc = data::prepare_kinetics400(*po);
    if (rc != 0) throw base::child_failed(rc);
  });
}

}  // namespace vexp::cli
