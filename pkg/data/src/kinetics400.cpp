#include "vexp/data/kinetics400.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "vexp/base/attempt.hpp"
#include "vexp/base/error.hpp"
#include "vexp/data/parallel.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/annotations.hpp"
#include "vexp/kinetics/label_map.hpp"
#include "vexp/kinetics/names.hpp"
#include "vexp/kinetics/video_list.hpp"
#include "vexp/media/media.hpp"

namespace vexp::data {
namespace fs = std::filesystem;
using kinetics::clip_name;
using kinetics::mmaction_name;
using kinetics::tsm_name;

// ---------------------------------------------------------------- prepare
namespace {

[[noreturn]] void bad_input(const std::string& where, const std::string& what) {
  throw base::failure(where + ": " + what);
}

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

const char* const kTrainNames[] = {"train.csv", "kinetics_train.csv", "kinetics-400_train.csv",
                                   "kinetics_400_train.csv"};
const char* const kValNames[] = {"val.csv", "validate.csv", "kinetics_val.csv", "kinetics-400_val.csv",
                                 "kinetics_400_val.csv"};

template <size_t N>
std::string find_csv(const std::string& dir, const char* const (&names)[N], const char* what) {
  std::vector<std::string> found;
  std::string looked;
  for (const char* n : names) {
    looked += std::string(looked.empty() ? "" : ", ") + n;
    if (fs::is_regular_file(fs::path(dir) / n)) found.push_back((fs::path(dir) / n).string());
  }
  if (found.empty())
    throw base::failure("no " + std::string(what) + " CSV in '" + dir + "' (looked for " + looked +
                             "); name it with --" + what + "-csv");
  if (found.size() > 1)
    throw base::failure("'" + dir + "' holds more than one " + what + " CSV (" + found[0] + ", " + found[1] +
                             "); name one with --" + what + "-csv");
  return found[0];
}

bool is_video_file(const fs::path& p) {
  static const std::set<std::string> kExt = {".mp4", ".webm", ".mkv", ".avi"};
  return kExt.count(p.extension().string()) && p.stem().string().find(".partial") == std::string::npos;
}

// Every video file under `root` (4 levels deep at most, folder links followed,
// `skip` left out) by its name without extension.
std::unordered_map<std::string, std::vector<fs::path>> index_videos(const fs::path& root, const fs::path& skip) {
  std::unordered_map<std::string, std::vector<fs::path>> by_stem;
  std::error_code ec;
  const fs::path skip_c = fs::weakly_canonical(skip, ec);
  fs::recursive_directory_iterator it(
      root, fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied, ec);
  if (ec) throw base::failure("cannot read the video folder '" + root.string() + "': " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw base::failure("cannot read the video folder '" + root.string() + "': " + ec.message());
    const fs::directory_entry& e = *it;
    if (e.is_directory(ec)) {
      if (it.depth() >= 3 || fs::weakly_canonical(e.path(), ec) == skip_c) it.disable_recursion_pending();
      continue;
    }
    if (is_video_file(e.path()) && e.is_regular_file(ec)) by_stem[e.path().stem().string()].push_back(e.path());
  }
  for (auto& [stem, v] : by_stem) std::sort(v.begin(), v.end());
  return by_stem;
}

bool in_split_folder(const fs::path& rel, bool train) {
  static const std::set<std::string> kTrain = {"train", "training", "videos_train"};
  static const std::set<std::string> kVal = {"val", "validate", "validation", "videos_val"};
  for (const auto& part : rel.parent_path())
    if ((train ? kTrain : kVal).count(part.string())) return true;
  return false;
}

// The file of a clip: preferring the folder of its label (as written, or with
// mmaction2's or TSM's underscores), then a folder of its split.
const fs::path* pick_video(const std::vector<fs::path>& candidates, const fs::path& root, const std::string& label,
                           bool train) {
  const fs::path* best = nullptr;
  int best_score = -10;
  for (const auto& p : candidates) {
    const std::string parent = p.parent_path().filename().string();
    const fs::path rel = p.lexically_relative(root);
    int score = 0;
    if (parent == label || parent == mmaction_name(label) || parent == tsm_name(label)) score += 2;
    if (in_split_folder(rel, train)) score += 1;
    if (in_split_folder(rel, !train)) score -= 1;
    if (score > best_score) best = &p, best_score = score;
  }
  return best;
}

struct Item {
  bool train = true;
  const kinetics::Clip* row = nullptr;
  std::string csv;            // the CSV it came from
  int64_t label = 0;
  fs::path source;            // empty: missing
  std::string out_rel;        // relative to OUT
  // result
  bool done = false, ok = false;
  int64_t frames = 0;
  std::string error;
};

struct JournalEntry {
  bool ok = false;
  int64_t frames = 0;
  std::string source, size, mtime, message;
};

std::string stat_size(const fs::path& p) {
  std::error_code ec;
  return std::to_string(fs::file_size(p, ec));
}
std::string stat_mtime(const fs::path& p) {
  std::error_code ec;
  return std::to_string(fs::last_write_time(p, ec).time_since_epoch().count());
}

std::map<std::string, JournalEntry> read_journal(const fs::path& path) {
  std::map<std::string, JournalEntry> out;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {  // complete lines only
    std::vector<std::string> f;
    std::string field;
    for (size_t i = pos; i < nl; ++i) {
      if (text[i] == '\t') f.push_back(std::move(field)), field.clear();
      else field += text[i];
    }
    f.push_back(field);
    if (f.size() != 7 || (f[1] != "ok" && f[1] != "bad")) continue;
    JournalEntry e;
    e.ok = f[1] == "ok";
    try {
      e.frames = std::stoll(f[2]);
    } catch (const std::exception&) {
      continue;
    }
    e.source = f[3];
    e.size = f[4];
    e.mtime = f[5];
    e.message = f[6];
    out[f[0]] = e;
  }
  return out;
}

// A path as the tab-separated journal holds it: control characters escaped, so that
// a TAB or newline in a folder name cannot split the line.
std::string journal_field(const std::string& s) { return base::printable(s, s.size() + 1); }

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  return s;
}

// Writes `files` (name -> content) into `dir`, each atomically (vexp::base).
void write_atomically(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [name, text] : files) base::write_file_atomic((dir / name).string(), text);
}

std::string read_text(const fs::path& p, bool* exists) {
  std::ifstream in(p, std::ios::binary);
  *exists = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* mode_name(PrepareMode m) {
  return m == PrepareMode::Link ? "link" : m == PrepareMode::Reencode ? "reencode" : "frames";
}

// What one preparation reads and writes: the two CSVs and the output files' names.
struct Plan {
  std::string train_csv, val_csv;
  std::vector<std::string> output_names;  // TSM train/val, mmaction2 train/val, classes.txt, prepare_report.txt
  int short_side = 0;
};

Plan plan_of(const PrepareOptions& o) {
  Plan pl;
  std::string& train_csv = pl.train_csv;
  std::string& val_csv = pl.val_csv;
  train_csv = o.train_csv;
  val_csv = o.val_csv;
  if (train_csv.empty() || val_csv.empty()) {
    if (o.annotations.empty()) throw base::failure("give --annotations DIR, or --train-csv and --val-csv");
    if (!fs::is_directory(o.annotations))
      throw base::failure("annotation folder '" + o.annotations + "' does not exist");
    if (train_csv.empty()) train_csv = find_csv(o.annotations, kTrainNames, "train");
    if (val_csv.empty()) val_csv = find_csv(o.annotations, kValNames, "val");
  }
  if (!fs::is_directory(o.videos)) throw base::failure("video folder '" + o.videos + "' does not exist");
  // Links inside the folder they point into, or frames beside the videos, would
  // loop through the next run's index of --videos.
  if (base::is_within(o.videos, o.out) || base::is_within(o.out, o.videos))
    throw base::failure("--out '" + o.out + "' and --videos '" + o.videos +
                             "' overlap (one is the other or lies inside it); give an --out outside the video folder");
  const std::string mm_kind = o.mode == PrepareMode::Frames ? "rawframes" : "videos";
  const std::vector<std::string>& output_names = pl.output_names = {"train_videofolder.txt",
                                                 "val_videofolder.txt",
                                                 "kinetics400_train_list_" + mm_kind + ".txt",
                                                 "kinetics400_val_list_" + mm_kind + ".txt",
                                                 "classes.txt",
                                                 "prepare_report.txt"};
  for (const std::string& input : {train_csv, val_csv, o.label_map})
    for (const std::string& name : output_names)
      if (!input.empty() && base::same_file(fs::path(o.out) / name, input))
        throw base::failure("the output '" + (fs::path(o.out) / name).string() + "' would replace the input '" +
                                 input + "'; give another --out");
  pl.short_side = o.short_side >= 0 ? o.short_side : o.mode == PrepareMode::Frames ? 331 : 256;
  return pl;
}

// The clips of both CSVs, numbered and matched to the videos found under --videos
// (a clip listed twice in a CSV is kept once and named in `duplicates`).
struct Items {
  std::vector<kinetics::Clip> train_rows, val_rows;
  kinetics::LabelMap numbering;
  std::vector<Item> items;
  std::vector<std::string> duplicates;
};

void collect_items(const PrepareOptions& o, const Plan& pl, Items& c) {
  const std::string& train_csv = pl.train_csv;
  const std::string& val_csv = pl.val_csv;
  c.train_rows = kinetics::read_annotations(train_csv);
  c.val_rows = kinetics::read_annotations(val_csv);
  const auto& train_rows = c.train_rows;
  const auto& val_rows = c.val_rows;

  // ---- classes: the label map's order, else the train CSV's names sorted
  c.numbering =
      o.label_map.empty() ? kinetics::LabelMap(kinetics::sorted_class_names(train_rows), train_csv)
                          : kinetics::read_label_map(o.label_map);
  const kinetics::LabelMap& numbering = c.numbering;
  auto number = [&](const kinetics::Clip& r, const std::string& csv) -> int64_t {
    const int64_t label = numbering.find(r.label);  // the map may write names as mmaction2 or TSM folders do
    if (label >= 0) return label;
    if (!o.label_map.empty())
      bad_input(csv + ":" + std::to_string(r.line), "label '" + base::printable(r.label) + "' is not in the label map '" + o.label_map + "'");
    bad_input(csv + ":" + std::to_string(r.line),
              "label '" + base::printable(r.label) + "' is not a class of the train CSV '" + train_csv + "'");
  };

  // ---- items
  const fs::path out(o.out);
  const auto videos = index_videos(o.videos, out);
  std::vector<Item>& items = c.items;
  std::vector<std::string>& duplicates = c.duplicates;
  for (bool train : {true, false}) {
    const auto& rows = train ? train_rows : val_rows;
    const std::string& csv = train ? train_csv : val_csv;
    std::set<std::string> seen;
    for (const auto& r : rows) {
      Item it;
      it.train = train;
      it.row = &r;
      it.csv = csv;
      it.label = number(r, csv);
      const std::string clip = clip_name(r.youtube_id, r.start, r.end);
      if (!seen.insert(clip).second) {
        duplicates.push_back(csv + ":" + std::to_string(r.line) + ": " + clip + " is listed again");
        continue;
      }
      auto found = videos.find(clip);
      if (found != videos.end()) it.source = *pick_video(found->second, o.videos, r.label, train);
      const std::string dir = std::string(o.mode == PrepareMode::Frames ? "frames/" : "videos/") +
                              (train ? "train/" : "val/") + mmaction_name(r.label) + "/";
      it.out_rel = dir + clip +
                   (o.mode == PrepareMode::Frames     ? ""
                    : o.mode == PrepareMode::Reencode ? ".mp4"
                                                      : it.source.extension().string());
      items.push_back(std::move(it));
    }
  }

}

// The items still to do: a journal entry of the same source (path, size, mtime)
// whose output is in place marks an item done. Refuses an --out prepared with other
// settings.
std::vector<size_t> items_to_do(const PrepareOptions& o, const Plan& pl, std::vector<Item>& items) {
  const fs::path out(o.out);
  const int short_side = pl.short_side;
  // (same settings only)
  std::ostringstream settings;
  settings << "mode " << mode_name(o.mode) << "\n";
  if (o.mode == PrepareMode::Reencode) settings << "short_side " << short_side << "\ncrf " << o.crf << "\ngop " << o.gop << "\n";
  if (o.mode == PrepareMode::Frames) {
    settings << "short_side " << short_side << "\nquality " << o.jpeg.quality << "\n";
    // Folders made before chroma was an option are 4:4:4 at quality >= 90.
    if (o.jpeg.chroma != (o.jpeg.quality >= 90 ? 444 : 420)) settings << "chroma " << o.jpeg.chroma << "\n";
  }
  const fs::path settings_path = out / ".vexp_prepare/settings", journal_path = out / ".vexp_prepare/journal.tsv";
  fs::create_directories(out / ".vexp_prepare");
  bool had_settings = false;
  const std::string old_settings = read_text(settings_path, &had_settings);
  if (had_settings && old_settings != settings.str()) {
    std::string was = old_settings;
    std::replace(was.begin(), was.end(), '\n', ' ');
    throw base::failure("'" + o.out + "' was prepared with other settings (" + was +
                             "); use another --out or the same options");
  }
  if (!had_settings) write_atomically(out / ".vexp_prepare", {{"settings", settings.str()}});
  const auto journal = read_journal(journal_path);

  std::vector<size_t> todo;
  for (size_t i = 0; i < items.size(); ++i) {
    Item& it = items[i];
    if (it.source.empty()) continue;
    const std::string abs_source = journal_field(fs::absolute(it.source).lexically_normal().string());
    auto j = journal.find(it.out_rel);
    bool done = false;
    if (j != journal.end() && j->second.source == abs_source && j->second.size == stat_size(it.source) &&
        j->second.mtime == stat_mtime(it.source)) {
      std::error_code ec;
      const fs::path dst = out / it.out_rel;
      if (!j->second.ok) done = true;
      else if (o.mode == PrepareMode::Link)
        done = fs::is_symlink(dst, ec) && journal_field(fs::read_symlink(dst, ec).string()) == abs_source;
      else if (o.mode == PrepareMode::Reencode) done = fs::is_regular_file(dst, ec);
      else done = fs::is_directory(dst, ec);
      if (done) {
        it.done = true;
        it.ok = j->second.ok;
        it.frames = j->second.frames;
        it.error = j->second.message;
      }
    }
    if (!done) todo.push_back(i);
  }

  return todo;
}

// The work, in parallel, journaled item by item. False when interrupted (SIGINT,
// SIGTERM): the items done so far are journaled.
bool run_items(const PrepareOptions& o, const Plan& pl, std::vector<Item>& items, const std::vector<size_t>& todo) {
  const fs::path out(o.out);
  const int short_side = pl.short_side;
  const fs::path journal_path = out / ".vexp_prepare/journal.tsv";
  // The journal is appended to without following a link (an output folder may be a
  // received one): a check that it can be, then one append per item.
  base::append_file(journal_path.string(), "");
  std::mutex mu;
  std::string fatal;
  std::atomic<bool> halt{false};  // set on a fatal error or an interrupt: no new item starts
  g_interrupted = false;
  auto old_int = std::signal(SIGINT, on_interrupt);
  auto old_term = std::signal(SIGTERM, on_interrupt);
  media::quiet_ffmpeg_logs();
  const auto already = std::count_if(items.begin(), items.end(), [](const Item& i) { return i.done; });
  if (!todo.empty() && already > 0)
    std::cerr << "resuming: " << todo.size() << " video(s) to do, " << already << " done before\n";
  Progress progress(std::string("prepare (") + mode_name(o.mode) + ")", static_cast<int64_t>(todo.size()), std::cerr,
                    stderr_is_terminal());
  parallel_for(
      static_cast<int64_t>(todo.size()), o.workers,
      [&](int64_t k) {
        if (g_interrupted) {
          halt = true;
          return;
        }
        Item& it = items[todo[static_cast<size_t>(k)]];
        const fs::path dst = out / it.out_rel;
        const std::string abs_source = fs::absolute(it.source).lexically_normal().string();
        try {
          const auto made = base::attempt<media::MediaError>([&] {
            fs::create_directories(dst.parent_path());
            // Behind the CSV's name checks: a folder link planted in OUT cannot
            // carry a write outside it.
            if (!base::is_within(out, dst))
              throw base::failure("refusing to write '" + base::printable(dst.string()) + "': it is not inside '" +
                                       base::printable(o.out) + "'");
            if (o.mode == PrepareMode::Link) {
              it.frames = media::verify_video(it.source.string());
              const fs::path tmp = dst.string() + ".partial";
              fs::remove(tmp);
              fs::create_symlink(abs_source, tmp);
              fs::rename(tmp, dst);
            } else if (o.mode == PrepareMode::Reencode) {
              it.frames = reencode_video(it.source.string(), dst.string(), short_side, o.crf, o.gop);
            } else {
              it.frames = extract_frames(it.source.string(), dst.string(), short_side, o.jpeg, o.out);
            }
          });
          // The source's own errors make it undecodable; the outputs' are fatal.
          if (!made && made.message().rfind("'" + it.source.string() + "': ", 0) != 0) made.rethrow();
          it.ok = static_cast<bool>(made);
          if (!made) it.error = made.message();
          std::lock_guard<std::mutex> lock(mu);
          std::ostringstream line;
          line << it.out_rel << "\t" << (it.ok ? "ok" : "bad") << "\t" << it.frames << "\t" << journal_field(abs_source)
               << "\t" << stat_size(it.source) << "\t" << stat_mtime(it.source) << "\t" << one_line(it.error) << "\n";
          base::append_file(journal_path.string(), line.str());
          it.done = true;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (fatal.empty()) fatal = e.what();
          halt = true;
        }
        progress.tick();
        if (g_interrupted) halt = true;
      },
      &halt);
  progress.finish();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (!fatal.empty()) throw base::failure(fatal);
  if (g_interrupted) {
    const auto finished = std::count_if(items.begin(), items.end(), [](const Item& i) { return i.done; });
    std::cerr << "vexp: interrupted: " << finished << " of "
              << std::count_if(items.begin(), items.end(), [](const Item& i) { return !i.source.empty(); })
              << " videos done; run the same command again to resume (no list was written)\n";
    return false;
  }
  return true;
}

// The lists (TSM's and mmaction2's), classes.txt and prepare_report.txt, written
// when they change (`nothing_done`: no item was prepared now).
void write_lists(const PrepareOptions& o, const Plan& pl, const Items& c, bool nothing_done) {
  const fs::path out(o.out);
  const std::string& train_csv = pl.train_csv;
  const std::string& val_csv = pl.val_csv;
  const std::vector<std::string>& output_names = pl.output_names;
  const std::vector<std::string>& classes = c.numbering.names();
  const std::vector<Item>& items = c.items;
  const std::vector<std::string>& duplicates = c.duplicates;
  const std::string classes_txt = kinetics::label_map_text(classes);
  std::string tsm[2], mm[2], report_body;
  int64_t listed[2] = {0, 0}, missing[2] = {0, 0}, bad[2] = {0, 0}, total[2] = {0, 0};
  for (const Item& it : items) {
    const int s = it.train ? 0 : 1;
    const char* sp = it.train ? "train" : "val";
    ++total[s];
    const std::string where = it.csv + ":" + std::to_string(it.row->line);
    if (it.source.empty()) {
      ++missing[s];
      report_body += std::string("missing\t") + sp + "\t" + clip_name(it.row->youtube_id, it.row->start, it.row->end) +
                     "\t" + where + "\n";
      continue;
    }
    if (!it.ok) {
      ++bad[s];
      report_body += std::string("undecodable\t") + sp + "\t" + journal_field(it.source.string()) + "\t" + where + "\t" +
                     one_line(it.error) + "\n";
      continue;
    }
    ++listed[s];
    tsm[s] += kinetics::tsm_line(it.out_rel, it.frames, it.label);
    // mmaction2's frame lists have TSM's columns; its video lists have no frame count.
    mm[s] += o.mode == PrepareMode::Frames ? kinetics::tsm_line(it.out_rel, it.frames, it.label)
                                           : kinetics::mmaction_line(it.out_rel, it.label);
  }
  for (const auto& d : duplicates) report_body += "duplicate\t" + d + "\n";
  std::string summary, report = "# vexp data prepare kinetics400: the clips of the CSVs that are not in the lists\n";
  for (int s : {0, 1}) {
    const std::string line = std::string(s == 0 ? "train" : "val") + ": " + std::to_string(listed[s]) + " listed, " +
                             std::to_string(missing[s]) + " missing, " + std::to_string(bad[s]) + " undecodable (of " +
                             std::to_string(total[s]) + " clips in " + (s == 0 ? train_csv : val_csv) + ")\n";
    summary += line;
    report += "# " + line;
  }
  report += "# kind\tsplit\tvideo\tcsv line\terror\n" + report_body;
  const std::vector<std::pair<std::string, std::string>> files = {
      {output_names[0], tsm[0]},      {output_names[1], tsm[1]},      {output_names[2], mm[0]},
      {output_names[3], mm[1]},       {output_names[4], classes_txt}, {output_names[5], report}};
  bool unchanged = nothing_done;
  for (const auto& [name, text] : files) {
    bool exists = false;
    if (unchanged && (read_text(out / name, &exists) != text || !exists)) unchanged = false;
  }
  summary += std::string("checked: every frame of every listed video decoded (") +
             (o.mode == PrepareMode::Link       ? "a full decode, nothing written"
              : o.mode == PrepareMode::Reencode ? "while re-encoding"
                                                : "while extracting") +
             ")\n";
  std::cout << summary;
  if (unchanged) {
    std::cout << "'" << o.out << "' is complete: nothing to do\n";
    return;
  }
  write_atomically(out, files);
  std::cout << classes.size() << " classes in classes.txt; lists train_videofolder.txt, val_videofolder.txt (TSM), "
            << files[2].first << ", " << files[3].first << " (mmaction2); missing and undecodable videos in "
            << (out / "prepare_report.txt").string() << "\n";
}

}  // namespace

int prepare_kinetics400(const PrepareOptions& o) {
  const Plan pl = plan_of(o);
  Items c;
  collect_items(o, pl, c);
  const std::vector<size_t> todo = items_to_do(o, pl, c.items);
  if (!run_items(o, pl, c.items, todo)) return 130;
  write_lists(o, pl, c, todo.empty());
  return 0;
}

}  // namespace vexp::data
