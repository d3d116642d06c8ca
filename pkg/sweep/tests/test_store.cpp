// The store's run_dir column is a label (issue #36 item 1): a trial's folder is always
// DIR/trials/NNN of the store's own folder, whatever the column says.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include "vexp/base/files.hpp"
#include "vexp/sweep/store.hpp"

using namespace vexp::sweep;
namespace fs = std::filesystem;

TEST(SweepStore, TrialFoldersComeFromTheStoresFolderNotItsColumn) {
  vexp::base::TempDir t("vexp_store");
  const fs::path dir = t.path() / "sweep";
  fs::create_directories(dir);
  {
    Store st;
    st.open((dir / "sweep.db").string(), true);
    Trial a;
    a.id = 1;
    a.overrides = {{"optim.lr", "0.1"}};
    st.insert_trials({a}, (dir / "trials").string());
  }
  // A received store: the column names another folder, with a newline.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "sweep.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE trials SET run_dir='/home/victim\nexport X=1' WHERE id=1", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  // Opened through another name (a copy of the folder): its own trials.
  const fs::path copy = t.path() / "copy";
  fs::copy(dir, copy);
  for (const fs::path& d : {dir, copy}) {
    Store st;
    st.open((d / "sweep.db").string(), false);
    const auto rows = st.rows();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].run_dir, (fs::absolute(d) / "trials" / "001").lexically_normal().string());
    EXPECT_EQ(rows[0].stored_run_dir, "/home/victim\nexport X=1");  // kept as a label
  }
}

// 'cancelled' (vexp cancel, #36): a store of the previous vexp, whose CHECK lists the
// other statuses only, gains it with every row kept; a cancelled trial is never turned
// into another status by a driver's finish; only a pending trial, or a queued or
// running one of the cancelled job, is marked.
TEST(SweepStore, CancelledTrialsInAStoreOfThePreviousVexp) {
  vexp::base::TempDir t("vexp_store");
  const std::string db_path = (t.path() / "sweep.db").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    const char* previous =
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE trials( id INTEGER PRIMARY KEY, params TEXT NOT NULL, overrides TEXT NOT NULL,"
        " global_batch INTEGER, lr REAL, recipe_hash TEXT,"
        " status TEXT NOT NULL CHECK(status IN ('pending','running','done','failed','diverged','pruned')),"
        " attempts INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, metric REAL, metrics TEXT,"
        " started_at REAL, finished_at REAL, attempt_s REAL, run_dir TEXT NOT NULL, message TEXT, figures TEXT);"
        "INSERT INTO trials(id, params, overrides, status, run_dir) VALUES"
        " (1, '{}', '[]', 'done', '/a'), (2, '{}', '[]', 'pending', '/b'), (3, '{}', '[]', 'running', '/c'),"
        " (4, '{}', '[]', 'running', '/d');";
    ASSERT_EQ(sqlite3_exec(db, previous, nullptr, nullptr, nullptr), SQLITE_OK);
    ASSERT_NE(sqlite3_exec(db, "UPDATE trials SET status='cancelled' WHERE id=2", nullptr, nullptr, nullptr),
              SQLITE_OK);  // what the previous CHECK refuses
    sqlite3_close(db);
  }
  Store st;
  st.open(db_path, false);
  st.mark_queued(3, "/c", "12");
  st.mark_queued(4, "/d", "13");
  EXPECT_TRUE(st.mark_cancelled(2, "", "cancelled by vexp cancel before it was submitted"));
  EXPECT_TRUE(st.mark_cancelled(3, "12", "cancelled by vexp cancel (job 12, RUNNING)"));
  EXPECT_FALSE(st.mark_cancelled(1, "", "x"));    // done: stays done
  EXPECT_FALSE(st.mark_cancelled(4, "99", "x"));  // another job than the trial's
  // A driver that judged job 12's end as a failure does not undo the cancel; its own
  // cancelled outcome may complete the row.
  st.finish(3, "failed", 130, std::nullopt, nlohmann::json::object(), 1.0, "Slurm: CANCELLED");
  auto rows = st.rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].status, "done");
  EXPECT_EQ(rows[1].status, "cancelled");
  EXPECT_EQ(rows[1].message, "cancelled by vexp cancel before it was submitted");
  EXPECT_EQ(rows[2].status, "cancelled");
  EXPECT_EQ(rows[2].job, "12");
  EXPECT_EQ(rows[2].job_state, "CANCELLED");
  EXPECT_EQ(rows[3].status, "running");
  EXPECT_EQ(st.status_of(2), "cancelled");
  EXPECT_EQ(st.status_of(9), "");
  st.finish(3, "cancelled", -1, std::nullopt, nlohmann::json{{"job", "12"}}, 2.0, "cancelled by vexp cancel (t)");
  EXPECT_EQ(st.rows()[2].message, "cancelled by vexp cancel (t)");
  // A driver judging a job that failed on its own, after vexp cancel ran for another.
  st.finish(4, "failed", 1, std::nullopt, nlohmann::json::object(), 1.0, "Slurm: FAILED");
  EXPECT_EQ(st.rows()[3].status, "failed");
  EXPECT_FALSE(st.mark_cancelled(4, "12", "x"));  // failed on its own job 13: stays failed
  st.reset(2);  // --retry-cancelled
  EXPECT_EQ(st.status_of(2), "pending");
  // A new store has the status from the start.
  Store fresh;
  fresh.open((t.path() / "new.db").string(), true);
  Trial a;
  a.id = 1;
  fresh.insert_trials({a}, (t.path() / "trials").string());
  EXPECT_TRUE(fresh.mark_cancelled(1, "", "x"));
  EXPECT_EQ(fresh.status_of(1), "cancelled");
}
