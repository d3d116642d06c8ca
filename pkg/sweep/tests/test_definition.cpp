// The sweep file's keys that scaled the lr beside the recipe (removed: one rule for
// the lr, the recipe's optim.base_lr / base_batch / lr_scaling), and the store of an
// earlier vexp opened by this one (wall_s renamed attempt_s, figures added).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <string>

#include "vexp/base/files.hpp"
#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/store.hpp"

namespace {

using vexp::base::TempDir;

// load_definition of `text`; the diagnostics, one per line.
std::string problems(const TempDir& t, const std::string& text, bool* loaded = nullptr) {
  std::ofstream(t.path() / "base.toml") << "[run]\nepochs = 1\n";
  const std::string path = (t.path() / "s.toml").string();
  std::ofstream(path) << text;
  vexp::dsl::Diagnostics d;
  auto def = vexp::sweep::load_definition(path, d);
  if (loaded) *loaded = def.has_value();
  return d.str();
}

TEST(SweepDefinition, RemovedLrScalingKeysSayWhatToWrite) {
  TempDir t("vexp_sweep_test");
  const std::string p = (t.path() / "s.toml").string();
  bool loaded = true;
  const std::string out = problems(t,
                                   "[sweep]\nbase = \"base.toml\"\nlinear_scaling = true\nreference_batch = 64\n"
                                   "[[sweep.axis]]\nkey = \"optim.base_lr\"\ngrid = [0.01, 0.02]\n",
                                   &loaded);
  EXPECT_FALSE(loaded);
  EXPECT_NE(out.find(p + ":3:1: error: 'linear_scaling' in [sweep] was removed: a sweep scales the lr through the "
                         "recipe's own rule"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(p + ":4:1: error: 'reference_batch' in [sweep] was removed"), std::string::npos) << out;
  EXPECT_NE(out.find("\"optim.base_batch\" = N"), std::string::npos) << out;
  // One line each, and no second "unknown key" error for the same keys.
  EXPECT_EQ(out.find("unknown"), std::string::npos) << out;
}

TEST(SweepDefinition, ReferenceBatchVariableAndDerivedLrAreRefused) {
  TempDir t("vexp_sweep_test");
  const std::string p = (t.path() / "s.toml").string();
  const std::string out = problems(t,
                                   "[sweep]\nbase = \"base.toml\"\n[sweep.vars]\nreference_batch = 64\n"
                                   "[[sweep.axis]]\nkey = \"dist.world_size\"\ngrid = [1, 2]\n"
                                   "[sweep.derived]\n\"optim.lr\" = \"0.01 * ${global_batch} / ${reference_batch}\"\n");
  EXPECT_NE(out.find(p + ":4:1: error: [sweep.vars] reference_batch: the sweep's own lr scaling was removed"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(p + ":9:1: error: [sweep.derived] \"optim.lr\": a sweep does not compute the lr"),
            std::string::npos)
      << out;
}

TEST(SweepDefinition, TheRecipeRuleLoads) {
  TempDir t("vexp_sweep_test");
  bool loaded = false;
  const std::string out = problems(t,
                                   "[sweep]\nbase = \"base.toml\"\n[sweep.set]\n\"optim.base_batch\" = 64\n"
                                   "\"optim.lr_scaling\" = \"linear\"\n[[sweep.axis]]\nkey = \"optim.base_lr\"\n"
                                   "grid = [0.01, 0.02]\n",
                                   &loaded);
  EXPECT_TRUE(loaded) << out;
}

TEST(SweepStore, StoreOfAnEarlierVexpIsUpgraded) {
  TempDir t("vexp_sweep_test");
  const std::string db_path = (t.path() / "sweep.db").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
    const char* old_schema =
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE trials(id INTEGER PRIMARY KEY, params TEXT NOT NULL, overrides TEXT NOT NULL,"
        " global_batch INTEGER, lr REAL, recipe_hash TEXT, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
        " exit_code INTEGER, metric REAL, metrics TEXT, started_at REAL, finished_at REAL, wall_s REAL,"
        " run_dir TEXT NOT NULL, message TEXT);"
        "INSERT INTO trials(id, params, overrides, global_batch, lr, status, wall_s, run_dir, metrics)"
        " VALUES(1, '{}', '[]', 16, 0.02, 'done', 12.5, '/x', '{\"wall_s\": 11.0}');";
    ASSERT_EQ(sqlite3_exec(db, old_schema, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  vexp::sweep::Store st;
  st.open(db_path, false);
  const auto rows = st.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].attempt_s, 12.5);  // the sweep's measure of the attempt, under its own name
  EXPECT_TRUE(rows[0].figures.is_object() && rows[0].figures.empty());
  const auto j = vexp::sweep::row_json(rows[0]);
  EXPECT_EQ(j["wall_s"], 11.0);  // the run's own, summary.json's
  EXPECT_EQ(j["attempt_s"], 12.5);
}

}  // namespace
