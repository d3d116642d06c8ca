#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "vexp/base/files.hpp"
#include "vexp/rundir/files.hpp"

using namespace vexp::rundir;
using json = nlohmann::json;

namespace {
void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
}  // namespace

TEST(RunDirFiles, NamesAndKinds) {
  vexp::base::TempDir tmp;
  RunDir d(tmp.path());
  EXPECT_EQ(d.metrics(), tmp.path() / "metrics.jsonl");
  EXPECT_EQ(d.failure_of_rank(3), tmp.path() / "failures" / "rank_3.txt");
  EXPECT_FALSE(d.holds_run());
  EXPECT_FALSE(d.is_run_dir());
  write_resolved(tmp.path(), "00ff", "[run]\nname = \"x\"\n");
  EXPECT_FALSE(d.is_run_dir());
  EXPECT_TRUE(d.is_run_dir(true));
  EXPECT_EQ(resolved_hash(d.resolved()), "00ff");
  EXPECT_EQ(read_text(d.resolved()), "# resolved recipe, hash 00ff\n[run]\nname = \"x\"\n");
  fs::create_directories(d.checkpoints());
  write(d.checkpoints() / checkpoint_file_name(2), "x");
  EXPECT_TRUE(d.holds_run());
  write(tmp.path() / "sweep.db", "");
  EXPECT_TRUE(d.is_sweep_dir());
}

TEST(RunDirFiles, CheckpointNamesOrderAndPruning) {
  EXPECT_EQ(checkpoint_file_name(3), "epoch_0003.pt");
  EXPECT_EQ(checkpoint_file_name(3, 17), "epoch_0003_step_000017.pt");
  vexp::base::TempDir tmp;
  for (auto n : {checkpoint_file_name(1), checkpoint_file_name(2), checkpoint_file_name(2, 5), checkpoint_file_name(10),
                 std::string("epoch_0011.pt.corrupt"), std::string("notes.txt")})
    write(tmp.path() / n, "x");
  const auto all = checkpoints_newest_first(tmp.path().string());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(fs::path(all[0]).filename(), "epoch_0010.pt");
  EXPECT_EQ(fs::path(all[1]).filename(), "epoch_0002_step_000005.pt");
  EXPECT_EQ(fs::path(all[3]).filename(), "epoch_0001.pt");
  EXPECT_EQ(fs::path(latest_checkpoint(tmp.path().string())).filename(), "epoch_0010.pt");
  // keep 1, but the one just written (older-named) stays too
  const auto removed = prune_checkpoints(tmp.path().string(), 1, (tmp.path() / "epoch_0002.pt").string());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_TRUE(fs::exists(tmp.path() / "epoch_0002.pt"));
  EXPECT_TRUE(fs::exists(tmp.path() / "epoch_0011.pt.corrupt"));
  EXPECT_TRUE(fs::exists(tmp.path() / "notes.txt"));
}

TEST(RunDirFiles, SideFilesGoWithTheirCheckpoint) {
  EXPECT_EQ(checkpoint_side_file("epoch_0003.pt", "ema"), "epoch_0003.ema.pt");
  EXPECT_EQ(checkpoint_side_file("/r/checkpoints/epoch_0003_step_000017.pt", "ema_slow"),
            "/r/checkpoints/epoch_0003_step_000017.ema_slow.pt");
  vexp::base::TempDir tmp;
  for (const char* n : {"epoch_0001.pt", "epoch_0001.ema.pt", "epoch_0001.ema2.pt", "epoch_0001_step_000002.pt",
                        "epoch_0001_step_000002.ema.pt", "epoch_0002.pt", "epoch_0002.ema.pt", "epoch_0001.a.b.pt",
                        "epoch_0001.ema.pt.corrupt"})
    write(tmp.path() / n, "x");
  // Side files are not checkpoints.
  const auto all = checkpoints_newest_first(tmp.path().string());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(fs::path(latest_checkpoint(tmp.path().string())).filename(), "epoch_0002.pt");
  const auto removed = prune_checkpoints(tmp.path().string(), 1, (tmp.path() / "epoch_0002.pt").string());
  EXPECT_EQ(removed.size(), 5u);  // 2 checkpoints, 3 side files
  for (const char* gone : {"epoch_0001.pt", "epoch_0001.ema.pt", "epoch_0001.ema2.pt", "epoch_0001_step_000002.pt",
                           "epoch_0001_step_000002.ema.pt"})
    EXPECT_FALSE(fs::exists(tmp.path() / gone)) << gone;
  for (const char* kept : {"epoch_0002.pt", "epoch_0002.ema.pt", "epoch_0001.a.b.pt", "epoch_0001.ema.pt.corrupt"})
    EXPECT_TRUE(fs::exists(tmp.path() / kept)) << kept;
}

TEST(RunDirFiles, MetricsRecordsAndSkippedLines) {
  vexp::base::TempDir tmp;
  write(tmp.path() / "metrics.jsonl",
        "{\"type\":\"step\",\"epoch\":1,\"step\":2,\"global_step\":2,\"loss\":1.5,\"lr\":0.1,\"ranks\":2,"
        "\"epochs_trained\":0.5}\n"
        "not json\n"
        "{\"type\":\"step\",\"global_step\":\"3\"}\n"
        "{\"type\":\"step\",\"epoch\":1,\"step\":4,\"global_step\":4,\"loss\":null}\n"
        "{\"type\":\"eval\",\"epoch\":1,\"global_step\":4,\"top1\":0.25,\"top5\":null,\"val_loss\":1.2,"
        "\"ema_top1\":0.5,\"ema_loss\":null}\n"
        "{\"type\":\"step\",\"epoch\":2,\"st");  // a torn last line
  const Metrics m = read_metrics(tmp.path());
  ASSERT_EQ(m.steps.size(), 2u);
  EXPECT_EQ(m.steps[0].ranks, 2);
  EXPECT_DOUBLE_EQ(m.steps[0].epochs_trained, 0.5);
  EXPECT_EQ(m.steps[1].epochs_trained, -1);
  EXPECT_TRUE(std::isnan(m.steps[1].loss));
  ASSERT_EQ(m.evals.size(), 1u);
  EXPECT_EQ(m.evals[0].value("top1"), 0.25);
  EXPECT_FALSE(m.evals[0].value("top5"));
  EXPECT_FALSE(m.evals[0].value("clips_per_s"));
  // A hook's metrics (numbers; null is not finite and left out).
  EXPECT_EQ(m.evals[0].hooks, (std::map<std::string, double>{{"ema_top1", 0.5}}));
  EXPECT_EQ(m.evals[0].value("ema_top1"), 0.5);
  EXPECT_FALSE(m.evals[0].value("ema_loss"));
  EXPECT_EQ(m.skipped.count, 3);
  EXPECT_NE(m.skipped.where.find("metrics.jsonl:3: key 'global_step' is a string, expected a number"), std::string::npos)
      << m.skipped.where;
  EXPECT_NE(m.skipped.where.find("metrics.jsonl:2: not JSON"), std::string::npos);
  // no file: no records
  vexp::base::TempDir empty;
  EXPECT_TRUE(read_metrics(empty.path()).steps.empty());
}

TEST(RunDirFiles, EvalRecordsSayWhereTheRunStood) {
  vexp::base::TempDir tmp;
  write(tmp.path() / "metrics.jsonl",
        "{\"type\":\"eval\",\"epoch\":1,\"global_step\":6,\"top1\":0.5,\"top5\":1,\"val_loss\":1.2,"
        "\"clips_trained\":48,\"train_s\":1.25,\"wall_s\":2.5,\"ema_top1\":0.75}\n"
        "{\"type\":\"eval\",\"epoch\":2,\"global_step\":12,\"top1\":0.5,\"top5\":1,\"val_loss\":1.1}\n"
        "{\"type\":\"eval\",\"epoch\":3,\"global_step\":18,\"top1\":0.5,\"wall_s\":\"late\"}\n");
  const Metrics m = read_metrics(tmp.path());
  ASSERT_EQ(m.evals.size(), 2u);
  EXPECT_EQ(m.evals[0].clips_trained, 48);
  EXPECT_EQ(m.evals[0].train_s, 1.25);
  EXPECT_EQ(m.evals[0].wall_s, 2.5);
  // The trainer's own figures are not a hook's metrics.
  EXPECT_EQ(m.evals[0].hooks, (std::map<std::string, double>{{"ema_top1", 0.75}}));
  EXPECT_FALSE(m.evals[0].value("wall_s"));
  // A record of an earlier vexp: none of them.
  EXPECT_FALSE(m.evals[1].clips_trained || m.evals[1].train_s || m.evals[1].wall_s);
  // A wall_s of the wrong type makes the record unusable, as any other key does.
  EXPECT_EQ(m.skipped.count, 1);
  EXPECT_NE(m.skipped.where.find("metrics.jsonl:3: key 'wall_s' is a string"), std::string::npos) << m.skipped.where;
}

// Lines are split wherever the 64 KiB reads end; a line longer than kMaxLogLineBytes
// goes to on_long (with its number and size), and the lines after it are still read.
TEST(RunDirFiles, ForEachLineSplitsAtEveryNewlineAndPassesOverLongLines) {
  vexp::base::TempDir tmp;
  const fs::path f = tmp.path() / "log.txt";
  const std::string across(70000, 'a');  // ends in the second read
  const std::string long_line(kMaxLogLineBytes + 1, 'b');
  write(f, "one\n" + across + "\n\n" + long_line + "\nlast");
  std::vector<std::pair<std::int64_t, std::string>> lines;
  std::vector<std::pair<std::int64_t, std::uint64_t>> longs;
  for_each_line(
      f, [&](const std::string& line, std::int64_t n) { lines.emplace_back(n, line); },
      [&](std::int64_t n, std::uint64_t bytes) { longs.emplace_back(n, bytes); });
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], std::make_pair(std::int64_t{1}, std::string("one")));
  EXPECT_EQ(lines[1], std::make_pair(std::int64_t{2}, across));
  EXPECT_EQ(lines[2], std::make_pair(std::int64_t{3}, std::string()));
  EXPECT_EQ(lines[3], std::make_pair(std::int64_t{5}, std::string("last")));
  ASSERT_EQ(longs.size(), 1u);
  EXPECT_EQ(longs[0], std::make_pair(std::int64_t{4}, static_cast<std::uint64_t>(long_line.size())));
  // A line of exactly the limit is still a line; in metrics.jsonl a longer one is a skipped line.
  write(tmp.path() / "metrics.jsonl", std::string(kMaxLogLineBytes + 5, 'x') + "\n");
  const Metrics m = read_metrics(tmp.path());
  EXPECT_EQ(m.skipped.count, 1);
  EXPECT_NE(m.skipped.where.find("metrics.jsonl:1: " + long_line_problem(kMaxLogLineBytes + 5)), std::string::npos)
      << m.skipped.where;
  write(f, std::string(kMaxLogLineBytes, 'c'));
  lines.clear();
  for_each_line(f, [&](const std::string& line, std::int64_t n) { lines.emplace_back(n, line); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].second.size(), kMaxLogLineBytes);
}

TEST(RunDirFiles, TruncateMetricsKeepsTheResumedPrefix) {
  vexp::base::TempDir tmp;
  write(tmp.path() / "metrics.jsonl",
        "{\"type\":\"step\",\"global_step\":3}\n{\"type\":\"eval\",\"epoch\":1}\n{\"type\":\"step\",\"global_step\":6}\n"
        "{\"type\":\"eval\",\"epoch\":2}\n{\"type\":\"step\",\"glo");
  truncate_metrics(tmp.path(), 3, 1);
  EXPECT_EQ(read_text(tmp.path() / "metrics.jsonl"), "{\"type\":\"step\",\"global_step\":3}\n{\"type\":\"eval\",\"epoch\":1}\n");
}

TEST(RunDirFiles, SummaryTypesAreChecked) {
  vexp::base::TempDir tmp;
  EXPECT_TRUE(read_summary(tmp.path() / "summary.json").is_null());
  write_summary(tmp.path(), json{{"name", "a"}, {"top1", 0.5}, {"val_loss", nullptr}});
  EXPECT_EQ(read_summary(tmp.path() / "summary.json")["top1"], 0.5);
  write(tmp.path() / "summary.json", "{\"top1\": \"high\"}");
  try {
    read_summary(tmp.path() / "summary.json");
    FAIL() << "a string top1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("summary.json': key 'top1' is a string, expected a number"), std::string::npos)
        << e.what();
  }
  write(tmp.path() / "summary.json", "[1]");
  EXPECT_THROW(read_summary(tmp.path() / "summary.json"), Error);
  write(tmp.path() / "summary.json", "{");
  EXPECT_THROW(read_summary(tmp.path() / "summary.json"), Error);
}

TEST(RunDirFiles, HostileFilesAreRefusedNotWaitedOn) {
  vexp::base::TempDir tmp;
  ASSERT_EQ(::mkfifo((tmp.path() / "metrics.jsonl").c_str(), 0600), 0);
  EXPECT_THROW(read_metrics(tmp.path()), Error);
  ASSERT_EQ(::mkfifo((tmp.path() / "summary.json").c_str(), 0600), 0);
  EXPECT_THROW(read_summary(tmp.path() / "summary.json"), Error);
  fs::create_symlink("/dev/zero", tmp.path() / "resolved.toml");
  EXPECT_THROW(resolved_hash(tmp.path() / "resolved.toml"), Error);
}

TEST(RunDirFiles, RecordedFailureIsTheLastLineOfTheFirstRank) {
  vexp::base::TempDir tmp;
  EXPECT_EQ(recorded_failure(tmp.path()), "");
  fs::create_directories(tmp.path() / "failures");
  write(tmp.path() / "failures" / "rank_1.txt", "first\nsecond\n\n");
  write(tmp.path() / "failures" / "rank_0.txt", "rank zero's\n");
  EXPECT_EQ(recorded_failure(tmp.path()), "rank_0.txt: rank zero's");
}

// No command's output may replace a file vexp manages (issue #36 item 4).
TEST(RunDirFiles, ManagedFilesOfRunAndSweepFolders) {
  vexp::base::TempDir tmp;
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / "checkpoints");
  fs::create_directories(run / "failures" / "previous");
  write(run / "metrics.jsonl", "");
  for (const char* f : {"summary.json", "metrics.jsonl", "resolved.toml", "provenance.jsonl", "jobs.jsonl",
                        "job.sbatch", ".vexp.lock", "log.txt", "slurm-123.out", "events.out.tfevents.1.host"})
    EXPECT_NE(managed_file_problem(run / f).find("of the run folder"), std::string::npos) << f;
  EXPECT_NE(managed_file_problem(run / "checkpoints" / "epoch_0001.pt").find("inside checkpoints/"), std::string::npos);
  EXPECT_NE(managed_file_problem(run / "failures" / "previous" / "rank_0.txt").find("inside failures/"),
            std::string::npos);
  EXPECT_EQ(managed_file_problem(run / "model.pth"), "");    // a new name: an output may go there
  EXPECT_EQ(managed_file_problem(tmp.path() / "summary.json"), "");  // not a run folder
  // Through a symbolic link to the folder.
  fs::create_directory_symlink(run, tmp.path() / "alias");
  EXPECT_NE(managed_file_problem(tmp.path() / "alias" / "summary.json").find("summary.json of the run folder"),
            std::string::npos);
  // A sweep folder: the store and everything under trials/.
  const fs::path sw = tmp.path() / "sweep";
  fs::create_directories(sw / "trials" / "001" / "checkpoints");
  write(sw / "sweep.db", "");
  for (const fs::path& p : {sw / "sweep.db", sw / "sweep.db-wal", sw / "trials" / "001" / "x.json",
                            sw / "trials" / "001" / "checkpoints" / "epoch_0001.pt"})
    EXPECT_NE(managed_file_problem(p).find("sweep folder"), std::string::npos) << p;
  EXPECT_EQ(managed_file_problem(sw / "best.toml"), "");
}
