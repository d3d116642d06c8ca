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
