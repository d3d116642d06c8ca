#include "vexp/sweep/store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include "vexp/base/attempt.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

sqlite3* DB(void* p) { return static_cast<sqlite3*>(p); }

// A failed SQLite call on `db`: CorruptDatabase when the file is damaged.
[[noreturn]] void fail(sqlite3* db, const std::string& message) {
  const int code = sqlite3_errcode(db) & 0xff;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) throw CorruptDatabase(message);
  throw Error(message);
}

struct Stmt {
  sqlite3_stmt* st = nullptr;
  sqlite3* db;
  Stmt(sqlite3* d, const char* sql) : db(d) {
    if (sqlite3_prepare_v2(d, sql, -1, &st, nullptr) != SQLITE_OK) fail(d, std::string("sweep.db: ") + sqlite3_errmsg(d));
  }
  ~Stmt() { sqlite3_finalize(st); }
  Stmt& text(int i, const std::string& s) { sqlite3_bind_text(st, i, s.c_str(), -1, SQLITE_TRANSIENT); return *this; }
  Stmt& i64(int i, int64_t v) { sqlite3_bind_int64(st, i, v); return *this; }
  Stmt& f64(int i, double v) { sqlite3_bind_double(st, i, v); return *this; }
  Stmt& null(int i) { sqlite3_bind_null(st, i); return *this; }
  bool step() {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db, std::string("sweep.db: ") + sqlite3_errmsg(db));
  }
  std::string col_text(int i) {
    auto* p = sqlite3_column_text(st, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
};

// The to-target columns, in the order rows() reads them (a store of an earlier vexp gains them).
constexpr const char* kTargetCols =
    "steps_to_target, clips_to_target, time_to_target_s, train_s_to_target, epoch_to_target, target";
constexpr const char* kTargetColsNull = "NULL, NULL, NULL, NULL, NULL, NULL";
constexpr const char* kTargetColsSchema =
    "steps_to_target INTEGER, clips_to_target INTEGER, time_to_target_s REAL, train_s_to_target REAL,"
    " epoch_to_target INTEGER, target TEXT";
// What a new attempt (or a trial put back to pending) clears.
constexpr const char* kTargetClear =
    "steps_to_target=NULL, clips_to_target=NULL, time_to_target_s=NULL, train_s_to_target=NULL,"
    " epoch_to_target=NULL, target=NULL";

json parse_or(const std::string& s, json dflt) {
  try {
    return s.empty() ? dflt : json::parse(s);
  } catch (const std::exception&) {
    return dflt;
  }
}

}  // namespace

Store::~Store() { close(); }

void Store::close() {
  if (db_) sqlite3_close(DB(db_));
  db_ = nullptr;
}

void Store::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(DB(db_), sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    fail(DB(db_), "sweep.db: " + m);
  }
}

namespace {
// A change that upgrades a store of an earlier vexp: false when the store cannot be
// written (a copy received read-only), which is then read as it is. A damaged store
// stays an error.
bool writable(const std::function<void()>& change) {
  const auto changed = base::attempt<Error>(change);
  if (changed.is<CorruptDatabase>()) changed.rethrow();
  return static_cast<bool>(changed);
}
}  // namespace

void Store::in_transaction(const std::function<void()>& body) const {
  exec("BEGIN IMMEDIATE");
  try {
    body();
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

void Store::open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw Error("cannot open '" + path + "': " + m);
  }
  db_ = db;
  trials_dir_ = (fs::absolute(fs::path(path)).lexically_normal().parent_path() / "trials").string();
  sqlite3_busy_timeout(db, 5000);
  exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  {
    // Every page, not only those the first queries touch (a few KiB for a sweep).
    Stmt q(db, "PRAGMA quick_check");
    std::string problem;
    while (q.step())
      if (problem.empty() && q.col_text(0) != "ok") problem = q.col_text(0);
    if (!problem.empty()) throw CorruptDatabase("sweep.db: " + problem);
  }
  if (!create) {
    {
      // (finalized before upgrade(): a statement still open would lock the table it rebuilds)
      Stmt q(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('meta','trials')");
      q.step();
      if (sqlite3_column_int(q.st, 0) != 2) throw Error("'" + path + "' is not a vexp sweep database");
    }
    upgrade();
    return;
  }
  exec(
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS trials("
      " id INTEGER PRIMARY KEY, params TEXT NOT NULL, overrides TEXT NOT NULL,"
      " global_batch INTEGER, lr REAL, recipe_hash TEXT,"
      " status TEXT NOT NULL CHECK(status IN ('pending','running','done','failed','diverged','pruned','cancelled')),"
      " attempts INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, metric REAL, metrics TEXT,"
      " started_at REAL, finished_at REAL, attempt_s REAL, run_dir TEXT NOT NULL, message TEXT, figures TEXT,"
      " " + std::string(kTargetColsSchema) + ");");
  upgrade();
}

void Store::upgrade() {
  // A store of an earlier vexp: `wall_s` was the attempt's time as the sweep measured
  // it (now `attempt_s`: wall_s is the run's own, summary.json's), and the trained
  // figures were not kept.
  std::map<std::string, bool> has;
  {
    Stmt q(DB(db_), "SELECT name FROM pragma_table_info('trials')");
    while (q.step()) has[q.col_text(0)] = true;
  }
  // A store that cannot be written (a copy received read-only) is still read: the
  // old column under the new name, no figures.
  attempt_col_ = "attempt_s";
  figures_col_ = "figures";
  if (has.count("wall_s") && !has.count("attempt_s") &&
      !writable([&] { exec("ALTER TABLE trials RENAME COLUMN wall_s TO attempt_s"); }))
    attempt_col_ = "wall_s";
  if (!has.count("figures") && !writable([&] { exec("ALTER TABLE trials ADD COLUMN figures TEXT"); }))
    figures_col_ = "NULL";
  // The Slurm job of a cluster trial (vexp sweep --cluster).
  job_cols_ = "job, job_state";
  if (!has.count("job") &&
      !writable([&] { exec("ALTER TABLE trials ADD COLUMN job TEXT; ALTER TABLE trials ADD COLUMN job_state TEXT"); }))
    job_cols_ = "NULL, NULL";
  // 'cancelled' (a trial whose job `vexp cancel` cancelled) among the statuses: the
  // table of an earlier vexp, whose CHECK lists the others only, is copied into one
  // whose CHECK has it (SQLite cannot alter a CHECK). A store that cannot be written
  // is read as it is (no trial of it can be cancelled then).
  auto trials_sql = [&] {
    Stmt q(DB(db_), "SELECT sql FROM sqlite_master WHERE type='table' AND name='trials'");
    return q.step() ? q.col_text(0) : std::string();
  };
  const std::string check = "'diverged','pruned')", head = "CREATE TABLE trials(";
  auto lacks_cancelled = [&](const std::string& sql) {
    return sql.find(check) != std::string::npos && sql.find("'cancelled'") == std::string::npos &&
           sql.rfind(head, 0) == 0;
  };
  if (lacks_cancelled(trials_sql())) {
    writable([&] {
      in_transaction([&] {
        std::string sql = trials_sql();  // again, inside the transaction: another process may have done it
        if (lacks_cancelled(sql)) {
          sql.replace(sql.find(check), check.size(), "'diverged','pruned','cancelled')");
          sql.replace(0, head.size(), "CREATE TABLE trials_upgrade(");
          exec(sql);
          exec("INSERT INTO trials_upgrade SELECT * FROM trials; DROP TABLE trials;"
               " ALTER TABLE trials_upgrade RENAME TO trials");
        }
      });
    });
  }
  // The steps, clips and time to the sweep's target ([sweep] target): NULL for the
  // trials of an earlier vexp until a `vexp sweep` with a target computes them.
  target_cols_ = kTargetCols;
  if (!has.count("target")) {
    const bool done = writable([&] {
      in_transaction([&] {
        for (const char* col : {"steps_to_target INTEGER", "clips_to_target INTEGER", "time_to_target_s REAL",
                                "train_s_to_target REAL", "epoch_to_target INTEGER", "target TEXT"}) {
          const std::string name = std::string(col).substr(0, std::string(col).find(' '));
          if (!has.count(name)) exec("ALTER TABLE trials ADD COLUMN " + std::string(col));
        }
      });
    });
    if (!done) target_cols_ = kTargetColsNull;  // read-only: read as never computed
  }
}

bool Store::has_meta() const {
  Stmt q(DB(db_), "SELECT count(*) FROM meta");
  q.step();
  return sqlite3_column_int64(q.st, 0) > 0;
}

std::string Store::meta(const std::string& key) const {
  Stmt q(DB(db_), "SELECT value FROM meta WHERE key=?");
  q.text(1, key);
  return q.step() ? q.col_text(0) : "";
}

void Store::set_meta(const std::map<std::string, std::string>& kv) {
  in_transaction([&] {
    for (const auto& [k, v] : kv) {
      Stmt q(DB(db_), "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
      q.text(1, k).text(2, v).step();
    }
  });
}

void Store::insert_trials(const std::vector<Trial>& trials, const std::string& trials_dir) {
  in_transaction([&] {
    for (const auto& t : trials) {
      json ov = json::array();  // ordered: the recipe hash depends on the order overrides are applied
      for (const auto& o : t.overrides) ov.push_back({o.path, o.text});
      Stmt q(DB(db_),
             "INSERT OR IGNORE INTO trials(id, params, overrides, global_batch, lr, recipe_hash, status, run_dir, figures)"
             " VALUES(?, ?, ?, ?, ?, ?, 'pending', ?, ?)");
      q.i64(1, t.id).text(2, t.params.dump()).text(3, ov.dump()).i64(4, t.figures.global_batch).f64(5, t.figures.lr)
          .text(6, t.recipe_hash).text(7, (fs::path(trials_dir) / trial_name(t.id)).string())
          .text(8, t.figures.to_json().dump()).step();
    }
  });
}

std::vector<Row> Store::rows() const {
  const std::string sql =
      "SELECT id, params, overrides, global_batch, lr, recipe_hash, status, attempts, exit_code, metric, metrics,"
      " started_at, finished_at, " + attempt_col_ + ", run_dir, message, " + figures_col_ + ", " + job_cols_ + ", " +
      target_cols_ + " FROM trials ORDER BY id";
  Stmt q(DB(db_), sql.c_str());
  std::vector<Row> out;
  while (q.step()) {
    Row r;
    r.id = sqlite3_column_int64(q.st, 0);
    r.params = parse_or(q.col_text(1), json::object());
    if (!r.params.is_object()) r.params = json::object();
    r.overrides = parse_or(q.col_text(2), json::array());
    // Each override is ["key", "value"]: a trial run with other settings would be another trial.
    bool pairs = r.overrides.is_array();
    for (const auto& p : r.overrides)
      pairs = pairs && p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_string();
    if (!pairs)
      throw Error("sweep.db: trial " + std::to_string(r.id) +
                               ": column 'overrides' is not a list of [\"key\", \"value\"] strings");
    r.global_batch = sqlite3_column_int64(q.st, 3);
    r.lr = sqlite3_column_double(q.st, 4);
    r.recipe_hash = q.col_text(5);
    r.status = q.col_text(6);
    r.attempts = sqlite3_column_int64(q.st, 7);
    r.exit_code = sqlite3_column_type(q.st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(q.st, 8);
    if (sqlite3_column_type(q.st, 9) != SQLITE_NULL) r.metric = sqlite3_column_double(q.st, 9);
    r.metrics = parse_or(q.col_text(10), json::object());
    if (!r.metrics.is_object()) r.metrics = json::object();
    r.started_at = sqlite3_column_double(q.st, 11);
    r.finished_at = sqlite3_column_double(q.st, 12);
    r.attempt_s = sqlite3_column_double(q.st, 13);
    // The column is a label (a received or copied sweep.db may name any folder, with
    // any characters): the trial's folder is always DIR/trials/NNN of this store.
    r.run_dir = (fs::path(trials_dir_) / trial_name(r.id)).string();
    r.stored_run_dir = q.col_text(14);
    r.message = q.col_text(15);
    r.figures = parse_or(q.col_text(16), json::object());
    if (!r.figures.is_object()) r.figures = json::object();
    r.job = q.col_text(17);
    r.job_state = q.col_text(18);
    auto opt_i64 = [&](int c) {
      return sqlite3_column_type(q.st, c) == SQLITE_NULL ? std::optional<int64_t>()
                                                         : std::optional<int64_t>(sqlite3_column_int64(q.st, c));
    };
    auto opt_f64 = [&](int c) {
      return sqlite3_column_type(q.st, c) == SQLITE_NULL ? std::optional<double>()
                                                         : std::optional<double>(sqlite3_column_double(q.st, c));
    };
    r.target = q.col_text(24);
    if (!r.target.empty()) {
      r.to_target.steps = opt_i64(19);
      r.to_target.clips = opt_i64(20);
      r.to_target.wall_s = opt_f64(21);
      r.to_target.train_s = opt_f64(22);
      r.to_target.epoch = opt_i64(23);
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// A new attempt of trial `id` in `run_dir`: running, its last outcome cleared, started
// at `started` (NULL: not yet), and the columns `also` sets ("job='', ").
void begin_attempt(sqlite3* db, int64_t id, const std::string& run_dir, std::optional<double> started,
                   const std::string& also) {
  const std::string sql =
      "UPDATE trials SET status='running', attempts=attempts+1, started_at=?, finished_at=NULL, run_dir=?,"
      " exit_code=NULL, message=NULL, " + also + std::string(kTargetClear) + " WHERE id=?";
  Stmt q(db, sql.c_str());
  if (started) q.f64(1, *started);
  else q.null(1);
  q.text(2, run_dir).i64(3, id).step();  // a single statement is its own transaction
}

}  // namespace

void Store::mark_running(int64_t id, const std::string& run_dir) { begin_attempt(DB(db_), id, run_dir, now_s(), ""); }

void Store::finish(int64_t id, const std::string& status, int exit_code, std::optional<double> metric,
                   const json& metrics, double attempt_s, const std::string& message) {
  // A trial `vexp cancel` marked cancelled stays so (a driver may judge its ended job
  // before the job's record says who cancelled it).
  Stmt q(DB(db_),
         "UPDATE trials SET status=?1, exit_code=?2, metric=?3, metrics=?4, finished_at=?5, attempt_s=?6, message=?7"
         " WHERE id=?8 AND (status != 'cancelled' OR ?1 = 'cancelled')");
  q.text(1, status).i64(2, exit_code);
  if (metric) q.f64(3, *metric);
  else q.null(3);
  q.text(4, metrics.dump()).f64(5, now_s()).f64(6, attempt_s).text(7, message).i64(8, id).step();
}

bool Store::mark_cancelled(int64_t id, const std::string& job, const std::string& message) {
  // Pending (never submitted); or queued or running with this job (or being submitted,
  // its job found in its folder's record); or judged failed a moment ago by a driver
  // that saw this job end before `vexp cancel` recorded why.
  Stmt q(DB(db_),
         "UPDATE trials SET status='cancelled', finished_at=?1, message=?2,"
         " job_state=CASE WHEN ?3 = '' THEN job_state ELSE 'CANCELLED' END,"
         " job=CASE WHEN ?3 = '' THEN job ELSE ?3 END"
         " WHERE id=?4 AND (status='pending' OR (?3 != '' AND ((status='running' AND (job=?3 OR job='' OR job IS NULL))"
         " OR (status='failed' AND job=?3))))");
  q.f64(1, now_s()).text(2, message).text(3, job).i64(4, id).step();
  return sqlite3_changes(DB(db_)) > 0;
}

std::string Store::status_of(int64_t id) const {
  Stmt q(DB(db_), "SELECT status FROM trials WHERE id=?");
  q.i64(1, id);
  return q.step() ? q.col_text(0) : "";
}

void Store::restore(const Row& r) {
  Stmt q(DB(db_),
         "UPDATE trials SET status=?, attempts=?, exit_code=?, metric=?, metrics=?, started_at=?, finished_at=?,"
         " attempt_s=?, run_dir=?, message=? WHERE id=?");
  q.text(1, r.status).i64(2, r.attempts);
  if (r.exit_code >= 0) q.i64(3, r.exit_code);
  else q.null(3);
  if (r.metric) q.f64(4, *r.metric);
  else q.null(4);
  q.text(5, r.metrics.dump());
  if (r.started_at > 0) q.f64(6, r.started_at);
  else q.null(6);
  if (r.finished_at > 0) q.f64(7, r.finished_at);
  else q.null(7);
  q.f64(8, r.attempt_s).text(9, r.run_dir).text(10, r.message).i64(11, r.id).step();
}

std::string move_aside(const std::string& db_path) {
  std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", std::localtime(&t));
  std::string aside = db_path + ".corrupt-" + when;
  for (int k = 2; fs::exists(aside); ++k) aside = db_path + ".corrupt-" + when + "." + std::to_string(k);
  fs::rename(db_path, aside);
  for (const char* side : {"-wal", "-shm"}) {
    std::error_code ec;
    if (fs::exists(db_path + side, ec)) fs::rename(db_path + side, aside + side, ec);
  }
  return aside;
}

void Store::mark_submitting(int64_t id, const std::string& run_dir) {
  begin_attempt(DB(db_), id, run_dir, std::nullopt, "job='', job_state='submitting', ");
}

void Store::mark_queued(int64_t id, const std::string& run_dir, const std::string& job) {
  Stmt q(DB(db_), "UPDATE trials SET status='running', run_dir=?, job=?, job_state='PENDING' WHERE id=?");
  q.text(1, run_dir).text(2, job).i64(3, id).step();
}

void Store::set_job_state(int64_t id, const std::string& state, bool started) {
  if (started) {
    Stmt q(DB(db_), "UPDATE trials SET job_state=?, started_at=? WHERE id=?");
    q.text(1, state).f64(2, now_s()).i64(3, id).step();
  } else {
    Stmt q(DB(db_), "UPDATE trials SET job_state=? WHERE id=?");
    q.text(1, state).i64(2, id).step();
  }
}

void Store::reset(int64_t id) {
  const std::string sql = "UPDATE trials SET status='pending', " + std::string(kTargetClear) + " WHERE id=?";
  Stmt q(DB(db_), sql.c_str());
  q.i64(1, id).step();
}

void Store::set_to_target(int64_t id, const std::string& target, const ToTarget& t) {
  Stmt q(DB(db_),
         "UPDATE trials SET steps_to_target=?, clips_to_target=?, time_to_target_s=?, train_s_to_target=?,"
         " epoch_to_target=?, target=? WHERE id=?");
  const bool set = !target.empty();
  if (set && t.steps) q.i64(1, *t.steps);
  else q.null(1);
  if (set && t.clips) q.i64(2, *t.clips);
  else q.null(2);
  if (set && t.wall_s && std::isfinite(*t.wall_s)) q.f64(3, *t.wall_s);
  else q.null(3);
  if (set && t.train_s && std::isfinite(*t.train_s)) q.f64(4, *t.train_s);
  else q.null(4);
  if (set && t.epoch) q.i64(5, *t.epoch);
  else q.null(5);
  if (set) q.text(6, target);
  else q.null(6);
  q.i64(7, id).step();
}

std::vector<dsl::Override> overrides_of(const Row& r) {
  std::vector<dsl::Override> ov;
  for (const auto& p : r.overrides) ov.push_back({p[0].get<std::string>(), p[1].get<std::string>()});
  return ov;
}

json row_json(const Row& r) {
  json j{{"id", r.id},           {"status", r.status},     {"params", r.params},   {"global_batch", r.global_batch},
         {"lr", r.lr},           {"figures", r.figures},   {"attempts", r.attempts}, {"run_dir", r.run_dir},
         {"attempt_s", r.attempt_s}, {"metrics", r.metrics}, {"message", r.message}, {"recipe_hash", r.recipe_hash}};
  if (!r.job.empty() || !r.job_state.empty()) {
    j["job"] = r.job;
    j["job_state"] = r.job_state;
  }
  // wall_s: the run's own wall-clock seconds over all its attempts (summary.json), as in the table and --csv.
  j["wall_s"] = r.metrics.contains("wall_s") && r.metrics["wall_s"].is_number() ? r.metrics["wall_s"] : json(nullptr);
  j["metric"] = r.metric ? json(*r.metric) : json(nullptr);
  j["exit_code"] = r.exit_code >= 0 ? json(r.exit_code) : json(nullptr);
  return j;
}

}  // namespace vexp::sweep
