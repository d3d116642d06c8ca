#!/usr/bin/env bash
# End-to-end tests of vexp sweep / results / report and of the TensorBoard files
# of vexp run. Usage: sweep_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
bgpid=""
cleanup() { [ -n "$bgpid" ] && kill -9 "$bgpid" 2>/dev/null; }  # then setup.sh removes $tmp
source "$src/tests/support/setup.sh" sweep
# db_check DIR PYTHON: runs PYTHON with `rows` = the trials table as dicts (and `db`).
db_check() {
  $PY - "$1" "$2" <<'PY' || fail "sweep.db check failed"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/sweep.db")
db.row_factory = sqlite3.Row
rows = {r["id"]: dict(r) for r in db.execute("SELECT * FROM trials ORDER BY id")}
meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
exec(sys.argv[2])
PY
}

cd "$here"
case "$name" in
grid_and_derived)
  expect_rc 0 -- "$vexp" sweep data/sweep_tiny.toml --dry-run
  expect_out "4 trials, every recipe valid"
  expect_out "trial 001  global_batch 8      lr 0.05       --set run.epochs=1 --set run.log_every=2 --set dist.batch_per_gpu=8 --set optim.lr=0.05"
  expect_out "trial 004  global_batch 16     lr 0.1        --set run.epochs=1 --set run.log_every=2 --set dist.batch_per_gpu=16 --set optim.lr=0.1"
  # grid (2) x list (3 points of two keys), the recipe's linear lr scaling and a derived weight decay
  expect_rc 0 -- "$vexp" sweep data/sweep_derived.toml --dry-run
  expect_out "6 trials, every recipe valid"
  # batch 16 x accum 3 = 48 clips: lr = 0.1 * 48 / 256 = 0.01875 (optim.base_lr scaled); wd = max(1e-5, 1e-4/3)
  expect_out "trial 006  global_batch 48     lr 0.01875    --set optim.base_lr=0.1 --set optim.base_batch=256 --set optim.lr_scaling=\"linear\" --set dist.batch_per_gpu=16 --set dist.accum_steps=3 --set schedule.warmup_epochs=1 --set optim.weight_decay=3.333333333e-05"
  expect_out "trial 002  global_batch 16     lr 0.00625    --set optim.base_lr=0.1 --set optim.base_batch=256 --set optim.lr_scaling=\"linear\" --set dist.batch_per_gpu=8 --set dist.accum_steps=2 --set schedule.warmup_epochs=0.5 --set optim.weight_decay=5e-05"
  # random axes: 2 grid points x 3 draws, reproducible, in range, the recipe's linear scaling applied
  expect_rc 0 -- "$vexp" sweep data/sweep_random.toml --dry-run
  expect_out "6 trials, every recipe valid"
  cp "$tmp/out" "$tmp/random1"
  "$vexp" sweep data/sweep_random.toml --dry-run >"$tmp/random2" 2>&1
  cmp -s "$tmp/random1" "$tmp/random2" || fail "random sweep is not reproducible"
  $PY - "$tmp/random1" <<'PY' || fail "random axes / linear scaling wrong"
import re, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("trial ")]
assert len(lines) == 6, lines
types = set()
for l in lines:
    b = int(re.search(r"global_batch (\d+)", l).group(1))
    lr = float(re.search(r" lr ([0-9.e+-]+)", l).group(1))
    base = float(re.search(r"--set optim\.base_lr=([0-9.e+-]+)", l).group(1))
    assert 0.001 <= base <= 0.1 + 1e-9, (l, base)
    assert abs(lr - base * b / 8) <= 1e-5 * lr, (l, lr, base)   # what trains: base_lr x batch / base_batch 8
    assert "optim.lr=" not in l, l
    types.add(re.search(r"schedule\.type=\"(\w+)\"", l).group(1))
assert types <= {"cosine", "constant"}, types
assert len({re.search(r"optim\.base_lr=([0-9.e+-]+)", l).group(1) for l in lines}) == 6
PY
  # The sweep's own lr scaling is gone: an old sweep file is told what to write instead.
  printf '[sweep]\nbase = "%s/data/tiny.toml"\nlinear_scaling = true\n[[sweep.axis]]\nkey = "base_lr"\ngrid = [0.1]\n' "$here" >"$tmp/old.toml"
  expect_rc 2 -- "$vexp" sweep "$tmp/old.toml" --dry-run
  expect_out "$tmp/old.toml:3:1: error: 'linear_scaling' in [sweep] was removed: a sweep scales the lr through the recipe's own rule"
  # optim.lr over a recipe that scales optim.base_lr would not train: refused at the axis.
  printf '[sweep]\nbase = "%s/data/tiny.toml"\n[sweep.set]\n"optim.base_lr" = 0.1\n[[sweep.axis]]\nkey = "optim.lr"\ngrid = [0.1, 0.2]\n' "$here" >"$tmp/dead.toml"
  expect_rc 2 -- "$vexp" sweep "$tmp/dead.toml" --dry-run
  expect_out "trial 1: optim.lr = 0.1 is not what trains: the recipe scales the lr from optim.base_lr = 0.1"
  ;;
bad_sweep)
  expect_rc 2 -- "$vexp" sweep data/sweep_broken.toml --out "$tmp/s"
  no_crash
  expect_out "data/sweep_broken.toml:3:1: error: unknown key 'metrik' in [sweep] (did you mean 'metric'?)"
  expect_rc 2 -- "$vexp" sweep data/sweep_broken.toml --out "$tmp/s"
  [ -e "$tmp/s/sweep.db" ] && fail "an invalid sweep created sweep.db"
  # without the unknown key: every trial is validated; errors point into the sweep file
  # (written outside the source tree, which may be read-only; its base named absolutely)
  sed -e '/metrik/d' -e "s|^base = \"tiny.toml\"|base = \"$here/data/tiny.toml\"|" data/sweep_broken.toml >"$tmp/broken2.toml"
  expect_rc 2 -- "$vexp" sweep "$tmp/broken2.toml" --out "$tmp/s"
  expect_out "$tmp/broken2.toml:6:14: error: trial 2 (optim.momentum=1.5): 'momentum' in [optim]: must be in [0, 0.999999], got 1.5"
  expect_out "$tmp/broken2.toml:13:1: error: trial 1: derived 'optim.weight_decay': in expression \"\${nope} * 2\" at character 1: unknown variable 'nope'"
  expect_out "no trial was started"
  [ -e "$tmp/s/sweep.db" ] && fail "an invalid sweep created sweep.db"
  expect_rc 2 -- "$vexp" sweep does_not_exist.toml
  expect_out "does_not_exist.toml"
  no_crash
  ;;
global_batch_overflow)
  # A trial whose global batch does not fit in 64 bits is that trial's error, not a
  # global batch of 0 (and a linear-scaled lr of 0).
  expect_rc 2 -- "$vexp" sweep data/sweep_overflow.toml --dry-run
  no_crash
  expect_out "data/sweep_overflow.toml: error: trial 2: the global batch (dist.world_size x batch_per_gpu x accum_steps) does not fit in 64 bits"
  expect_out "1 error; no trial was started"
  ;;
definition_keys)
  # Each table of the sweep file is checked against its dsl::Schema: every problem at
  # the value that has it, unknown keys with a suggestion (also among keys such as
  # 'grid' that the sweep checks itself), and no error that follows from another.
  expect_rc 2 -- "$vexp" sweep data/sweep_keys.toml --dry-run
  no_crash
  f=data/sweep_keys.toml
  expect_out "$f:5:1: error: 'metric' in [sweep]: must be one of \"top1\", \"top5\", \"val_loss\", \"clips_per_s\", \"wall_s\", \"train_s\", got \"top3\""
  expect_out "$f:6:1: error: 'reference_batch' in [sweep] was removed: a sweep scales the lr through the recipe's own rule"
  expect_out "$f:9:1: error: 'after_epochs' in [sweep.prune]: must be >= 1, got 0"
  expect_out "$f:11:1: error: [sweep.random] needs 'count'"
  expect_out "$f:16:1: error: unknown key 'grids' in [[sweep.axis]] (did you mean 'grid'?)"
  expect_out "$f:22:1: error: unknown key 'sweeps' in the sweep file (everything goes under [sweep]) (did you mean 'sweep'?)"
  expect_out "7 errors"
  expect_no_out "median pruning"   # the metric is wrong, not the pruning
  ;;
run_results_report)
  expect_rc 0 -- "$vexp" sweep data/sweep_tiny.toml --out "$tmp/s" --jobs 2
  no_crash
  expect_out "4 trials: 4 done; metric top1 (max)"
  # One seed per cell: no cell is named best, the table, the recipe and the report agree.
  expect_out "no best cell: one finished trial per cell: the seeds' spread is unmeasured (add run.seed as an axis), so no cell is named best; the leading cell: global batch "
  expect_out "the leading cell's recipe (trial 00"
  expect_out "; run.threads left to the recipe's defaults) written to $tmp/s/best_recipe.toml"
  db_check "$tmp/s" '
assert len(rows) == 4, rows
for r in rows.values():
    assert r["status"] == "done" and r["attempts"] == 1 and r["exit_code"] == 0, r
    m = json.loads(r["metrics"]); assert 0 <= m["top1"] <= 1 and m["clips_per_s"] > 0, m
    assert r["metric"] == m["top1"] and r["attempt_s"] > 0 and r["finished_at"] >= r["started_at"], r
    assert r["run_dir"].endswith("/trials/%03d" % r["id"]), r
    assert json.loads(r["params"])["optim.lr"] in (0.05, 0.1), r
assert [rows[i]["global_batch"] for i in (1,2,3,4)] == [8, 8, 16, 16], rows
assert meta["metric"] == "top1" and meta["direction"] == "max" and len(meta["sweep_hash"]) == 16, meta
assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
'
  for i in 001 002 003 004; do
    for f in log.txt summary.json resolved.toml metrics.jsonl; do [ -s "$tmp/s/trials/$i/$f" ] || fail "trial $i lacks $f"; done
    grep -q "run.threads=1" "$tmp/s/trials/$i/log.txt" || fail "trial $i did not get 1 thread (2 cores / 2 jobs)"
  done
  expect_rc 0 -- "$vexp" results "$tmp/s" --json
  $PY - "$tmp/out" <<'PY' || fail "bad results --json"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["trials"]; assert len(t) == 4 and j["metric"] == "top1"
vals = [x["metric"] for x in t]; assert vals == sorted(vals, reverse=True), vals
PY
  expect_rc 0 -- "$vexp" results "$tmp/s" --csv --sort clips_per_s
  $PY - "$tmp/out" <<'PY' || fail "bad results --csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 4 and {"trial","status","optim.lr","dist.batch_per_gpu","top1","clips_per_s"} <= set(rows[0]), rows[0]
c = [float(r["clips_per_s"]) for r in rows]; assert c == sorted(c, reverse=True), c
PY
  expect_rc 0 -- "$vexp" results "$tmp/s" --sort id
  expect_out "trial status"
  expect_rc 2 -- "$vexp" results "$tmp/s" --sort bogus
  expect_out "--sort 'bogus'"
  expect_rc 0 -- "$vexp" results "$tmp/s" --best-recipe "$tmp/best.toml"
  head -1 "$tmp/best.toml" | grep -q "^# leading cell of sweep 'sweep_tiny': no best cell: one finished trial per cell" || fail "best recipe header"
  expect_no_out "best trial"
  grep -q "^threads = " "$tmp/best.toml" && fail "the best recipe keeps the sweep slot's run.threads"
  expect_rc 0 -- "$vexp" check "$tmp/best.toml"
  [ -s "$tmp/s/best_recipe.toml" ] || fail "sweep wrote no best_recipe.toml"
  for p in heatmap curves throughput linear_scaling; do
    [ -s "$tmp/s/report/$p.png" ] || fail "missing report/$p.png"
    head -c 8 "$tmp/s/report/$p.png" | od -An -c | grep -q "P   N   G" || fail "$p.png is not a PNG"
  done
  rm -rf "$tmp/s/report"
  [ -s "$tmp/s/report.html" ] || fail "vexp sweep wrote no report.html"
  expect_rc 0 -- "$vexp" report "$tmp/s" --png "$tmp/r" --out "$tmp/r.html"
  [ "$(ls "$tmp/r"/*.png | wc -l)" -eq 4 ] || fail "vexp report --png did not write 4 plots"
  [ -s "$tmp/r.html" ] || fail "vexp report --out wrote no HTML"
  expect_rc 1 -- "$vexp" results "$tmp/nowhere"
  expect_out "is not a sweep directory"
  # the same command again: nothing to run, every trial kept
  expect_rc 0 -- "$vexp" sweep data/sweep_tiny.toml --out "$tmp/s" --jobs 2 --no-report
  expect_out "resuming sweep"; expect_out "0 trials to run"
  db_check "$tmp/s" 'assert all(r["attempts"] == 1 and r["status"] == "done" for r in rows.values()), rows'
  # a changed definition is refused
  sed 's/grid = \[0.05, 0.1\]/grid = [0.05, 0.2]/' data/sweep_tiny.toml >"$tmp/changed.toml"
  sed -i 's#base = "tiny.toml"#base = "'"$here"'/data/tiny.toml"#' "$tmp/changed.toml"
  expect_rc 1 -- "$vexp" sweep "$tmp/changed.toml" --out "$tmp/s"
  expect_out "holds another sweep"
  db_check "$tmp/s" 'assert len(rows) == 4 and all(r["status"] == "done" for r in rows.values())'
  # a moved sweep directory still reports (trials found under DIR/trials/NNN)
  mv "$tmp/s" "$tmp/moved"
  expect_rc 0 -- "$vexp" results "$tmp/moved" --best-recipe "$tmp/best2.toml"
  cmp -s "$tmp/best.toml" "$tmp/best2.toml" || fail "best recipe differs after moving the sweep"
  expect_rc 0 -- "$vexp" report "$tmp/moved" --png "$tmp/moved/report"
  [ -s "$tmp/moved/report/curves.png" ] || fail "no curves after moving the sweep"
  grep -q '"name":"001 b8 lr 0.05"' "$tmp/moved/report.html" || fail "no curves in report.html after moving the sweep"
  ;;
failures)
  # trial 1 trains, trial 2 diverges (lr 100, no clipping), trial 3 fails (batch 64 > 48 clips)
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --jobs 2
  no_crash
  expect_out "1 trial(s) failed"
  expect_out "3 trials: 1 done, 1 diverged, 1 failed"
  db_check "$tmp/s" '
assert rows[1]["status"] == "done" and rows[1]["exit_code"] == 0, rows[1]
assert rows[2]["status"] == "diverged" and rows[2]["exit_code"] == 3 and "diverged" in rows[2]["message"], rows[2]
assert rows[2]["metric"] is None
assert rows[3]["status"] == "failed" and rows[3]["exit_code"] == 1, rows[3]
assert "fewer than one global batch" in rows[3]["message"], rows[3]
'
  # NaN on some BLAS, a finite but exploding loss on others: diverged either way
  grep -q "training diverged: " "$tmp/s/trials/002/log.txt" || fail "trial 2 log lacks the divergence"
  [ ! -e "$tmp/s/trials/002/summary.json" ] || fail "the diverged trial wrote a summary"
  expect_rc 0 -- "$vexp" results "$tmp/s"
  expect_out "diverged"
  # rerun: failed and diverged trials are kept; --retry-failed reruns the failed one only
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --no-report
  expect_out "0 trials to run"
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --retry-failed --no-report
  expect_out "1 trials to run"
  db_check "$tmp/s" '
assert [rows[i]["attempts"] for i in (1,2,3)] == [1, 1, 2], rows
assert rows[3]["status"] == "failed"
'
  [ -d "$tmp/s/trials/003.attempt-1" ] || fail "the first attempt of trial 3 was not kept aside"
  ;;
corrupt_db)
  # A damaged sweep.db: `vexp results` says what is kept and how to rebuild; `vexp sweep`
  # keeps the damaged file aside and rebuilds the store from the trial directories.
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --jobs 2 --no-report
  expect_out "3 trials: 1 done, 1 diverged, 1 failed"
  expect_rc 0 -- "$vexp" results "$tmp/s" --csv
  cp "$tmp/out" "$tmp/before.csv"
  # a page in the middle ("database disk image is malformed"), then the header ("file is not a database")
  for where in 4096 0; do
    $PY - "$tmp/s/sweep.db" "$where" <<'PY' || fail "could not damage sweep.db"
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); f.write(b"\xa5" * 600)
PY
    cp "$tmp/s/sweep.db" "$tmp/damaged.db"
    expect_rc 1 -- "$vexp" results "$tmp/s"
    expect_out "sweep.db' is damaged"
    expect_out "the trial directories in '$tmp/s/trials' hold every result: run \`vexp sweep SWEEP.toml --out $tmp/s\` again"
    expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --no-report
    no_crash
    expect_out "is damaged"
    expect_out "rebuilt sweep.db from 3 trial directories: 1 diverged, 1 done, 1 failed"
    expect_out "0 trials to run"
    expect_out "3 trials: 1 done, 1 diverged, 1 failed"
    aside=$(ls -t "$tmp/s"/sweep.db.corrupt-* | grep -v -- '-wal$\|-shm$' | head -1)
    cmp -s "$aside" "$tmp/damaged.db" || fail "the damaged sweep.db was not kept as it was"
    db_check "$tmp/s" '
assert rows[1]["status"] == "done" and rows[1]["exit_code"] == 0 and rows[1]["metric"] is not None, rows[1]
assert rows[2]["status"] == "diverged" and rows[2]["exit_code"] == 3 and "diverged" in rows[2]["message"], rows[2]
assert rows[3]["status"] == "failed" and rows[3]["exit_code"] == 1, rows[3]
assert "fewer than one global batch" in rows[3]["message"], rows[3]
assert all(r["attempts"] == 1 for r in rows.values()), rows
assert meta["metric"] == "top1" and len(meta["sweep_hash"]) == 16, meta
'
    expect_rc 0 -- "$vexp" results "$tmp/s" --csv
    cmp -s "$tmp/out" "$tmp/before.csv" || { diff "$tmp/before.csv" "$tmp/out" >&2; fail "results differ after the rebuild"; }
  done
  [ "$(ls "$tmp/s"/sweep.db.corrupt-* | grep -vc -- '-wal$\|-shm$')" -eq 2 ] || fail "expected two damaged files kept"
  # a deleted sweep.db is rebuilt too; a trial without a recorded end (interrupted) runs again
  rm "$tmp/s/sweep.db"
  rm "$tmp/s/trials/001/summary.json"
  sed -i '/^==== vexp sweep: end of trial/d' "$tmp/s/trials/001/log.txt"
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/s" --no-report
  expect_out "rebuilt sweep.db from 3 trial directories: 1 diverged, 1 failed, 1 pending"
  expect_out "1 trials to run"
  expect_out "3 trials: 1 done, 1 diverged, 1 failed"
  db_check "$tmp/s" 'assert rows[1]["status"] == "done" and rows[1]["attempts"] == 2, rows[1]'
  ;;
kill_resume)
  # 4 trials, one at a time; SIGKILL the sweep while trial 2 runs, then resume 3 s later.
  cat >"$tmp/k.toml" <<TOML
[sweep]
name = "kill"
base = "$here/data/tiny.toml"
target = { metric = "val_loss", value = 100 }
[sweep.set]
"run.epochs" = 3
"run.log_every" = 1
"data.params.train_clips" = 96
[[sweep.axis]]
key = "optim.lr"
grid = [0.01, 0.02, 0.03, 0.04]
TOML
  "$vexp" sweep "$tmp/k.toml" --out "$tmp/s" --jobs 1 >"$tmp/first.log" 2>&1 &
  bgpid=$!
  for _ in $(seq 1 6000); do   # up to 10 minutes on a loaded machine
    [ -s "$tmp/s/trials/002/checkpoints/epoch_0001.pt" ] && break
    kill -0 $bgpid 2>/dev/null || break
    sleep 0.1
  done
  [ -s "$tmp/s/trials/002/checkpoints/epoch_0001.pt" ] || { cat "$tmp/first.log" >&2; fail "trial 2 never checkpointed"; }
  kill -9 $bgpid; wait $bgpid 2>/dev/null; bgpid=""
  sleep 0.5
  pgrep -f "$tmp/s/trials" >/dev/null && fail "a trial outlived the killed sweep"
  db_check "$tmp/s" '
assert rows[1]["status"] == "done" and rows[2]["status"] == "running", rows
assert rows[3]["status"] == "pending" and rows[4]["status"] == "pending", rows
'
  stamp=$(stat -c %Y.%N "$tmp/s/trials/001/summary.json")
  sleep 3   # time between the attempts, which the trial's wall clock must not count
  expect_rc 0 -- "$vexp" sweep "$tmp/k.toml" --out "$tmp/s" --jobs 1 --no-report
  expect_out "trial 002 was interrupted: running it again"
  expect_out "3 trials to run"
  expect_out "resuming its last checkpoint"
  expect_no_out "trial 001 started"
  [ "$(stat -c %Y.%N "$tmp/s/trials/001/summary.json")" = "$stamp" ] || fail "trial 1 ran again"
  db_check "$tmp/s" '
assert all(r["status"] == "done" for r in rows.values()), rows
assert [rows[i]["attempts"] for i in (1,2,3,4)] == [1, 2, 1, 1], rows
import os
for i in (1,2,3,4):
    d = rows[i]["run_dir"]
    s = json.load(open(d + "/summary.json")); assert s["epochs"] == 3 and s["steps"] == 36, s
    evals = [json.loads(l) for l in open(d + "/metrics.jsonl") if "\"eval\"" in l]
    assert [e["epoch"] for e in evals] == [1, 2, 3], (i, evals)
'
  grep -q "resuming" "$tmp/s/trials/002/log.txt" || fail "trial 2 did not resume from its checkpoint"
  # The resumed trial's wall clock (its eval records', summary.json's, and the store's
  # time to the target) counts its attempts' training, not the 3 s between them.
  db_check "$tmp/s" '
import datetime, re, time
r = rows[2]
d = r["run_dir"]
log = open(d + "/log.txt").read()
m = re.search(r"==== vexp sweep: trial 002, attempt 1, (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", log)
start = time.mktime(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timetuple())  # to the second, floored
s = json.load(open(d + "/summary.json"))
evals = [json.loads(l) for l in open(d + "/metrics.jsonl") if "\"eval\"" in l]
walls = [e["wall_s"] for e in evals]
assert walls == sorted(walls) and walls[-1] <= s["wall_s"], (walls, s["wall_s"])
assert all(e["train_s"] <= e["wall_s"] for e in evals), evals
span = r["finished_at"] - start   # the first attempt start to the last end, the gap included (up to 1 s more)
assert s["wall_s"] <= span - 2, ("the gap between the attempts was counted", s["wall_s"], span)
first = evals[0]   # val_loss <= 100: the first evaluation
assert r["target"] == "val_loss <= 100", r
assert (r["steps_to_target"], r["clips_to_target"], r["time_to_target_s"]) == (first["global_step"], first["global_step"] * 8, first["wall_s"]), (r, first)
'
  ;;
tensorboard)
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run" --set run.log_every=2
  ev=$(ls "$tmp/run"/events.out.tfevents.* 2>/dev/null | head -1)
  [ -n "$ev" ] || fail "no events.out.tfevents file"
  $PY "$here/tfevents_check.py" "$ev" train/loss train/lr train/clips_per_s time/data_s time/compute_s \
      time/comm_s val/top1 val/top5 val/loss >"$tmp/tb.json" || fail "event file does not decode"
  $PY - "$tmp/tb.json" "$tmp/run/metrics.jsonl" <<'PY' || fail "event values differ from metrics.jsonl"
import json, sys
tb = json.load(open(sys.argv[1]))["scalars"]
lines = [json.loads(l) for l in open(sys.argv[2])]
steps = [l for l in lines if l["type"] == "step"]
evals = [l for l in lines if l["type"] == "eval"]
assert [s for s, _ in tb["train/loss"]] == [l["global_step"] for l in steps]
for (s, v), l in zip(tb["train/loss"], steps):
    assert abs(v - l["loss"]) <= 1e-5 * max(1, abs(l["loss"])), (v, l)
assert [round(v, 5) for _, v in tb["val/top1"]] == [round(e["top1"], 5) for e in evals]
PY
  # a corrupted byte is caught by the CRC check
  cp "$ev" "$tmp/bad"; printf '\x55' | dd of="$tmp/bad" bs=1 seek=40 conv=notrunc 2>/dev/null
  $PY "$here/tfevents_check.py" "$tmp/bad" >/dev/null 2>"$tmp/out" && fail "a corrupted event file passed"
  expect_out "CRC"
  # a resumed run starts a second event file
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run2" --stop-after 1
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run2" --resume
  [ "$(ls "$tmp/run2"/events.out.tfevents.* | wc -l)" -eq 2 ] || fail "expected 2 event files after a resume"
  ;;
prune)
  expect_rc 0 -- "$vexp" sweep data/sweep_prune.toml --out "$tmp/s" --jobs 1 --no-report
  no_crash
  expect_out "2 trials: 1 done, 1 pruned; metric val_loss (min)"
  db_check "$tmp/s" '
assert rows[1]["status"] == "done", rows[1]
p = rows[2]
assert p["status"] == "pruned" and p["metric"] is None, p
assert "pruned after epoch 1: val_loss" in p["message"] and "median 1.38" in p["message"], p
assert "1" in json.loads(p["metrics"])["evals"], p
'
  [ -e "$tmp/s/trials/002/summary.json" ] && fail "the pruned trial ran to the end"
  ;;
ranks_per_trial)
  # Multi-rank trials: each is `mpirun -np 2 vexp run` on the MPI backend; a world
  # that 2 ranks cannot split is refused before anything starts.
  expect_rc 2 -- "$vexp" sweep data/sweep_tiny.toml --ranks-per-trial 2 --out "$tmp/bad"
  expect_out "is not a multiple of --ranks-per-trial 2"
  [ ! -e "$tmp/bad" ] || fail "a refused sweep created its directory"
  expect_rc 0 -- "$vexp" sweep data/sweep_ranks.toml --ranks-per-trial 2 --jobs 1 --out "$tmp/r2" --no-report
  expect_out "2 trials: 2 done"
  for t in 001 002; do
    grep -q '"ranks":2' "$tmp/r2/trials/$t/metrics.jsonl" || fail "trial $t did not run on 2 ranks"
  done
  ;;
trained_figures)
  # A trial records what trains (#26): a recipe that scales its lr from optim.base_lr,
  # swept over the world size (emulated on 1 rank) and base_lr. The store, `vexp
  # results` (table and --csv), the report's data and --best-recipe must carry each
  # trial's trained global batch and lr, checked against the trial's own
  # resolved.toml, metrics.jsonl and summary.json (what `vexp run` trained with).
  cat >"$tmp/scaled.toml" <<EOF
[sweep]
name = "scaled"
base = "$here/data/tiny.toml"
[sweep.set]
"run.epochs" = 1
"run.log_every" = 1
"optim.base_batch" = 16
"optim.lr_scaling" = "linear"
"schedule.type" = "constant"
"schedule.warmup_epochs" = 0
[[sweep.axis]]
key = "dist.world_size"
grid = [1, 2]
[[sweep.axis]]
key = "optim.base_lr"
grid = [0.05, 0.1]
EOF
  expect_rc 0 -- "$vexp" sweep "$tmp/scaled.toml" --dry-run --ranks-per-trial 1
  # world 1 x 8 clips: 0.05 x 8/16 = 0.025; world 2: 16 clips, 0.1 x 16/16 = 0.1
  expect_out "trial 001  global_batch 8      lr 0.025 "
  expect_out "trial 004  global_batch 16     lr 0.1 "
  # The issue's case: the 8-GPU TSM recipe (base_lr 0.02 at 128 clips, linear) over
  # world_size x base_lr lists the lr each `vexp run --dry-run` plans, not the one written.
  printf '[sweep]\nbase = "%s/recipes/tsm_k400_8gpu.toml"\n[[sweep.axis]]\nkey = "dist.world_size"\ngrid = [8, 64]\n[[sweep.axis]]\nkey = "optim.base_lr"\ngrid = [0.01, 0.02]\n' "$src" >"$tmp/paper.toml"
  expect_rc 0 -- "$vexp" sweep "$tmp/paper.toml" --dry-run
  expect_out "trial 001  global_batch 64     lr 0.005 "
  expect_out "trial 002  global_batch 64     lr 0.01 "
  expect_out "trial 003  global_batch 512    lr 0.04 "
  expect_out "trial 004  global_batch 512    lr 0.08 "
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_8gpu.toml" --dry-run --set dist.world_size=64 --set optim.base_lr=0.02
  expect_out "learning rate:     0.08 (base_lr 0.02 at 128 clips"
  expect_rc 0 -- "$vexp" sweep "$tmp/scaled.toml" --out "$tmp/s" --jobs 2 --ranks-per-trial 1
  no_crash
  expect_out "4 trials: 4 done"
  expect_rc 0 -- "$vexp" results "$tmp/s" --csv --sort id
  cp "$tmp/out" "$tmp/results.csv"
  expect_rc 0 -- "$vexp" results "$tmp/s" --sort id
  cp "$tmp/out" "$tmp/results.txt"
  expect_rc 0 -- "$vexp" results "$tmp/s" --best-recipe "$tmp/best.toml"
  expect_rc 0 -- "$vexp" report "$tmp/s" --out "$tmp/report.html" --png "$tmp/png"
  $PY - "$tmp/s" "$tmp/results.csv" "$tmp/results.txt" "$tmp/best.toml" "$tmp/png" <<'PY' || fail "a sweep figure differs from what the trial trained"
import csv, json, math, re, sqlite3, sys, tomllib
d, csv_path, txt_path, best_path, png = sys.argv[1:6]
def close(a, b): return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
# What each trial trained, from its own run directory.
trained = {}
for i in (1, 2, 3, 4):
    run = "%s/trials/%03d" % (d, i)
    text = open(run + "/resolved.toml").read()
    r = tomllib.loads(text)
    o, di = r["optim"], r["dist"]
    g = di["world_size"] * di["batch_per_gpu"] * di.get("accum_steps", 1)
    assert o["lr_scaling"] == "linear" and o["base_lr"] > 0, o
    lr = o["base_lr"] * g / o["base_batch"]
    steps = [j for j in map(json.loads, open(run + "/metrics.jsonl")) if j.get("type") == "step"]   # run.log_every = 1: every step
    assert steps and all(close(s["lr"], lr) for s in steps), (i, lr, [s["lr"] for s in steps])
    summary = json.load(open(run + "/summary.json"))
    assert summary["global_batch"] == g, (i, summary["global_batch"], g)
    trained[i] = dict(g=g, lr=lr, steps=len(steps), wall=summary["wall_s"],
                      resolved=text, top1=summary["top1"])
assert sorted((t["g"], round(t["lr"], 9)) for t in trained.values()) == [(8, 0.025), (8, 0.05), (16, 0.05), (16, 0.1)], trained
# The store.
db = sqlite3.connect(d + "/sweep.db"); db.row_factory = sqlite3.Row
for row in db.execute("SELECT * FROM trials"):
    t = trained[row["id"]]
    assert row["global_batch"] == t["g"] and close(row["lr"], t["lr"]), (dict(row), t)
    f = json.loads(row["figures"])
    assert f["global_batch"] == t["g"] and close(f["lr"], t["lr"]) and f["total_steps"] == t["steps"], (f, t)
    assert f["micro_batches"] == f["world_size"] and f["ranks"] == 1, f   # world 2 emulated on 1 rank
# vexp results --csv and the table: the trained values, and one wall_s (summary.json's).
rows = list(csv.DictReader(open(csv_path)))
assert len(rows) == 4, rows
for r in rows:
    t = trained[int(r["trial"])]
    assert int(r["global_batch"]) == t["g"] and close(float(r["lr"]), t["lr"]), (r, t)
    assert int(r["total_steps"]) == t["steps"], (r, t)
    assert close(float(r["wall_s"]), t["wall"]), (r["wall_s"], t["wall"])
seen = 0
for line in open(txt_path):
    m = re.match(r"^(\d{3}) ", line)
    if not m: continue
    seen += 1
    t = trained[int(m.group(1))]; cells = line.split()
    assert cells[-1] == "%.1f" % t["wall"], (line, t["wall"])
    assert "%.4g" % t["lr"] in cells, (line, t["lr"])
assert seen == 4, seen
# The report's data: each trial's (global batch, lr) where the plots put it.
pts = sorted((int(l.split()[0]), round(float(l.split()[1]), 9)) for l in open(png + "/scaling_trials.dat") if l.strip())
assert pts == sorted((t["g"], round(t["lr"], 9)) for t in trained.values()), pts
# --best-recipe: the best trial's own recipe, with what it trained.
# (one trial per cell: the leading cell is the best trial's, the first of a tie)
best = max(trained, key=lambda i: (trained[i]["top1"], -i))
text = open(best_path).read()
want = tomllib.loads(trained[best]["resolved"]); del want["run"]["threads"]
assert tomllib.loads(text) == want, "best recipe is not the best trial's resolved.toml without run.threads"
assert ("from trial %03d " % best) in text, text.splitlines()[:4]
m = re.search(r"^# trained: global_batch (\d+), lr ([0-9.e+-]+)", text, re.M)
assert m and int(m.group(1)) == trained[best]["g"] and close(float(m.group(2)), trained[best]["lr"]), (m and m.group(0), trained[best])
PY
  ;;
target_errors)
  # [sweep] target: each mistake at the value's file:line:col, exit 2, nothing created;
  # --dry-run names the target.
  bad() {  # bad TARGET_LINE EXPECTED...
    printf '[sweep]\nbase = "%s/data/tiny.toml"\n%s\n[[sweep.axis]]\nkey = "dist.batch_per_gpu"\ngrid = [4, 8]\n' "$here" "$1" >"$tmp/t.toml"
    shift
    expect_rc 2 -- "$vexp" sweep "$tmp/t.toml" --out "$tmp/s"
    no_crash
    for e in "$@"; do expect_out "$e"; done
    [ ! -e "$tmp/s" ] || fail "an invalid target created the sweep folder"
  }
  f="$tmp/t.toml"
  bad 'target = { metric = "top2", value = 0.9 }' \
    "$f:3:12: error: 'metric' in [sweep] target: must be one of \"top1\", \"top5\", \"val_loss\", got \"top2\"" "$f: 1 error"
  bad 'target = { metric = "ema_top1", value = 0.9 }' "'metric' in [sweep] target: must be one of"
  bad 'target = { metric = "top1", value = "0.9" }' "$f:3:29: error: 'value' in [sweep] target: expected float, got string \"0.9\""
  bad 'target = { metric = "top1", value = 90 }' \
    "$f:3:29: error: 'value' in [sweep] target: top1 is a fraction in (0, 1] (top-1 of 90 % is 0.9), got 90"
  bad 'target = { metric = "top5", value = 0 }' "$f:3:29: error: 'value' in [sweep] target: must be > 0, got 0.0"
  bad 'target = { metric = "val_loss", value = nan }' "$f:3:33: error: 'value' in [sweep] target: must be > 0, got nan"
  bad 'target = { metric = "val_loss", value = inf }' "$f:3:33: error: 'value' in [sweep] target: must be a finite number, got inf"
  bad 'target = { metric = "top1" }' "$f:3:1: error: [sweep] target needs 'value'"
  bad 'target = { metric = "top1", vaule = 0.5, value = 0.5 }' "$f:3:29: error: unknown key 'vaule' in [sweep] target (did you mean 'value'?)"
  bad 'target = 0.9' "$f:3:1: error: 'target' in [sweep]: expected a table"
  bad 'target_value = 0.9' "$f:3:1: error: unknown key 'target_value' in [sweep]; known keys: name, base, out, metric, direction, set, vars, random, derived, prune, target, axis"
  printf '[sweep]\nbase = "%s/data/tiny.toml"\n[sweep.target]\nmetric = "val_loss"\nvalue = 0.5\n[[sweep.axis]]\nkey = "dist.batch_per_gpu"\ngrid = [4, 8]\n' "$here" >"$tmp/ok.toml"
  expect_rc 0 -- "$vexp" sweep "$tmp/ok.toml" --dry-run
  expect_out "target: val_loss <= 0.5 (each trial's steps, clips and wall-clock time to its first evaluation that reaches it)"
  ;;
target)
  # [sweep] target over 3 global batches x 2 learning rates (2 emulated GPUs each: the
  # noise scale is measured) and one batch too large for the data (2 trials that fail:
  # not reached). Everything is checked against the trials' own metrics.jsonl,
  # recomputed here, whatever the tiny runs learned.
  cat >"$tmp/t.toml" <<EOF
[sweep]
name = "target"
base = "$here/data/tiny.toml"
target = { metric = "top1", value = 0.4 }
[sweep.set]
"run.epochs" = 5
"run.log_every" = 3
"run.noise_scale_every" = 3
"dist.world_size" = 2
"data.params.train_clips" = 192
"data.params.val_clips" = 32
[[sweep.axis]]
key = "dist.batch_per_gpu"
grid = [4, 8, 16, 128]
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
EOF
  expect_rc 1 -- "$vexp" sweep "$tmp/t.toml" --out "$tmp/s" --jobs 2
  no_crash
  expect_out "target: top1 >= 0.4"
  expect_out "8 trials: 6 done, 2 failed; metric top1 (max)"
  expect_out "T: target top1 >= 0.4, reached by "
  expect_out "plots: 6 PNG files"
  for p in steps_to_target clips_to_target; do
    head -c 8 "$tmp/s/report/$p.png" | od -An -c | grep -q "P   N   G" || fail "$p.png is not a PNG"
  done
  expect_rc 0 -- "$vexp" results "$tmp/s" --sort id
  cp "$tmp/out" "$tmp/results.txt"
  expect_rc 0 -- "$vexp" results "$tmp/s" --json
  cp "$tmp/out" "$tmp/results.json"
  expect_rc 0 -- "$vexp" results "$tmp/s" --csv --sort steps_to_target
  cp "$tmp/out" "$tmp/results.csv"
  check_target() {  # check_target SWEEP_DIR METRIC VALUE: the store, results and report against the trials' folders
    $PY - "$1" "$2" "$3" "$tmp/results.txt" "$tmp/results.json" "$tmp/results.csv" <<'PY' || fail "figures to the target differ from the trials' metrics.jsonl"
import csv, json, math, os, re, sqlite3, sys
import numpy as np
d, metric, value, txt, js, cs = sys.argv[1], sys.argv[2], float(sys.argv[3]), *sys.argv[4:7]
higher = metric != "val_loss"
text = "%s %s %g" % (metric, ">=" if higher else "<=", value)
db = sqlite3.connect(d + "/sweep.db"); db.row_factory = sqlite3.Row
rows = {r["id"]: dict(r) for r in db.execute("SELECT * FROM trials")}
meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
assert meta["target"] == text, (meta["target"], text)
assert 'metric = "%s", value = %g' % (metric, value) in meta["definition"], meta["definition"]   # the file that names it
def records(i, kind):
    f = "%s/trials/%03d/metrics.jsonl" % (d, i)
    return [j for j in map(json.loads, open(f)) if j["type"] == kind] if os.path.exists(f) else []
want, noise = {}, {}
for i, r in rows.items():
    p = json.loads(r["params"])
    g = 2 * p["dist.batch_per_gpu"]                      # world 2 x batch_per_gpu x accum 1
    assert r["global_batch"] == g, r
    ev = records(i, "eval")
    summary = "%s/trials/%03d/summary.json" % (d, i)
    s = json.load(open(summary)) if os.path.exists(summary) else None
    # the records' own figures: the clips are steps x global batch, the times grow and stay within the run's
    for e in ev:
        assert e["clips_trained"] == e["global_step"] * g, e
        assert 0 < e["train_s"] <= e["wall_s"], e
    assert all(a["wall_s"] <= b["wall_s"] for a, b in zip(ev, ev[1:])), ev
    if s and ev:
        assert ev[-1]["wall_s"] <= s["wall_s"] + 1e-9 and ev[-1]["train_s"] <= s["train_s"] + 1e-9, (ev[-1], s)
    first = next((e for e in ev if e[metric] is not None and (e[metric] >= value if higher else e[metric] <= value)), None)
    w = dict(steps=None, clips=None, time=None, train=None, epoch=None)
    if first:
        w = dict(steps=first["global_step"], clips=first["global_step"] * g, time=first["wall_s"],
                 train=first["train_s"], epoch=first["epoch"])
    want[i] = w
    assert r["status"] in ("done", "failed"), r
    assert r["target"] == text, r
    got = dict(steps=r["steps_to_target"], clips=r["clips_to_target"], time=r["time_to_target_s"],
               train=r["train_s_to_target"], epoch=r["epoch_to_target"])
    assert got == w, (i, got, w)                          # NULL when not reached, never 0
    # B_noise: the last smoothed value at or before the target's step, else the run's last
    ns = [j for j in records(i, "step") if j.get("noise_scale") is not None]
    end = s["noise_scale"] if s and s.get("noise_scale") is not None else (ns[-1]["noise_scale"] if ns else None)
    at = [j["noise_scale"] for j in ns if first and j["global_step"] <= first["global_step"]]
    noise[i] = (at[-1] if at else None, end)
    if r["status"] == "done":
        assert end is not None and end > 0, (i, s)
# vexp results --json, --csv and the table
j = json.load(open(js))
assert j["target"] == {"metric": metric, "value": value, "direction": "max" if higher else "min", "text": text}, j["target"]
for t in j["trials"]:
    w = want[t["id"]]
    assert (t["steps_to_target"], t["clips_to_target"], t["time_to_target_s"], t["train_s_to_target"], t["epoch_to_target"]) \
        == (w["steps"], w["clips"], w["time"], w["train"], w["epoch"]), (t, w)
    assert t["target_reached"] == (w["steps"] is not None), t
c = list(csv.DictReader(open(cs)))
for r in c:
    w = want[int(r["trial"])]
    assert r["target_reached"] == ("true" if w["steps"] is not None else "false"), r
    assert r["steps_to_target"] == ("" if w["steps"] is None else str(w["steps"])), r
    assert r["clips_to_target"] == ("" if w["clips"] is None else str(w["clips"])), r
    assert (r["time_to_target_s"] == "") == (w["time"] is None), r
    if w["time"] is not None: assert math.isclose(float(r["time_to_target_s"]), w["time"], rel_tol=1e-9), r
order = [int(r["trial"]) for r in c]                      # --sort steps_to_target: fewest first, not reached last
key = [(want[i]["steps"] is None, want[i]["steps"] or 0, i) for i in order]
assert key == sorted(key), key
seen = 0
for line in open(txt):
    m = re.match(r"^(\d{3}) ", line)
    if not m: continue
    seen += 1
    w, cells = want[int(m.group(1))], line.split()
    if w["steps"] is None: assert cells[-4:] == ["not", "reached", "-", "-"], line
    else: assert cells[-3:] == [str(w["steps"]), str(w["clips"]), "%.1f" % w["time"]], (line, w)
assert seen == len(rows), seen
reached = sum(w["steps"] is not None for w in want.values())
assert "T: target %s, reached by %d of %d ended trials" % (text, reached, len(rows)) in open(txt).read()
# The report: the best trial of each batch (fewest steps, then clips, then id), the fit, B_noise
html = open(d + "/report.html", encoding="utf-8").read()
data = json.loads(re.search(r'<script type="application/json" id="vexp-data">(.*?)</script>', html, re.S).group(1))
ch = data["charts"]
if reached == 0:
    assert "target_steps" not in ch and "No trial reached the target %s: nothing to plot." % text.replace("<", "&lt;") in html
    assert "no fit: no batch reached the target" in html
    print("reached: none")
    sys.exit(0)
best = {}
for i, w in want.items():
    if w["steps"] is None: continue
    g = rows[i]["global_batch"]
    if g not in best or (w["steps"], w["clips"], i) < (want[best[g]]["steps"], want[best[g]]["clips"], best[g]): best[g] = i
pts = [(p["batch"], p["steps"], p["trial"]) for p in ch["target_steps"]["fit_points"]]
assert pts == [(g, want[best[g]]["steps"], best[g]) for g in sorted(best)], (pts, best)
fit = ch["target_steps"]["fit"]
if len(best) >= 2:
    B = np.array([p[0] for p in pts], float); S = np.array([p[1] for p in pts], float)
    a, b = fit["s_min"], fit["e_min"]
    assert a >= 0 and b >= 0, fit
    # the constrained least-squares minimum (KKT): zero gradient in a free parameter,
    # a gradient pointing out of the feasible set in one held at 0
    r = (S - a - b / B) / S
    ga, gb = -2 * np.sum(r / S), -2 * np.sum(r / (B * S))
    sa, sb = 2 * np.sum(1 / S**2), 2 * np.sum(1 / (B * S)**2)   # the curvatures, for a scale
    assert (abs(ga) <= 1e-6 * sa * max(a, 1)) if a > 0 else ga >= -1e-9, (fit, ga)
    assert (abs(gb) <= 1e-6 * sb * max(b, 1)) if b > 0 else gb >= -1e-9, (fit, gb)
    assert fit["b_crit"] is None if a == 0 else math.isclose(fit["b_crit"], b / a, rel_tol=1e-5), fit
    assert "S_min = " in html and "relative rms misfit" in html or len(best) == 2
else:
    assert fit is None and "no fit: " in html, fit
# each trial's B_noise on the clips plot: at the target, else at the end
seg = [s for s in ch["target_clips"]["series"] if s["name"].startswith("B_noise")]
xs = sorted({round(x, 4) for x in seg[0]["x"]}) if seg else []
expect = sorted({round(float("%.6g" % (at if at is not None else end)), 4) for at, end in noise.values()
                 if (at if at is not None else end) is not None})
assert xs == expect, (xs, expect)
at_target = [noise[i][0] for i, w in want.items() if w["steps"] is not None and noise[i][0] is not None]
if at_target:
    med = float(np.median(at_target))
    assert "B_noise measured by %d trial" % len(at_target) in html and "at the target: median %.4g" % med in html, (med, at_target)
print("reached:", {i: w["steps"] for i, w in want.items()}, "best per batch:", best, "fit:", fit)
PY
  }
  check_target "$tmp/s" top1 0.4
  [ "$(grep -c '^set output' "$tmp/s/report/report.gp")" -eq 6 ] || fail "report.gp does not draw 6 plots"
  # The report in Chromium (when installed): every chart drawn, the new ones included.
  $PY "$here/report_browser.py" "$tmp/s/report.html" "$build/report_screenshots/sweep_target.png" 7 10000 >"$tmp/browser" 2>&1
  rc=$?; cat "$tmp/browser"; [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "the target report does not work in Chromium"

  # Another target on the same folder: the trials are kept and measured again from their
  # folders; nobody reaches this one (NULL, "not reached", no fit).
  sed 's/target = { metric = "top1", value = 0.4 }/target = { metric = "val_loss", value = 0.0001 }/' "$tmp/t.toml" >"$tmp/t2.toml"
  expect_rc 1 -- "$vexp" sweep "$tmp/t2.toml" --out "$tmp/s"
  expect_out "target top1 >= 0.4 is now val_loss <= 0.0001"
  expect_out "steps, clips and time to the target val_loss <= 0.0001 measured for 8 ended trials"
  expect_out "0 trials to run"
  [ "$(grep -c ' not reached ' "$tmp/out")" -eq 8 ] || fail "8 trials should not have reached val_loss <= 0.0001"
  expect_out "T: target val_loss <= 0.0001, reached by 0 of 8 ended trials"
  expect_rc 0 -- "$vexp" results "$tmp/s" --sort id; cp "$tmp/out" "$tmp/results.txt"
  expect_rc 0 -- "$vexp" results "$tmp/s" --json; cp "$tmp/out" "$tmp/results.json"
  expect_rc 0 -- "$vexp" results "$tmp/s" --csv --sort steps_to_target; cp "$tmp/out" "$tmp/results.csv"
  check_target "$tmp/s" val_loss 0.0001

  # A known curve: the trials' metrics.jsonl rewritten so that batch B reaches top1 0.5
  # at S = 20 + 960 / B steps with lr 0.05 (1.5 S with lr 0.1), B_noise 36 (lr 0.05) or
  # 60 (lr 0.1) at the target and 999 after it. The sweep run again with that target
  # measures them; the report finds S_min = 20, E_min = 960, B_crit = 48 and
  # B_crit / B_noise = 48 / median(36, 60) = 1.
  cp -a "$tmp/s" "$tmp/k"
  $PY - "$tmp/k" <<'PY' || fail "could not write the known curve"
import json, sqlite3, sys
d = sys.argv[1]
db = sqlite3.connect(d + "/sweep.db")
for i, params, g, status in db.execute("SELECT id, params, global_batch, status FROM trials"):
    if status != "done": continue
    lr = json.loads(params)["optim.lr"]
    s = 20 + 960 // g if lr == 0.05 else int(1.5 * (20 + 960 // g))
    bn = 36.0 if lr == 0.05 else 60.0
    rec = []
    for step, top1, noise in ((s // 2, 0.25, bn / 2), (s - 1, 0.375, bn), (s, 0.5, None), (s + 6, 0.625, 999.0)):
        if noise is not None:
            rec.append({"type": "step", "epoch": 1, "step": step, "global_step": step, "loss": 1.0, "lr": lr,
                        "noise_small_batch": g // 2, "noise_big_batch": g, "noise_scale": noise})
        rec.append({"type": "eval", "epoch": len([r for r in rec if r["type"] == "eval"]) + 1, "global_step": step,
                    "top1": top1, "top5": 1.0, "val_loss": 1.0, "clips_trained": step * g,
                    "train_s": 0.01 * step, "wall_s": 0.02 * step + 1})
    open("%s/trials/%03d/metrics.jsonl" % (d, i), "w").write("".join(json.dumps(r) + "\n" for r in rec))
PY
  sed 's/target = { metric = "top1", value = 0.4 }/target = { metric = "top1", value = 0.5 }/' "$tmp/t.toml" >"$tmp/t3.toml"
  expect_rc 1 -- "$vexp" sweep "$tmp/t3.toml" --out "$tmp/k"
  expect_out "target val_loss <= 0.0001 is now top1 >= 0.5"
  expect_rc 0 -- "$vexp" results "$tmp/k" --json
  $PY - "$tmp/out" "$tmp/k/report.html" <<'PY' || fail "the known curve was not measured and fitted back"
import json, math, re, sys
j = json.load(open(sys.argv[1]))
steps = {t["id"]: t["steps_to_target"] for t in j["trials"]}
assert steps == {1: 140, 2: 210, 3: 80, 4: 120, 5: 50, 6: 75, 7: None, 8: None}, steps
assert all(t["clips_to_target"] == (t["steps_to_target"] * t["global_batch"] if t["steps_to_target"] else None)
           for t in j["trials"]), j["trials"]
assert all(t["time_to_target_s"] is None or math.isclose(t["time_to_target_s"], 0.02 * t["steps_to_target"] + 1)
           for t in j["trials"])
html = open(sys.argv[2], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="vexp-data">(.*?)</script>', html, re.S).group(1))
c = d["charts"]["target_steps"]
assert [(p["batch"], p["steps"], p["trial"]) for p in c["fit_points"]] == [(8, 140, 1), (16, 80, 3), (32, 50, 5)], c["fit_points"]
f = c["fit"]
assert math.isclose(f["s_min"], 20, rel_tol=1e-6) and math.isclose(f["e_min"], 960, rel_tol=1e-6), f
assert math.isclose(f["b_crit"], 48, rel_tol=1e-6) and f["rel_rms"] < 1e-6 and f["batches"] == 3, f
assert "S_min = 20 steps, E_min = 960 clips, B_crit = E_min / S_min = 48 clips" in html
assert "B_noise measured by 6 trials at the target: median 48 (36 to 60); B_crit / B_noise = 1 " in html
xs = sorted({x for s in d["charts"]["target_clips"]["series"] if s["name"].startswith("B_noise") for x in s["x"]})
assert xs == [36, 60], xs
PY
  grep -q "20 + 960 / x with lines" "$tmp/k/report/report.gp" || fail "the steps plot does not draw the fitted curve"
  # A lost sweep.db is rebuilt from the trial folders with the same figures.
  expect_rc 0 -- "$vexp" results "$tmp/k" --csv --sort id
  cp "$tmp/out" "$tmp/before.csv"
  rm "$tmp/k/sweep.db"*
  expect_rc 1 -- "$vexp" sweep "$tmp/t3.toml" --out "$tmp/k" --no-report
  expect_out "rebuilt sweep.db from 8 trial directories: 6 done, 2 failed"
  expect_rc 0 -- "$vexp" results "$tmp/k" --csv --sort id
  cut -d, -f1-2,5-6,14-18 "$tmp/out" >"$tmp/after.cut"; cut -d, -f1-2,5-6,14-18 "$tmp/before.csv" >"$tmp/before.cut"
  cmp -s "$tmp/before.cut" "$tmp/after.cut" || { diff "$tmp/before.cut" "$tmp/after.cut" >&2; fail "the rebuilt store's figures to the target differ"; }
  grep -q ",true,140,1120," "$tmp/after.cut" || fail "trial 1's figures are not in the rebuilt store"
  ;;
quickstart_check)
  expect_rc 0 -- "$vexp" sweep "$src/recipes/sweeps/bs_lr_quickstart.toml" --dry-run
  expect_out "9 trials, every recipe valid"
  # The paper-scale study needs no switch-off: the recipe's rule gives 0.01 per 64 clips x batch.
  expect_rc 0 -- "$vexp" sweep "$src/recipes/sweeps/tsm_k400_bs_lr.toml" --dry-run
  expect_out "45 trials, every recipe valid"
  expect_out "trial 001  global_batch 256    lr 0.02 "
  expect_out "trial 045  global_batch 12288  lr 3.84 "
  # The batch-size study in miniature (docs/batch-size.md): 8 to 256 clips (32x), lr linear.
  expect_rc 0 -- "$vexp" sweep "$src/recipes/sweeps/batch_size_motion.toml" --dry-run
  expect_out "12 trials, every recipe valid"
  expect_out "target: top1 >= 0.85"
  expect_out "trial 001  global_batch 8      lr 0.025 "
  expect_out "trial 012  global_batch 256    lr 0.8 "
  ;;
*) fail "unknown test" ;;
esac
echo "PASS [$name]"
