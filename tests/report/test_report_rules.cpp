#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "vexp/report/gnuplot.hpp"
#include "vexp/report/sweep_grid.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/sweep/store.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace {

namespace fs = std::filesystem;
using namespace vexp::report;

// Names that would run `touch VICTIM` if gnuplot read them as code: a quote that
// closes the string, backquotes (command substitution), a newline that starts a
// shell line (!cmd), a macro, an ESC sequence.
std::vector<std::string> hostile_names(const fs::path& victim) {
  const std::string v = victim.string();
  return {"x'; system('touch " + v + "'); '",
          "a`touch " + v + "`b",
          "line\n!touch " + v + "\nsystem('touch " + v + "')",
          "q\r!touch " + v,
          "m@ARG0 \x1b]0;title\x07\x1b[2J",
          "back\\slash \"dq\" \\"};
}

TEST(GnuplotQuoting, SingleQuotedWithControlsEscaped) {
  EXPECT_EQ(gp_string("plain"), "'plain'");
  EXPECT_EQ(gp_string("it's"), "'it''s'");
  EXPECT_EQ(gp_string("a\nb\x1b[2J"), "'a\\nb\\e[2J'");
  const std::string q = gp_string(std::string(1000, 'x'), 50);
  EXPECT_LT(q.size(), 100u);
  EXPECT_FALSE(vexp::base::has_control(gp_string("\x01\x7f\xc2\x9b\xff")));
  EXPECT_EQ(gp_lines({"one", "it's"}), "'one'.\"\\n\".'it''s'");
}

TEST(GnuplotQuoting, DataStringsStayOneField) {
  EXPECT_EQ(gp_data_string("b8 done"), "\"b8 done\"");
  EXPECT_EQ(gp_data_string("a\"b\\c"), "\"a'b\\\\c\"");
  EXPECT_EQ(gp_data_string("x\ny"), "\"x\\\\ny\"");
}

// The installed gnuplot itself: every hostile name, as a title, a label, a data
// column and a multi-line title, is shown as text and runs nothing.
TEST(GnuplotQuoting, TheRealGnuplotRunsNothing) {
  if (!gnuplot_program()) GTEST_SKIP() << "gnuplot is not installed";
  vexp::base::TempDir dir("vexp_gp_test");
  const fs::path victim = dir.path() / "VICTIM";
  const auto names = hostile_names(victim);
  std::ostringstream data, gp;
  for (size_t i = 0; i < names.size(); ++i) data << i << " " << i << " " << gp_data_string(names[i]) << "\n";
  vexp::base::write_file_atomic((dir.path() / "labels.dat").string(), data.str());
  gp << "set terminal pngcairo noenhanced size 300,200\nset output ARG1.'/out.png'\n";
  for (const auto& n : names) gp << "print " << gp_string(n) << "\nset title " << gp_lines({n, n}) << "\n";
  gp << "set table ARG1.'/table.txt'\nplot ARG1.'/labels.dat' using 1:2:3 with labels title " << gp_string(names[0])
     << "\nunset table\n";
  const std::string script = (dir.path() / "t.gp").string(), log = (dir.path() / "log.txt").string();
  vexp::base::write_file_atomic(script, gp.str());
  EXPECT_EQ(run_gnuplot(script, {dir.path().string()}, log), "") << vexp::base::read_file_bounded(log);
  EXPECT_FALSE(fs::exists(victim)) << "gnuplot ran a command from a quoted name";
  const std::string printed = vexp::base::read_file_bounded(log);
  for (const auto& n : names) EXPECT_NE(printed.find(vexp::base::printable(n, 200)), std::string::npos) << n;
  // The data labels read back whole, one per row.
  const std::string table = vexp::base::read_file_bounded((dir.path() / "table.txt").string());
  EXPECT_NE(table.find("back\\slash 'dq' \\\""), std::string::npos) << table;
  EXPECT_NE(table.find("m@ARG0 \\e]0;title\\x07\\e[2J"), std::string::npos) << table;
  EXPECT_NE(table.find("a`touch"), std::string::npos) << table;
}

TEST(TickLabels, DistinctWhereTheValuesDiffer) {
  const std::vector<double> lrs{2.5e-4, 2.8e-4, 3e-4, 3.05e-4, 3.2e-4, 3.5e-4};
  const auto t = tick_labels(lrs);
  EXPECT_EQ(std::set<std::string>(t.begin(), t.end()).size(), lrs.size());
  EXPECT_EQ(t[2], "0.0003");
  EXPECT_EQ(t[3], "0.000305");
  EXPECT_EQ(tick_labels({0.05, 0.1}), (std::vector<std::string>{"0.05", "0.1"}));
  EXPECT_EQ(tick_labels({1000.01, 1000.02}), (std::vector<std::string>{"1000.01", "1000.02"}));
  EXPECT_EQ(tick_labels({0.1, 0.1}), (std::vector<std::string>{"0.1", "0.1"}));
}

TEST(Chance, FromTheClassCount) {
  EXPECT_DOUBLE_EQ(*chance_level("top1", 4), 0.25);
  EXPECT_DOUBLE_EQ(*chance_level("top5", 4), 1.0);
  EXPECT_DOUBLE_EQ(*chance_level("top5", 400), 5.0 / 400);
  EXPECT_DOUBLE_EQ(*chance_level("val_loss", 4), std::log(4.0));
  EXPECT_FALSE(chance_level("top1", -1));
  EXPECT_FALSE(chance_level("clips_per_s", 4));
}

TEST(StandsOut, OnlyOutsideTheSeedsSpreadAndChance) {
  // No measured spread: nothing is named.
  EXPECT_NE(stands_out(0.9, 0.1, 0.25, std::nullopt, true), "");
  // At chance, whatever the runner-up.
  EXPECT_NE(stands_out(0.27, 0.2, 0.25, 0.03, true).find("chance"), std::string::npos);
  // Within the spread of the runner-up.
  EXPECT_NE(stands_out(0.60, 0.58, 0.25, 0.03, true).find("runner-up"), std::string::npos);
  // Clear on both.
  EXPECT_EQ(stands_out(0.60, 0.50, 0.25, 0.03, true), "");
  EXPECT_EQ(stands_out(0.60, std::nullopt, std::nullopt, 0.03, true), "");
  // Lower is better (val_loss): ahead means below.
  EXPECT_EQ(stands_out(0.5, 0.9, std::log(4.0), 0.1, false), "");
  EXPECT_NE(stands_out(1.35, 1.5, std::log(4.0), 0.1, false), "");
}

vexp::sweep::Row trial(int64_t id, int64_t batch, double lr, int seed, double top1, double cpu_s = -1,
                       double wall_s = 10) {
  vexp::sweep::Row r;
  r.id = id;
  r.global_batch = batch;
  r.lr = lr;
  r.status = "done";
  r.metric = top1;
  r.params = {{"dist.batch_per_gpu", batch}, {"optim.lr", lr}, {"run.seed", seed}};
  r.metrics = {{"top1", top1}, {"classes", 4}, {"threads", 4}};
  if (cpu_s >= 0) r.metrics["cpu_s"] = cpu_s;
  r.attempt_s = wall_s;
  r.started_at = 100.0 * static_cast<double>(id);
  r.finished_at = r.started_at + wall_s;
  return r;
}

vexp::report::Opened sweep_of(const std::vector<double>& top1) {
  vexp::report::Opened o;
  o.metric = "top1";
  o.direction = "max";
  o.name = "s";
  int64_t id = 1;
  for (int64_t b : {8, 16})
    for (double lr : {0.05, 0.1})
      for (int seed : {0, 1}) {
        o.rows.push_back(trial(id, b, lr, seed, top1[static_cast<size_t>(id - 1)]));
        ++id;
      }
  return o;
}

TEST(SweepGrid, EveryTrialAtChanceNamesNoBest) {
  const Grid g = sweep_grid(sweep_of({0.25, 0.3125, 0.25, 0.1875, 0.3125, 0.25, 0.25, 0.25}));
  ASSERT_TRUE(g.chance);
  EXPECT_DOUBLE_EQ(*g.chance, 0.25);
  EXPECT_EQ(g.classes, 4);
  ASSERT_TRUE(g.noise);
  EXPECT_TRUE(g.leader);
  EXPECT_FALSE(g.best);
  for (const auto& b : g.best_per_batch) EXPECT_FALSE(b);
  EXPECT_NE(g.verdict.find("chance"), std::string::npos) << g.verdict;
}

TEST(SweepGrid, AClearWinnerIsNamed) {
  // Cell (16, 0.1) at 0.9 +- 0.01; the others near 0.5.
  const Grid g = sweep_grid(sweep_of({0.50, 0.52, 0.49, 0.51, 0.51, 0.49, 0.89, 0.91}));
  ASSERT_TRUE(g.best);
  EXPECT_EQ(g.batches[g.cells[*g.best].bi], 16);
  EXPECT_DOUBLE_EQ(g.lrs[g.cells[*g.best].li], 0.1);
  EXPECT_TRUE(g.best_per_batch[1]);
  EXPECT_FALSE(g.best_per_batch[0]) << "0.51 vs 0.50 at batch 8 is noise";
}

TEST(SweepGrid, OneSeedPerCellNamesNoBest) {
  vexp::report::Opened o;
  o.metric = "top1";
  o.direction = "max";
  o.rows = {trial(1, 8, 0.05, 0, 0.9), trial(2, 8, 0.1, 0, 0.3)};
  const Grid g = sweep_grid(o);
  EXPECT_FALSE(g.noise);
  EXPECT_FALSE(g.best);
  EXPECT_NE(g.verdict.find("unmeasured"), std::string::npos) << g.verdict;
}

TEST(SweepGrid, TheVerdictLineSaysWhatTheReportSays) {
  const vexp::report::Opened clear = sweep_of({0.50, 0.52, 0.49, 0.51, 0.51, 0.49, 0.89, 0.91});
  const std::string v = cell_verdict(clear, sweep_grid(clear));
  EXPECT_EQ(v.rfind("best cell: global batch 16, lr 0.1: top1 0.9000 \u00b1 0.0141 (mean \u00b1 sd of 2 trials); the best cell "
                    "stands out",
                    0),
            0u)
      << v;
  const vexp::report::Opened noise = sweep_of({0.25, 0.3125, 0.25, 0.1875, 0.3125, 0.25, 0.25, 0.25});
  const std::string n = cell_verdict(noise, sweep_grid(noise));
  EXPECT_EQ(n.rfind("no best cell: ", 0), 0u) << n;
  EXPECT_NE(n.find("; the leading cell: global batch"), std::string::npos) << n;
  vexp::report::Opened none;
  none.metric = "top1";
  none.direction = "max";
  EXPECT_EQ(cell_verdict(none, sweep_grid(none)), "no best cell: no finished trial");
}

// A sweep folder of the 8 trials of sweep_of (store and trial recipes), the recipe
// of trial i with seed i % 2 and the slot's 1 thread.
fs::path sweep_folder(const fs::path& dir, const std::vector<double>& top1) {
  namespace sw = vexp::sweep;
  const vexp::report::Opened o = sweep_of(top1);
  fs::create_directories(dir);
  sw::Store st;
  st.open((dir / "sweep.db").string(), true);
  st.set_meta({{"name", "s"}, {"metric", "top1"}, {"direction", "max"}});
  std::vector<sw::Trial> ts;
  for (const auto& r : o.rows) {
    sw::Trial t;
    t.id = r.id;
    t.params = r.params;
    t.figures.global_batch = r.global_batch;
    t.figures.lr = r.lr;
    ts.push_back(t);
  }
  st.insert_trials(ts, (dir / "trials").string());
  for (const auto& r : o.rows) {
    const fs::path td = dir / "trials" / sw::trial_name(r.id);
    fs::create_directories(td);
    std::ofstream(td / "resolved.toml") << "[run]\nepochs = 1\nseed = " << r.params["run.seed"].get<int>()
                                        << "\nthreads = 1\n\n[dist]\nbatch_per_gpu = " << r.global_batch
                                        << "\n\n[optim]\nlr = " << r.lr << "\n";
    st.mark_running(r.id, td.string());
    st.finish(r.id, "done", 0, *r.metric, r.metrics, 1.0, "");
  }
  return dir;
}

TEST(BestRecipe, TheBestCellsRecipeWithoutItsSeedAndThreads) {
  vexp::base::TempDir t("vexp_best");
  const fs::path dir = sweep_folder(t.path() / "clear", {0.50, 0.52, 0.49, 0.51, 0.51, 0.49, 0.89, 0.91});
  const fs::path out = t.path() / "best.toml";
  const vexp::report::BestRecipe b = vexp::report::write_best_recipe(dir.string(), out.string());
  EXPECT_TRUE(b.stands_out);
  EXPECT_EQ(b.trial, 8);  // 0.91 of the cell (16, 0.1)
  EXPECT_EQ(b.verdict.rfind("best cell: global batch 16, lr 0.1", 0), 0u) << b.verdict;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  const std::string r = text.str();
  EXPECT_EQ(r.rfind("# best cell of sweep 's': best cell: global batch 16, lr 0.1", 0), 0u) << r;
  EXPECT_NE(r.find("# parameters: {\"dist.batch_per_gpu\":16,\"optim.lr\":0.1}\n"), std::string::npos) << r;
  EXPECT_NE(r.find("left to the recipe's defaults: run.threads run.seed"), std::string::npos) << r;
  EXPECT_EQ(r.find("seed ="), std::string::npos) << r;
  EXPECT_EQ(r.find("threads ="), std::string::npos) << r;
  EXPECT_NE(r.find("batch_per_gpu = 16"), std::string::npos) << r;
  // Nothing stands out: the leading cell, said so, in the file and the verdict.
  const fs::path noisy = sweep_folder(t.path() / "noisy", {0.25, 0.3125, 0.25, 0.1875, 0.3125, 0.25, 0.25, 0.25});
  const vexp::report::BestRecipe n = vexp::report::write_best_recipe(noisy.string(), out.string());
  EXPECT_FALSE(n.stands_out);
  EXPECT_EQ(n.verdict.rfind("no best cell: ", 0), 0u) << n.verdict;
  std::ifstream in2(out);
  std::string first;
  std::getline(in2, first);
  EXPECT_EQ(first.rfind("# leading cell of sweep 's': no best cell: ", 0), 0u) << first;
}

TEST(ThroughputNote, NeverClaimsMoreThanMeasured) {
  // Three equal trials, one after the other, nothing recorded of the machine.
  std::vector<vexp::sweep::Row> rows{trial(1, 8, 0.1, 0, 0.5), trial(2, 8, 0.1, 1, 0.5), trial(3, 8, 0.1, 2, 0.5)};
  std::vector<int> alone(3, 0);
  std::string n = throughput_note(rows, alone);
  EXPECT_EQ(n.find("compare directly"), std::string::npos) << n;
  EXPECT_NE(n.find("did not record"), std::string::npos) << n;
  // They got the machine alike: comparable.
  rows = {trial(1, 8, 0.1, 0, 0.5, 38), trial(2, 8, 0.1, 1, 0.5, 39), trial(3, 8, 0.1, 2, 0.5, 37)};
  n = throughput_note(rows, alone);
  EXPECT_NE(n.find("compare directly"), std::string::npos) << n;
  EXPECT_EQ(n.find("do not"), std::string::npos) << n;
  // Alike, but on a machine with more runnable work than cores: not comparable.
  for (auto& r : rows) {
    r.metrics["load1_start"] = 17.8;
    r.metrics["load1_end"] = 18.4;
    r.metrics["cores"] = 2;
  }
  n = throughput_note(rows, alone);
  EXPECT_NE(n.find("more work than cores"), std::string::npos) << n;
  EXPECT_EQ(n.find("compare directly."), n.find("not compare directly.") + 4) << n;
  // One got half the cores' time (something else ran): not comparable.
  rows = {trial(1, 8, 0.1, 0, 0.5, 38, 10), trial(2, 8, 0.1, 1, 0.5, 39, 19), trial(3, 8, 0.1, 2, 0.5, 37, 10)};
  n = throughput_note(rows, alone);
  EXPECT_NE(n.find("do not compare directly"), std::string::npos) << n;
}

}  // namespace
