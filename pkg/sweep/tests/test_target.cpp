// [sweep] target: the key and its errors, the steps / clips / time to it read from a
// run folder's metrics.jsonl, and the store's columns (a store of the previous vexp
// opens and gains them).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "vexp/base/files.hpp"
#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/directory.hpp"
#include "vexp/sweep/store.hpp"
#include "vexp/sweep/to_target.hpp"

namespace {

using vexp::base::TempDir;
using namespace vexp::sweep;
namespace fs = std::filesystem;

std::optional<Definition> load(const TempDir& t, const std::string& target_line, std::string& problems) {
  std::ofstream(t.path() / "base.toml") << "[run]\nepochs = 1\n";
  const std::string path = (t.path() / "s.toml").string();
  std::ofstream(path) << "[sweep]\nbase = \"base.toml\"\n" << target_line
                      << "\n[[sweep.axis]]\nkey = \"dist.batch_per_gpu\"\ngrid = [8, 16]\n";
  vexp::dsl::Diagnostics d;
  auto def = load_definition(path, d);
  problems = d.str();
  return def;
}

TEST(SweepTarget, TheKeyAndItsDirection) {
  TempDir t("vexp_target_test");
  std::string p;
  auto def = load(t, "target = { metric = \"top1\", value = 0.9 }", p);
  ASSERT_TRUE(def) << p;
  ASSERT_TRUE(def->target);
  EXPECT_EQ(def->target->text(), "top1 >= 0.9");
  EXPECT_TRUE(def->target->reached_by(0.9) && !def->target->reached_by(0.89));
  // val_loss is reached from above, whatever the sweep's direction.
  def = load(t, "direction = \"max\"\ntarget = { metric = \"val_loss\", value = 1 }", p);
  ASSERT_TRUE(def && def->target) << p;
  EXPECT_EQ(def->target->text(), "val_loss <= 1");
  EXPECT_TRUE(def->target->reached_by(0.5) && !def->target->reached_by(1.5));
  def = load(t, "target = { metric = \"val_loss\", value = 100 }", p);
  ASSERT_TRUE(def && def->target) << p;
  EXPECT_EQ(def->target->text(), "val_loss <= 100");
  def = load(t, "target = { metric = \"top5\", value = 0.00001 }", p);
  ASSERT_TRUE(def && def->target) << p;
  EXPECT_EQ(def->target->text(), "top5 >= 1e-05");
  // The text the store keeps reads back.
  const auto back = parse_target_text("val_loss <= 1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->metric, "val_loss");
  EXPECT_EQ(back->value, 1);
  EXPECT_FALSE(parse_target_text(""));
  EXPECT_FALSE(parse_target_text("top1 <= 0.5"));  // the wrong way round
  EXPECT_FALSE(parse_target_text("top1 >= x"));
}

TEST(SweepTarget, TheTargetIsNoPartOfTheHash) {
  TempDir t("vexp_target_test");
  std::string p;
  const auto a = load(t, "target = { metric = \"top1\", value = 0.9 }", p);
  const auto b = load(t, "target = { metric = \"top5\", value = 0.5 }", p);
  const auto c = load(t, "", p);
  const auto d = load(t, "metric = \"top5\"", p);
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ(a->text_hash, b->text_hash);
  EXPECT_EQ(a->text_hash, c->text_hash);
  EXPECT_NE(c->text_hash, d->text_hash);  // the rest of the file still is
}

TEST(SweepTarget, ErrorsNameTheFileLineAndColumn) {
  TempDir t("vexp_target_test");
  const std::string f = (t.path() / "s.toml").string();
  std::string p;
  EXPECT_FALSE(load(t, "target = { metric = \"top2\", value = 0.9 }", p));
  EXPECT_NE(p.find(f + ":3:"), std::string::npos) << p;
  EXPECT_NE(p.find("'metric' in [sweep] target: must be one of \"top1\", \"top5\", \"val_loss\", got \"top2\""),
            std::string::npos)
      << p;
  EXPECT_FALSE(load(t, "target = { metric = \"top1\", value = \"high\" }", p));
  EXPECT_NE(p.find("'value' in [sweep] target: expected float, got string \"high\""), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target = { metric = \"top1\", value = 90 }", p));
  EXPECT_NE(p.find("'value' in [sweep] target: top1 is a fraction in (0, 1] (top-1 of 90 % is 0.9), got 90"),
            std::string::npos)
      << p;
  EXPECT_FALSE(load(t, "target = { metric = \"val_loss\", value = -1 }", p));
  EXPECT_NE(p.find("'value' in [sweep] target: must be > 0, got -1"), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target = { metric = \"val_loss\", value = inf }", p));
  EXPECT_NE(p.find("must be a finite number, got inf"), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target = { metric = \"top1\" }", p));
  EXPECT_NE(p.find("[sweep] target needs 'value'"), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target = { metric = \"top1\", valu = 0.5, value = 0.5 }", p));
  EXPECT_NE(p.find("unknown key 'valu' in [sweep] target (did you mean 'value'?)"), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target = 0.9", p));
  EXPECT_NE(p.find(f + ":3:1: error: 'target' in [sweep]: expected a table"), std::string::npos) << p;
  EXPECT_FALSE(load(t, "target_metric = \"top1\"", p));
  EXPECT_NE(p.find("unknown key 'target_metric' in [sweep]"), std::string::npos) << p;
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

TEST(SweepTarget, StepsClipsAndTimeFromTheFirstEvaluationThatReachesIt) {
  TempDir t("vexp_target_test");
  write(t.path() / "metrics.jsonl",
        "{\"type\":\"step\",\"epoch\":1,\"step\":6,\"global_step\":6,\"loss\":1.3}\n"
        "{\"type\":\"eval\",\"epoch\":1,\"global_step\":6,\"top1\":0.4,\"top5\":1,\"val_loss\":1.30,"
        "\"clips_trained\":96,\"train_s\":1.5,\"wall_s\":2.0}\n"
        "{\"type\":\"eval\",\"epoch\":2,\"global_step\":12,\"top1\":null,\"top5\":1,\"val_loss\":1.10,"
        "\"clips_trained\":192,\"train_s\":3.0,\"wall_s\":4.0}\n"
        "{\"type\":\"eval\",\"epoch\":3,\"global_step\":18,\"top1\":0.6,\"top5\":1,\"val_loss\":0.90,"
        "\"clips_trained\":288,\"train_s\":4.5,\"wall_s\":6.25}\n"
        "{\"type\":\"eval\",\"epoch\":4,\"global_step\":24,\"top1\":0.7,\"top5\":1,\"val_loss\":0.80,"
        "\"clips_trained\":384,\"train_s\":6.0,\"wall_s\":8.0}\n");
  Target top1{"top1", 0.5, {}};
  ToTarget r = to_target(t.path(), top1, 16);
  ASSERT_TRUE(r.reached());
  EXPECT_EQ(r.epoch, 3);
  EXPECT_EQ(r.steps, 18);
  EXPECT_EQ(r.clips, 288);
  EXPECT_EQ(r.wall_s, 6.25);
  EXPECT_EQ(r.train_s, 4.5);
  // Lower is better for the loss: reached at epoch 2.
  r = to_target(t.path(), Target{"val_loss", 1.1, {}}, 16);
  EXPECT_EQ(r.steps, 12);
  EXPECT_EQ(r.wall_s, 4.0);
  // Never reached: nothing, not 0.
  r = to_target(t.path(), Target{"top1", 0.9, {}}, 16);
  EXPECT_FALSE(r.reached());
  EXPECT_FALSE(r.steps || r.clips || r.wall_s || r.train_s || r.epoch);
  // No metrics.jsonl (a trial that failed before its first step): not reached.
  EXPECT_FALSE(to_target(t.path() / "none", top1, 16).reached());
  // Records of an earlier vexp: the clips from the planned global batch, no times.
  write(t.path() / "old" / "metrics.jsonl",
        "{\"type\":\"eval\",\"epoch\":1,\"global_step\":3,\"top1\":0.75,\"top5\":1,\"val_loss\":1}\n");
  r = to_target(t.path() / "old", top1, 16);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.clips, 48);
  EXPECT_FALSE(r.wall_s || r.train_s);
}

TEST(SweepTarget, AStoreOfThePreviousVexpGainsTheColumns) {
  TempDir t("vexp_target_test");
  const std::string db_path = (t.path() / "sweep.db").string();
  {
    // The schema of the previous vexp: figures, attempt_s and the Slurm columns, no target.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    const char* previous =
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE trials(id INTEGER PRIMARY KEY, params TEXT NOT NULL, overrides TEXT NOT NULL,"
        " global_batch INTEGER, lr REAL, recipe_hash TEXT, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
        " exit_code INTEGER, metric REAL, metrics TEXT, started_at REAL, finished_at REAL, attempt_s REAL,"
        " run_dir TEXT NOT NULL, message TEXT, figures TEXT, job TEXT, job_state TEXT);"
        "INSERT INTO meta(key, value) VALUES('metric', 'top1');"
        "INSERT INTO trials(id, params, overrides, global_batch, lr, status, attempt_s, run_dir, metrics, figures)"
        " VALUES(1, '{}', '[]', 16, 0.02, 'done', 12.5, '/x', '{\"wall_s\": 11.0}', '{}'),"
        "       (2, '{}', '[]', 32, 0.04, 'pending', 0, '/y', '{}', '{}');";
    ASSERT_EQ(sqlite3_exec(db, previous, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  // Read-only (a received copy): read as never computed, nothing written.
  fs::permissions(db_path, fs::perms::owner_read, fs::perm_options::replace);
  if (::access(db_path.c_str(), W_OK) != 0) {  // (root writes whatever the mode says)
    Store ro;
    ro.open(db_path, false);
    const auto rows = ro.rows();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_TRUE(rows[0].target.empty());
    EXPECT_EQ(rows[0].attempt_s, 12.5);
  }
  fs::permissions(db_path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  Store st;
  st.open(db_path, false);
  auto rows = st.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].target.empty());
  EXPECT_FALSE(rows[0].to_target.reached());
  EXPECT_EQ(rows[0].attempt_s, 12.5);  // the rest as it was
  EXPECT_EQ(rows[0].metrics["wall_s"], 11.0);
  // Its trials' folders measured against a target: the figures, and "not reached".
  write(t.path() / "trials" / "001" / "metrics.jsonl",
        "{\"type\":\"eval\",\"epoch\":1,\"global_step\":3,\"top1\":0.75,\"top5\":1,\"val_loss\":1,"
        "\"clips_trained\":48,\"train_s\":0.5,\"wall_s\":1.5}\n");
  Definition def;
  def.target = Target{"top1", 0.5, {}};
  EXPECT_EQ(refresh_to_target(st, def), 1u);  // the ended trial only
  rows = st.rows();
  EXPECT_EQ(rows[0].target, "top1 >= 0.5");
  EXPECT_EQ(rows[0].to_target.steps, 3);
  EXPECT_EQ(rows[0].to_target.clips, 48);
  EXPECT_EQ(rows[0].to_target.wall_s, 1.5);
  EXPECT_EQ(rows[0].to_target.train_s, 0.5);
  EXPECT_EQ(rows[0].to_target.epoch, 1);
  EXPECT_TRUE(rows[1].target.empty());
  EXPECT_EQ(refresh_to_target(st, def), 0u);  // nothing new
  def.target = Target{"top1", 0.8, {}};
  EXPECT_EQ(refresh_to_target(st, def), 1u);
  rows = st.rows();
  EXPECT_EQ(rows[0].target, "top1 >= 0.8");
  EXPECT_FALSE(rows[0].to_target.reached());
  // The columns themselves: NULL, never 0.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT steps_to_target, clips_to_target, time_to_target_s, target FROM trials "
                                     "WHERE id=1", -1, &q, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(sqlite3_column_type(q, c), SQLITE_NULL) << c;
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(q, 3)), "top1 >= 0.8");
    sqlite3_finalize(q);
    sqlite3_close(db);
  }
  // A new attempt clears them; a sweep without a target clears them too.
  st.mark_running(1, (t.path() / "trials" / "001").string());
  EXPECT_TRUE(st.rows()[0].target.empty());
  st.set_to_target(1, "top1 >= 0.5", to_target(t.path() / "trials" / "001", Target{"top1", 0.5, {}}, 16));
  EXPECT_EQ(st.rows()[0].to_target.steps, 3);
  st.finish(1, "done", 0, 0.75, nlohmann::json::object(), 1.0, "");
  def.target.reset();
  refresh_to_target(st, def);
  EXPECT_TRUE(st.rows()[0].target.empty());
}

}  // namespace
