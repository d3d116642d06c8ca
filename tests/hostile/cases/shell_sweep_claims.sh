# What a sweep's pictures may claim (docs/reports.md, "What a sweep report claims"):
# every trial at chance used to get a framed "best" cell and a best-lr path; a sweep
# whose trials all failed got a spurious "gnuplot failed" warning and no PNGs.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
pngs() {
  for p in heatmap curves throughput linear_scaling; do
    head -c 8 "$1/$p.png" 2>/dev/null | od -An -c | grep -q "P   N   G" || fail "$2: no $p.png"
  done
}
# 1. Every trial fails (a global batch larger than the 48 training clips).
cat >fail.toml <<EOF
[sweep]
name = "allfail"
base = "$tmp/tiny.toml"
[[sweep.axis]]
key = "dist.batch_per_gpu"
grid = [64, 128]
EOF
expect_rc 1 -- "$vexp" sweep fail.toml --out f
no_crash
expect_out "2 trial(s) failed"
expect_no_out "gnuplot failed"
expect_out "plots: 4 PNG files"
pngs f/report "all failed"
grep -q "no finished trial" f/report/report.gp || fail "the plots do not say no trial finished"
grep -q "set object 1 rect" f/report/report.gp && fail "a best cell is framed with no finished trial"
# 2. Two lrs x two seeds; their top-1 then set to chance-level values (4 classes:
# chance 0.25), then to a clear winner.
cat >seeds.toml <<EOF
[sweep]
name = "seeds"
base = "$tmp/tiny.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
[[sweep.axis]]
key = "run.seed"
grid = [0, 1]
EOF
expect_rc 0 -- "$vexp" sweep seeds.toml --out s --no-report
set_top1() {
  $PY - s/sweep.db "$@" <<'PY' || fail "could not edit sweep.db"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
values = [float(v) for v in sys.argv[2:]]
for (tid, metrics), v in zip(db.execute("SELECT id, metrics FROM trials ORDER BY id").fetchall(), values):
    m = json.loads(metrics)
    assert m.get("classes") == 4, m   # recorded by the trial (summary.json)
    m["top1"] = v
    db.execute("UPDATE trials SET metric=?, metrics=? WHERE id=?", (v, json.dumps(m), tid))
db.commit()
PY
}
# lr 0.05: 0.25, 0.3125; lr 0.1: 0.25, 0.1875 (trials are ordered lr-major).
set_top1 0.25 0.3125 0.25 0.1875
expect_rc 0 -- "$vexp" report s --png png --out r.html
no_crash
pngs png "at chance"
grep -q "chance 0.25 (4 classes)" png/report.gp || fail "the heatmap does not say where chance is"
grep -qF "no best cell: the best mean 0.2812 is within the seeds'' spread (0.0442) of chance (0.25)" png/report.gp || fail "no reason for naming no best"
grep -q "set object 1 rect" png/report.gp && fail "a best cell is framed although every trial sits at chance"
grep -q "linear rule" png/report.gp && fail "a best-lr path is drawn although every trial sits at chance"
grep -q "No best cell: the best mean 0.2812 is within the seeds' spread (0.0442) of chance (0.25)" r.html ||
  fail "the HTML report does not say why no cell is best"
# A clear winner: named.
set_top1 0.25 0.26 0.90 0.92
expect_rc 0 -- "$vexp" report s --png png2 --out r2.html
grep -q "set object 1 rect" png2/report.gp || fail "a clear winner is not framed"
grep -q "Best cell: global batch <b>8</b>, lr <b>0.1</b>" r2.html || fail "the HTML report does not name the clear winner"
exit 0
