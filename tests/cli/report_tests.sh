#!/usr/bin/env bash
# End-to-end tests of `vexp report`: the HTML report of a run, of several runs (a
# comparison) and of a sweep, each made from small real runs and opened in headless
# Chromium (tests/cli/report_browser.py: no console message, every chart drawn,
# a screenshot in BUILD/report_screenshots/). Without Chromium a test is skipped
# (exit 77) after checking everything that needs no browser.
# Usage: report_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" report
shots="$build/report_screenshots"
mkdir -p "$shots"
cd "$here"

skipped=0
# browser HTML SHOT MIN_CHARTS [MAX_MS]: the report in headless Chromium.
browser() {
  $PY "$here/report_browser.py" "$@" >"$tmp/browser" 2>&1
  local rc=$?
  cat "$tmp/browser"
  if [ $rc -eq 77 ]; then skipped=1; return 0; fi
  [ $rc -eq 0 ] || fail "the report does not work in Chromium: $1"
}
# data_check HTML PYTHON: runs PYTHON with `d` = the JSON embedded in the report and `html` its text.
data_check() {
  $PY - "$1" "$2" <<'PY' || fail "report content check failed: $1"
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="vexp-data">(.*?)</script>', html, re.S).group(1))
ids = set(re.findall(r'<div class="chart" data-chart="([^"]+)"', html))
assert ids == set(d["charts"]), (ids, set(d["charts"]))
exec(sys.argv[2])
PY
}
# tiny_run DIR [--set ...]: the tiny recipe, 2 epochs, a step line per step.
tiny_run() {
  local dir=$1; shift
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$dir" --set run.log_every=1 "$@"
}
finish() { [ $skipped -eq 1 ] && { echo "SKIP: no Chromium installed; the report files were checked without a browser"; exit 77; }; exit 0; }

case "$name" in
run)
  tiny_run "$tmp/run"
  expect_rc 0 -- "$vexp" report "$tmp/run"
  expect_out "run report: $tmp/run/report.html"
  data_check "$tmp/run/report.html" '
steps = [json.loads(l) for l in open(sys.argv[1].replace("report.html", "metrics.jsonl")) if "\"step\"" in l]
assert {"loss", "top1", "val_loss", "lr", "throughput", "split"} <= set(d["charts"]), d["charts"].keys()
loss = d["charts"]["loss"]["series"][0]
x = d["xs"][loss["xref"]]
assert x == [s["global_step"] for s in steps] and len(loss["y"]) == len(steps) == 12, (x, steps)
assert all(abs(a - s["loss"]) <= 1e-5 * abs(s["loss"]) for a, s in zip(loss["y"], steps)), loss["y"]
# the epoch axis: epochs of clips seen (epochs_trained), exact when steps per epoch are not whole
ep = d["xs"][loss["xref_epoch"]]
assert len(ep) == len(steps) and all(abs(a - s["epochs_trained"]) <= 1e-5 * s["epochs_trained"] for a, s in zip(ep, steps)), ep
acc = d["charts"]["top1"]["series"]
assert [s["name"] for s in acc] == ["top-1", "top-5"] and acc[0]["x"]["epoch"] == [1, 2], acc
assert [s["name"] for s in d["charts"]["split"]["series"]][:3] == ["data wait", "compute (forward + backward)", "communication"]
for k in ("threads, ranks", "device, precision, memory format", "skipped samples", "vexp version, build tag", "resolved.toml"):
    assert k in html, k
assert "status-done" in html
# counts read as counts ("71.59 M"), never a raw "7.1594e+07"
row = html[html.index("parameters, MACs per clip"):].split("</tr>")[0]
assert "e+" not in row and re.search(r"\d( [kMGT])?, \d", row), row
'
  browser "$tmp/run/report.html" "$shots/run.png" 6 10000
  # a run whose validation loss turned NaN (divergence): reported, its charts still drawn
  VEXP_TEST_FAULT=nan_val@epoch=1 "$vexp" run data/tiny.toml --out "$tmp/div" --set run.log_every=1 >"$tmp/out" 2>&1
  [ $? -eq 3 ] || { cat "$tmp/out" >&2; fail "the NaN validation did not diverge"; }
  expect_rc 0 -- "$vexp" report "$tmp/div" --out "$tmp/div.html"
  data_check "$tmp/div.html" '
assert "<b>diverged</b>: a validation value after epoch 1 is not finite" in html, "no divergence note"
assert d["charts"]["val_loss"]["series"][0]["y"] == [None], d["charts"]["val_loss"]
'
  browser "$tmp/div.html" "$tmp/div.png" 6
  # errors: one line each, nothing written
  expect_rc 2 -- "$vexp" report "$tmp/run" --out "$tmp/r.txt"
  expect_out "--out '$tmp/r.txt': the report is one HTML file: give a name ending in .html"
  expect_rc 1 -- "$vexp" report "$tmp/nowhere"
  expect_out "'$tmp/nowhere' is not a directory"
  mkdir "$tmp/empty"
  expect_rc 1 -- "$vexp" report "$tmp/empty"
  expect_out "is not a run directory (it has no metrics.jsonl, summary.json or resolved.toml) nor a sweep directory"
  expect_rc 2 -- "$vexp" report "$tmp/run" --png "$tmp/png"
  expect_out "--png: PNG plots are drawn for one sweep directory"
  [ -e "$tmp/r.txt" ] || [ -e "$tmp/empty/report.html" ] && fail "a refused report wrote a file"
  finish
  ;;
comparison)
  tiny_run "$tmp/a" --set optim.lr=0.05
  tiny_run "$tmp/b" --set optim.lr=0.1
  tiny_run "$tmp/c" --set optim.lr=0.1 --set dist.batch_per_gpu=16
  expect_rc 0 -- "$vexp" report "$tmp/a" "$tmp/b" "$tmp/c" --out "$tmp/cmp.html"
  expect_out "comparison report: $tmp/cmp.html"
  data_check "$tmp/cmp.html" '
for c in ("loss", "top1", "top5", "val_loss", "lr", "throughput"):
    s = d["charts"][c]["series"]
    assert len(s) == 3 and len({x["color"] for x in s}) == 3, (c, s)
names = [s["name"] for s in d["charts"]["loss"]["series"]]
assert len(set(names)) == 3 and all(n.startswith("tiny (") for n in names), names
assert "Recipe keys that differ" in html and "<code>optim.lr</code>" in html and "<code>dist.batch_per_gpu</code>" in html
assert "<code>optim.momentum</code>" not in html   # the same in every run
assert html.count("status-done") >= 3
'
  browser "$tmp/cmp.html" "$shots/comparison.png" 6 10000
  # a sweep directory cannot be one of several
  mkdir -p "$tmp/sw" && touch "$tmp/sw/sweep.db"
  expect_rc 2 -- "$vexp" report "$tmp/a" "$tmp/sw"
  expect_out "is a sweep directory: report it alone"
  finish
  ;;
sweep)
  # 2 batches x 2 learning rates x 2 seeds, 1 epoch each, 2 at a time.
  cat >"$tmp/seeds.toml" <<EOF
[sweep]
name = "seeds"
base = "$here/data/tiny.toml"
metric = "top1"
[sweep.set]
"run.epochs" = 1
"run.log_every" = 1
[[sweep.axis]]
key = "dist.batch_per_gpu"
grid = [8, 16]
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
[[sweep.axis]]
key = "run.seed"
grid = [0, 1]
EOF
  expect_rc 0 -- "$vexp" sweep "$tmp/seeds.toml" --out "$tmp/s" --jobs 2
  expect_out "report: $tmp/s/report.html"
  cp "$tmp/out" "$tmp/sweep.out"
  "$vexp" results "$tmp/s" --json >"$tmp/results.json" || fail "vexp results --json failed"
  expect_rc 0 -- "$vexp" results "$tmp/s" --best-recipe "$tmp/best.toml"
  cat "$tmp/out" >>"$tmp/sweep.out"
  [ -s "$tmp/s/report.html" ] || fail "vexp sweep wrote no report.html"
  rm "$tmp/s/report.html"
  expect_rc 0 -- "$vexp" report "$tmp/s"
  expect_out "sweep report: $tmp/s/report.html"
  data_check "$tmp/s/report.html" '
hm = d["charts"]["heatmap"]
assert hm["xs"] == ["8", "16"] and hm["ys"] == ["0.05", "0.1"], hm
assert len(hm["cells"]) == 4 and all("(n=2)" in c["text"] for c in hm["cells"]), hm["cells"]
assert "run.seed" in hm["note"] and hm["verdict"], hm
assert hm["chance"] == 0.25, hm   # tiny.toml: 4 classes, top-1
# A best cell is named only when it stands out of the spread of seeds and of chance
# (docs/reports.md); when it is, it is the highest mean.
best = max(hm["cells"], key=lambda c: c["v"])
assert hm.get("best") is None or [best["x"], best["y"]] == hm["best"], (best, hm.get("best"))
assert ("No best cell: " in html) == (hm.get("best") is None), hm["verdict"]
# The sweep'"'"'s own lines, vexp results and the recipe it writes say the same: the
# report'"'"'s verdict, the best (or else the leading) cell, that cell'"'"'s recipe without
# its seed and the slot'"'"'s threads.
import os, tomllib
tmp = os.path.dirname(os.path.dirname(sys.argv[1]))
out = open(tmp + "/sweep.out").read()
res = json.load(open(tmp + "/results.json"))
best = hm.get("best")
assert res["verdict"] == hm["verdict"] and (res["best_cell"] is None) == (best is None), (res["verdict"], hm["verdict"])
lead = res["best_cell"] or res["leading_cell"]
assert lead and lead["n"] == 2 and len(lead["trials"]) == 2, lead
line = [l for l in out.splitlines() if l.startswith(("best cell: ", "no best cell: "))]
assert len(line) == 2 and line[0] == line[1] and hm["verdict"] in line[0] and line[0].startswith("best cell: " if best else "no best cell: "), line
if best:
    assert [hm["xs"][best[0]], hm["ys"][best[1]]] == [str(lead["global_batch"]), "%g" % lead["lr"]], (best, lead)
word = "best" if best else "leading"
assert ("the %s cell'"'"'s recipe (trial " % word) in out and "run.threads run.seed left to the recipe'"'"'s defaults" in out, out
text = open(tmp + "/best.toml").read()
assert text.startswith("# %s cell of sweep '"'"'seeds'"'"': " % word), text[:200]
r = tomllib.loads(text)
assert "seed" not in r["run"] and "threads" not in r["run"], r["run"]
assert r["dist"]["batch_per_gpu"] == lead["global_batch"] and abs(r["optim"]["lr"] - lead["lr"]) < 1e-12, (r["dist"], r["optim"], lead)
assert "Chance: top1 0.25 (4 classes)" in html
loss = d["charts"]["loss"]["series"]
assert len(loss) == 8 and len({s["color"] for s in loss}) == 8, [s["color"] for s in loss]
assert len(d["charts"]["eval"]["series"]) == 8
sc = d["charts"]["scaling"]
names = [s["name"][:7] for s in sc["series"]]
assert sc["xlog"] and sc["ylog"] and names[:2] == ["trials", "best lr"] and names[2:] in ([], ["linear "]), sc
th = d["charts"]["throughput"]
assert len(th["bars"]) == 8 and any(g["name"].startswith("ran with up to 1 other") for g in th["groups"]), th["groups"]
assert html.count("status-done") >= 8
'
  browser "$tmp/s/report.html" "$shots/sweep.png" 5 10000
  # a trial that diverges and one that fails: statuses and messages in the report
  expect_rc 1 -- "$vexp" sweep data/sweep_mixed.toml --out "$tmp/m" --jobs 2 --no-report
  expect_rc 0 -- "$vexp" report "$tmp/m"
  data_check "$tmp/m/report.html" '
rows = re.findall(r"<tr><td><span[^>]*>&#9632;</span> (\d+)</td><td><span class=\"status-(\w+)\">.*?<td class=\"msg\">(.*?)</td></tr>", html)
st = {r[0]: (r[1], r[2]) for r in rows}
assert st["001"][0] == "done" and st["002"][0] == "diverged" and st["003"][0] == "failed", st
assert "diverged" in st["002"][1] and "fewer than one global batch" in st["003"][1], st
cells = {(c["x"], c["y"]): c for c in d["charts"]["heatmap"]["cells"]}
assert any(c["v"] is None and "diverged" in c["text"] for c in cells.values()), cells
'
  browser "$tmp/m/report.html" "$shots/sweep_failures.png" 5 10000
  # the PNG plots, fixed: one colour per trial, the heatmap with mean and spread
  if command -v gnuplot >/dev/null; then
    expect_rc 0 -- "$vexp" report "$tmp/s" --png "$tmp/png" --out "$tmp/s2.html"
    for p in heatmap curves throughput linear_scaling; do
      head -c 8 "$tmp/png/$p.png" | od -An -c | grep -q "P   N   G" || fail "$p.png is not a PNG"
    done
    grep -q "± " "$tmp/png/heatmap.dat" || fail "the heatmap has no spread over seeds"
    [ "$(grep -o "lc rgb '#[0-9a-f]*' dt" "$tmp/png/report.gp" | sort -u | wc -l)" -eq 8 ] || fail "curves reuse a colour"
    grep -q "ran with up to 1 other trial" "$tmp/png/report.gp" || fail "throughput does not say trials shared the machine"
    grep -q "chance 0.25 (4 classes)" "$tmp/png/report.gp" || fail "the heatmap does not say where chance is"
    grep -q "set key at screen 0.5,0.01" "$tmp/png/report.gp" || fail "the curves' legend is inside a panel"
  fi
  finish
  ;;
scale)
  # 100 trials and 100,000 logged steps: a run of 100,000 step lines, and a sweep of
  # 100 trials of 1,000 step lines each (written from one real trial's files).
  cat >"$tmp/one.toml" <<EOF
[sweep]
name = "scale"
base = "$here/data/tiny.toml"
metric = "top1"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
EOF
  expect_rc 0 -- "$vexp" sweep "$tmp/one.toml" --out "$tmp/s" --no-report
  $PY - "$tmp/s" "$tmp/run" <<'PY' || fail "cannot write the large inputs"
import json, math, os, random, shutil, sqlite3, sys
s, run = sys.argv[1], sys.argv[2]
random.seed(0)
def steps(n, spe):
    for g in range(1, n + 1):
        e = (g - 1) // spe + 1
        d = {"type": "step", "epoch": e, "step": (g - 1) % spe + 1, "global_step": g,
             "loss": 2.0 * math.exp(-g / (n / 4)) + 0.05 * random.random(), "lr": 0.1 * (1 - g / n),
             "clips_per_s": 800 + 50 * random.random(), "step_s": 0.01, "data_s": 0.002, "compute_s": 0.007,
             "comm_s": 0.0005, "ranks": 1}
        yield json.dumps(d)
        if g % spe == 0:
            yield json.dumps({"type": "eval", "epoch": e, "global_step": g, "top1": 1 - 0.5 / e, "top5": 1.0, "val_loss": 1.0 / e})
t1 = os.path.join(s, "trials", "001")
os.makedirs(run)
for f in ("resolved.toml", "summary.json"):
    shutil.copy(os.path.join(t1, f), run)
with open(os.path.join(run, "metrics.jsonl"), "w") as f:
    f.write("\n".join(steps(100000, 1000)) + "\n")
db = sqlite3.connect(os.path.join(s, "sweep.db"))
cols = [r[1] for r in db.execute("PRAGMA table_info(trials)")]
row = dict(zip(cols, db.execute("SELECT * FROM trials WHERE id = 1").fetchone()))
for i in range(2, 101):
    r = dict(row, id=i, lr=0.01 * (1 + i % 10), global_batch=8 * (1 + i // 10 % 10))
    r["params"] = json.dumps({"optim.lr": r["lr"], "dist.batch_per_gpu": r["global_batch"]})
    r["metric"] = 0.5 + 0.4 * random.random()
    r["metrics"] = json.dumps(dict(json.loads(row["metrics"]), top1=r["metric"]))
    r["run_dir"] = os.path.join(s, "trials", "%03d" % i)
    shutil.copytree(t1, r["run_dir"])
    with open(os.path.join(r["run_dir"], "metrics.jsonl"), "w") as f:
        f.write("\n".join(steps(1000, 100)) + "\n")
    db.execute("INSERT INTO trials (%s) VALUES (%s)" % (",".join(cols), ",".join("?" * len(cols))), [r[c] for c in cols])
db.commit()
PY
  expect_rc 0 -- "$vexp" report "$tmp/run" --out "$tmp/run.html"
  data_check "$tmp/run.html" 'assert len(d["charts"]["loss"]["series"][0]["y"]) == 100000'
  browser "$tmp/run.html" "$shots/scale_run.png" 6 15000
  expect_rc 0 -- "$vexp" report "$tmp/s" --out "$tmp/sweep.html"
  data_check "$tmp/sweep.html" '
loss = d["charts"]["loss"]["series"]
assert len(loss) == 100 and len({s["color"] for s in loss}) == 100, len({s["color"] for s in loss})
assert sum(len(s["y"]) for s in loss) == 99 * 1000 + len(loss[0]["y"])
'
  browser "$tmp/sweep.html" "$shots/scale_sweep.png" 5 15000
  ls -l "$tmp/run.html" "$tmp/sweep.html" | awk '{print $5, $NF}'
  finish
  ;;
provenance)
  # provenance.jsonl: one record per invocation (a resumed run appends), shown by the report.
  "$vexp" --version >"$tmp/version" 2>&1 || fail "vexp --version failed"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run" --set run.log_every=1 --stop-after 1
  # the same recipe: VEXP_TEST_EPOCHS now comes from the environment, with the value of its default
  VEXP_TEST_EPOCHS=2 "$vexp" run data/tiny.toml --out "$tmp/run" --set run.log_every=1 --resume >"$tmp/out" 2>&1 \
    || { cat "$tmp/out"; fail "the resumed run failed"; }
  expect_out "resuming"
  $PY - "$tmp/run" "$vexp" "$here" "$src" "$tmp/version" <<'PY' || fail "bad provenance.jsonl"
import hashlib, json, os, re, socket, subprocess, sys
run, vexp, here, src, version = sys.argv[1:6]
sha = lambda f: hashlib.sha256(open(f, "rb").read()).hexdigest()
recs = [json.loads(l) for l in open(run + "/provenance.jsonl")]
assert len(recs) == 2, recs
a, b = recs
assert [r["invocation"] for r in recs] == [1, 2] and a["format"] == "vexp-provenance-1"
assert a["outcome"] == "stopped" and b["outcome"] == "finished", (a["outcome"], b["outcome"])
iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
for r in recs:
    assert iso.match(r["start"]) and iso.match(r["end"]) and r["start"] <= r["end"], (r["start"], r["end"])
assert a["end"] <= b["start"]
# the command line, with --set kept apart from the recipe
assert a["argv"] == [vexp, "run", "data/tiny.toml", "--out", run, "--set", "run.log_every=1", "--stop-after", "1"], a["argv"]
assert b["argv"][-1] == "--resume", b["argv"]
assert a["overrides"] == b["overrides"] == ["run.log_every=1"], a["overrides"]
assert a["cwd"] == here, a["cwd"]
# the recipe: its path made absolute, every file of the extends chain with its SHA-256
assert a["recipe"]["path"] == here + "/data/tiny.toml", a["recipe"]
files = a["recipe"]["files"]
assert len(files) >= 2 and files[0]["path"] == here + "/data/tiny.toml", files
assert os.path.realpath(files[1]["path"]) == os.path.realpath(src + "/recipes/quickstart/tsm_motion.toml"), files
for f in files:
    assert os.path.isabs(f["path"]) and f["sha256"] == sha(f["path"]), f
assert a["recipe"]["hash"] == open(run + "/resolved.toml").readline().split()[-1]
# the interpolated variable: its default first, then the environment's value
va = {v["name"]: v for v in a["variables"]}; vb = {v["name"]: v for v in b["variables"]}
assert va["VEXP_TEST_EPOCHS"] == {"name": "VEXP_TEST_EPOCHS", "value": "2", "environment": None}, va
assert vb["VEXP_TEST_EPOCHS"]["environment"] == "2", vb
# vexp itself: version and build tag as `vexp --version` says, a commit of this repository (or unknown)
ver = open(version).read()
assert ("vexp %s (%s;" % (a["vexp"]["version"], a["vexp"]["build_tag"])) in ver, (ver, a["vexp"])
c = a["vexp"]["commit"]
if c != "unknown":
    assert re.match(r"^[0-9a-f]{40}$", c), c
    assert subprocess.run(["git", "-C", src, "cat-file", "-e", c + "^{commit}"]).returncode == 0, c
# the source tree's state when vexp was built (libs/rundir/source_state.cmake; rundir.source_state)
assert a["vexp"]["tree"] in (("unknown",) if c == "unknown" else ("clean", "dirty")), a["vexp"]
# where and how it ran
assert a["hosts"] == [socket.gethostname()] and a["ranks"] == 1 and a["launcher"] == "none" and a["comm"] == "local", a
assert a["data"]["dataset"] == "synthetic_motion", a["data"]
lib = a["libraries"]
torch_tag = re.search(r"torch=([0-9.]+)", a["vexp"]["build_tag"]).group(1)
assert lib["torch"].startswith(torch_tag + "."), lib
assert "libavcodec.so" in lib["ffmpeg"], lib          # vexp links FFmpeg (libs/media)
assert set(lib) >= {"torch", "cuda", "cudnn", "nccl", "mpi", "ffmpeg"}, lib
for k in ("nccl", "mpi"):
    assert lib[k] == "not loaded" or lib[k].startswith("lib" + k), lib
# every plugin library loaded, with its content hash
assert a["plugins"], a
for p in a["plugins"]:
    assert p["name"] and p["version"] and p["sha256"] == sha(p["file"]), p
assert {"synthetic_motion", "comm_local", "resnet", "temporal_shift"} <= {p["name"] for p in a["plugins"]}, a["plugins"]
PY
  # the report shows it (each invocation, the last record whole)
  expect_rc 0 -- "$vexp" report "$tmp/run"
  $PY - "$tmp/run" <<'PY' || fail "the report does not show the provenance"
import hashlib, html as H, json, sys
run = sys.argv[1]
page = open(run + "/report.html", encoding="utf-8").read()
recs = [json.loads(l) for l in open(run + "/provenance.jsonl")]
assert "<h2>Provenance</h2>" in page or ">Provenance<" in page, "no provenance section"
assert "not recorded in the run directory" not in page
assert 'id="provenance-invocations"' in page and 'id="provenance"' in page
for want in ("stopped", "finished", "VEXP_TEST_EPOCHS", "run.log_every=1", recs[1]["recipe"]["files"][0]["sha256"],
             recs[1]["vexp"]["build_tag"], " --resume", "libraries.torch", "plugins."):
    assert H.escape(want, quote=False) in page, want
PY
  # a run directory of an earlier vexp (no provenance.jsonl) still reports, saying so
  cp -r "$tmp/run" "$tmp/old" && rm "$tmp/old/provenance.jsonl" "$tmp/old/report.html"
  expect_rc 0 -- "$vexp" report "$tmp/old"
  grep -q "not recorded in the run directory (no provenance.jsonl" "$tmp/old/report.html" || fail "old run: no note"
  # a failing invocation completes its record too
  VEXP_TEST_FAULT=nan_loss@step=2 "$vexp" run data/tiny.toml --out "$tmp/div" >"$tmp/out" 2>&1
  [ $? -eq 3 ] || { cat "$tmp/out"; fail "the NaN loss did not diverge"; }
  $PY -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r)==1 and r[0]["outcome"]=="diverged" and r[0]["end"], r' \
    "$tmp/div/provenance.jsonl" || fail "the diverged invocation's record is not complete"
  # data roots are made absolute (a relative root is relative to where the run started)
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 16 --val-clips 8
  # (a list of the same name in the working directory is not the one the dataset reads)
  printf 'decoy 1 0\n' >"$tmp/train_list.txt"
  (cd "$tmp" && VEXP_MOTION_DATA=motion "$vexp" run "$here/data/tiny_video.toml" --out vrun \
     --set data.params.label_map='"classes.txt"') >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the video run failed"; }
  $PY - "$tmp" <<'PY' || fail "the data root, lists or label map are not recorded"
import hashlib, json, os, sys
tmp = sys.argv[1]
r = json.loads(open(tmp + "/vrun/provenance.jsonl").readline())
assert r["data"]["roots"] == {"root": tmp + "/motion"}, r["data"]
assert r["cwd"] == tmp and {"name": "VEXP_MOTION_DATA", "value": "motion", "environment": "motion"} in r["variables"], r
# the files the dataset reads, under its root, with their SHA-256: the lists (the recipe's
# train_list and val_list, relative to the root) and the label map (classes.txt)
sha = lambda f: hashlib.sha256(open(f, "rb").read()).hexdigest()
files = {f["path"]: f["sha256"] for f in r["data"]["files"]}
want = [tmp + "/motion/" + n for n in ("train_list.txt", "val_list.txt", "classes.txt")]
assert sorted(files) == sorted(want), files
for f in want:
    assert files[f] == sha(f), (f, files[f])
PY
  # a provenance.jsonl that is a FIFO: one line naming it, nothing written
  mkdir "$tmp/fifo" && cp "$tmp/run/summary.json" "$tmp/run/metrics.jsonl" "$tmp/fifo/" && mkfifo "$tmp/fifo/provenance.jsonl"
  expect_rc 1 -- timeout 20 "$vexp" report "$tmp/fifo"
  expect_out "$tmp/fifo/provenance.jsonl' is a FIFO, not a regular file"
  [ -e "$tmp/fifo/report.html" ] && fail "a refused report wrote a file"
  exit 0
  ;;
compare_provenance)
  # vexp compare and the comparison report: where two runs' provenance differs.
  tiny_run "$tmp/a" --set optim.lr=0.05
  tiny_run "$tmp/b" --set optim.lr=0.1
  expect_rc 0 -- "$vexp" compare "$tmp/a" "$tmp/b"
  # the table: MACs and parameters as counts ("4.5 M"), never a raw 4.5e+06 or MMACs
  grep -q '^run .* MACs/clip  *params ' "$tmp/out" || { cat "$tmp/out"; fail "compare's table lacks MACs/clip"; }
  $PY - "$tmp/out" "$tmp/a/summary.json" <<'PY' || fail "compare's table does not write MACs and parameters as counts"
import json, re, sys
row = [l for l in open(sys.argv[1]) if l.startswith("tiny (a) ")][0]
s = json.load(open(sys.argv[2]))
def count(v):  # base::count_text
    for scale, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= 1e4 and v >= scale:
            return "%.4g %s" % (v / scale, unit)
    return "%.0f" % v
assert "e+" not in row and (" %s " % count(s["flops_per_clip"])) in row and (" %s " % count(s["params"])) in row, (row, s)
PY
  # the recipe keys that differ first (resolved.toml), one value per run
  expect_out "recipe keys that differ (1 of "
  expect_out "  optim.lr"
  expect_out "    tiny (a): 0.05"
  expect_out "    tiny (b): 0.1"
  expect_out "provenance that differs"
  expect_out "  overrides"
  expect_out "    tiny (a): run.log_every=1 optim.lr=0.05"
  expect_out "    tiny (b): run.log_every=1 optim.lr=0.1"
  expect_out "  argv"
  expect_no_out "  recipe.files"      # the same recipe files
  expect_no_out "  start"             # times always differ: left out
  # A node's key, and the environment: the recipe keys are the comparison report's rows
  # (a node's parameter by its id, never the whole [[model.node]] array); the environment
  # variables that differ are named, a secret one without its value.
  OMP_WAIT_POLICY=PASSIVE VEXP_API_TOKEN=hunter2 tiny_run "$tmp/c" --set optim.lr=0.05 \
    --set model.node.head.dropout=0.3
  expect_rc 0 -- "$vexp" compare "$tmp/a" "$tmp/c"
  expect_out "recipe keys that differ (1 of "
  expect_out "  model.node.head.dropout"
  expect_out "    tiny (a): 0.2"
  expect_out "    tiny (c): 0.3"
  ! grep -qx "  model.node" "$tmp/out" || { cat "$tmp/out"; fail "compare printed the whole [[model.node]] array"; }
  expect_out "  environment.OMP_WAIT_POLICY"
  expect_out "    tiny (a): (absent)"
  expect_out "    tiny (c): PASSIVE"
  expect_out "  environment.VEXP_API_TOKEN"
  expect_out "    tiny (c): (set; not recorded: the name looks secret)"
  expect_no_out "hunter2"
  ! grep -q hunter2 "$tmp/c/provenance.jsonl" || fail "a secret-looking variable's value is in provenance.jsonl"
  expect_rc 0 -- "$vexp" report "$tmp/a" "$tmp/c" --out "$tmp/cmp_ac.html"
  grep -q "model.node.head.dropout" "$tmp/cmp_ac.html" || fail "the comparison report lacks the node's key"
  grep -q "environment.OMP_WAIT_POLICY" "$tmp/cmp_ac.html" || fail "the comparison report lacks the environment"
  ! grep -q hunter2 "$tmp/cmp_ac.html" || fail "the comparison report shows a secret-looking variable's value"
  expect_rc 0 -- "$vexp" compare "$tmp/a" "$tmp/a"
  expect_out "provenance: the same in every run"
  expect_out "recipe: the same in every run"
  expect_rc 0 -- "$vexp" compare --json "$tmp/a" "$tmp/b"
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[1]["provenance"]["overrides"]==["run.log_every=1","optim.lr=0.1"], r' "$tmp/out" \
    || fail "compare --json lacks the provenance"
  # --no-provenance: the table alone, its rows the last lines (tools/demo.sh ends with it)
  expect_rc 0 -- "$vexp" compare --no-provenance "$tmp/a" "$tmp/b"
  expect_no_out "provenance"
  expect_no_out "recipe keys"
  [ "$(wc -l <"$tmp/out")" -eq 3 ] && grep -q '^run ' "$tmp/out" && tail -n 1 "$tmp/out" | grep -q '^tiny (b) ' \
    || { cat "$tmp/out"; fail "compare --no-provenance printed more than its table"; }
  expect_rc 0 -- "$vexp" compare --no-provenance --json "$tmp/a" "$tmp/b"
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r)==2 and all("provenance" not in x and x["top1"] is not None for x in r), r' \
    "$tmp/out" || fail "compare --no-provenance --json still has the provenance"
  # ... and does not read provenance.jsonl (a FIFO there would stop the plain compare)
  mkdir "$tmp/fifo" && cp "$tmp/a/summary.json" "$tmp/fifo/" && mkfifo "$tmp/fifo/provenance.jsonl"
  expect_rc 1 -- timeout 20 "$vexp" compare "$tmp/fifo" "$tmp/b"
  expect_out "provenance.jsonl' is a FIFO, not a regular file"
  expect_rc 0 -- timeout 20 "$vexp" compare --no-provenance "$tmp/fifo" "$tmp/b"
  expect_rc 0 -- "$vexp" compare --help
  expect_out "--no-provenance"
  # a run of an earlier vexp (no provenance.jsonl) against a new one
  cp -r "$tmp/a" "$tmp/old" && rm "$tmp/old/provenance.jsonl"
  expect_rc 0 -- "$vexp" compare "$tmp/old" "$tmp/b"
  expect_out "(not recorded)"
  expect_rc 0 -- "$vexp" report "$tmp/a" "$tmp/b" --out "$tmp/cmp.html"
  grep -q 'id="provenance-differences"' "$tmp/cmp.html" || fail "the comparison report has no provenance differences"
  grep -q "optim.lr=0.05" "$tmp/cmp.html" || fail "the comparison report does not show the overrides"
  exit 0
  ;;
*)
  fail "unknown test $name"
  ;;
esac
