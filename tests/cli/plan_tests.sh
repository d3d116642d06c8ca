#!/usr/bin/env bash
# End-to-end tests of vexp plan and cluster files (tests/cli/data/plan_cluster.toml, made up).
# Usage: plan_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
CHECK_CRASH_EVERY_RUN=1
source "$src/tests/support/setup.sh" plan
quick=$src/recipes/quickstart/tsm_motion.toml
tsn=$src/recipes/quickstart/tsn_motion.toml
cluster=$here/data/plan_cluster.toml

case "$name" in
table)
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,4,8
  expect_out "model tsm_resnet18: compute measured (made up for the tests [threads not given, busy_ranks 1])"
  expect_out "GPUs nodes  global"
  expect_out "knee: "; expect_out "bucket: "; expect_out "frames: "; expect_out "videos: "
  [ "$(grep -cE '^ +[1248] +[1-4] +[0-9]+ +1 ' "$tmp/out")" = 4 ] || { cat "$tmp/out"; fail "expected 4 rows"; }
  # Every row's profile was measured as planned: the validated tolerance, said once.
  expect_out "step times ±10 % on a profile measured as planned (the tolerance tools/plan/validate.py checks, docs/planning.md); every row here is"
  # The default GPU count is the recipe's dist.world_size.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --set dist.world_size=4
  [ "$(grep -cE '^ +4 +2 +128 ' "$tmp/out")" = 1 ] || { cat "$tmp/out"; fail "expected one row of 4 GPUs"; }
  ;;
json)
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,8 --json
  $PY - "$tmp/out" "$cluster" <<'PYEOF' || fail "JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["cluster"] == sys.argv[2] and j["cluster_name"] == "test cluster", j
[p] = j["plans"]
for k in ["recipe", "model", "profile", "grad_bytes", "buckets", "bucket_mb", "layout", "threads_per_gpu", "rows"]:
    assert k in p, k
assert p["model"] == "tsm_resnet18" and p["profile"] == "measured" and p["layout"] == "frames", p
assert p["threads_per_gpu"] == 4 and p["bucket_mb"] == 25 and p["buckets"] >= 1, p
keys = ["gpus", "nodes", "ranks", "global_batch", "micro_steps", "data_ms", "compute_ms", "forward_ms", "backward_ms",
        "optimizer_ms", "comm_ms", "exposed_comm_ms", "exposed_data_ms", "step_ms", "clips_per_s", "efficiency",
        "epoch_s", "total_s", "steps_per_epoch", "bottleneck"]
rows = p["rows"]
assert [r["gpus"] for r in rows] == [1, 2, 8]
for r in rows:
    for k in keys: assert k in r, k
    assert abs(r["step_ms"] - (r["compute_ms"] + r["exposed_comm_ms"] + r["exposed_data_ms"])) < 1e-9, r
    assert abs(r["clips_per_s"] - r["global_batch"] / r["step_ms"] * 1e3) < 1e-6, r
    assert r["bottleneck"] in ("compute", "communication", "data"), r
    # The profile: 100 + 200 ms per micro-step of 32 clips, 5 ms optimizer.
    assert r["forward_ms"] == 100 and r["backward_ms"] == 200 and r["compute_ms"] == 305, r
    assert abs(r["steps_per_epoch"] - 4000 / r["global_batch"]) < 1e-9, r
    assert abs(r["epoch_s"] - r["steps_per_epoch"] * r["step_ms"] / 1e3) < 1e-6, r
    # Its stated range: +-10 %, nothing it could not know.
    assert abs(r["step_ms_low"] - 0.9 * r["step_ms"]) < 1e-9 and abs(r["step_ms_high"] - 1.1 * r["step_ms"]) < 1e-9, r
    assert r["unsure"] == [], r
assert rows[0]["efficiency"] == 1 and rows[0]["comm_ms"] == 0 and rows[0]["nodes"] == 1
assert rows[1]["comm_ms"] > 0 and rows[1]["nodes"] == 1 and rows[2]["nodes"] == 4
assert rows[2]["efficiency"] < rows[1]["efficiency"] <= 1
assert rows[2]["global_batch"] == 8 * 32
assert all(r["bucket_overhead_ms"] == 0 for r in rows), rows  # no [reducer]
PYEOF
  # With [reducer]: each bucket lengthens the backward of a row with more than one rank.
  { cat "$cluster"; printf '\n[reducer]\nper_bucket_ms = 0.5\nsource = "made up"\n'; } >"$tmp/reducer.toml"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/reducer.toml" --gpus 1,2 --bucket-mb 0.05 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "[reducer]"
import json, sys
p = json.load(open(sys.argv[1]))["plans"][0]
one, two = p["rows"]
assert p["buckets"] > 1 and one["bucket_overhead_ms"] == 0 and one["backward_ms"] == 200, (p["buckets"], one)
assert abs(two["bucket_overhead_ms"] - 0.5 * p["buckets"]) < 1e-9 and abs(two["backward_ms"] - 200 - 0.5 * p["buckets"]) < 1e-9, two
assert (one["per_bucket_ms"], one["per_bucket_source"]) == (0, "") and two["per_bucket_ms"] == 0.5, (one, two)
assert two["per_bucket_source"] == "[reducer]: made up", two
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/reducer.toml" --gpus 1,2
  expect_out "; each bucket adds 0.5 ms to the backward on more than one rank ([reducer]: made up)"
  # A profile's own per_bucket_ms (--measure-local measures each recipe's) comes first.
  sed 's|^optimizer_ms = 5.0$|&\nper_bucket_ms = 2\nper_bucket_source = "its own"|' "$tmp/reducer.toml" >"$tmp/own.toml"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/own.toml" --gpus 1,2 --bucket-mb 0.05 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "a profile's per_bucket_ms"
import json, sys
p = json.load(open(sys.argv[1]))["plans"][0]
one, two = p["rows"]
assert one["bucket_overhead_ms"] == 0 and abs(two["bucket_overhead_ms"] - 2 * p["buckets"]) < 1e-9, two
assert (two["per_bucket_ms"], two["per_bucket_source"]) == (2, "its own"), two
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/own.toml" --gpus 1,2
  expect_out "; each bucket adds 2 ms to the backward on more than one rank (its own)"
  ;;
several)
  expect_rc 0 -- "$vexp" plan "$quick" "$tsn" --cluster "$cluster" --gpus 1,8 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "two plans"
import json, sys
j = json.load(open(sys.argv[1]))
a, b = j["plans"]
assert a["model"] == "tsm_resnet18" and a["profile"] == "measured", a["model"]
assert b["model"] == "resnet18" and b["profile"] == "derived", b["model"]
assert a["grad_bytes"] == b["grad_bytes"]  # the shift has no parameters
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" "$tsn" --cluster "$cluster" --gpus 1,8
  expect_out "vexp plan: $quick"; expect_out "vexp plan: $tsn"; expect_out "model resnet18: compute derived"
  ;;
options)
  # --layout videos is slower to decode here (2 clips/s per core): data binds.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 8 --layout videos --json
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["plans"][0]["rows"][0]; assert r["bottleneck"]=="data" and r["exposed_data_ms"]>0, r' "$tmp/out" || fail "videos"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 8 --layout videos --threads-per-gpu 100 --json
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"][0]; assert p["threads_per_gpu"]==100 and p["rows"][0]["exposed_data_ms"]==0, p' "$tmp/out" || fail "threads"
  # --bucket-mb changes the recipe's buckets.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 8 --bucket-mb 0.05 --json
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"][0]; assert p["bucket_mb"]==0.05 and p["buckets"]>1, p' "$tmp/out" || fail "bucket"
  # --fixed-batch: dist.world_size 8 emulated on 1, 2, 4, 8 GPUs; 3 does not divide it.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --set dist.world_size=8 --gpus 1,2,4,8 --fixed-batch --json
  $PY -c 'import json,sys; rows=json.load(open(sys.argv[1]))["plans"][0]["rows"]; assert [r["micro_steps"] for r in rows]==[8,4,2,1] and {r["global_batch"] for r in rows}=={256}, rows' "$tmp/out" || fail "fixed batch"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --set dist.world_size=8 --gpus 3 --fixed-batch
  expect_out "not a multiple of the 3 ranks"
  # More GPUs than the cluster has: the sentence names the ways out with counts that fit,
  # and each of them plans.
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 16
  expect_out "16 GPUs: cluster 'test cluster' has 4 nodes x 2 = 8; give --gpus N,... up to 8 (e.g. --gpus 1,2,4,8)"
  expect_no_out "--fixed-batch"   # the quickstart's world (1 GPU) fits: weak scaling is the way
  # the paper's 1,536-GPU recipe with no --gpus: its world does not fit
  k1536=$src/recipes/tsm_k400_1536.toml
  expect_rc 2 -- "$vexp" plan "$k1536" --cluster "$cluster"
  expect_out "tsm_k400_1536.toml: 1536 GPUs (the recipe's dist.world_size; no --gpus given): cluster 'test cluster' has 4 nodes x 2 = 8; give --gpus N,... up to 8 (e.g. --gpus 1,2,4,8), or --fixed-batch --gpus 8 to emulate the recipe's world of 1536 GPUs (its global batch of 12288) on fewer"
  expect_rc 0 -- "$vexp" plan "$k1536" --cluster "$cluster" --gpus 1,2,4,8
  # (stdout alone: the recipe warns on stderr that its Kinetics data is not here)
  "$vexp" plan "$k1536" --cluster "$cluster" --fixed-batch --gpus 8 --json >"$tmp/fixed.json" 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "--fixed-batch --gpus 8 failed"; }
  $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["plans"][0]["rows"]; assert [(x["gpus"], x["global_batch"], x["micro_steps"]) for x in r]==[(8,12288,192)], r' \
    "$tmp/fixed.json" || fail "--fixed-batch --gpus 8 does not emulate the 1,536 GPUs"
  # with --fixed-batch, counts that divide the recipe's world (12 of the 1,536 does not fit 8)
  expect_rc 2 -- "$vexp" plan "$k1536" --cluster "$cluster" --fixed-batch --gpus 12
  expect_out "12 GPUs: cluster 'test cluster' has 4 nodes x 2 = 8; give --gpus N,... up to 8 that divide the recipe's world of 1536 (--fixed-batch), e.g. --gpus 1,2,4,8"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,x
  expect_out "--gpus '1,x'"
  expect_rc 2 -- "$vexp" plan "$quick"
  expect_out "needs --cluster"
  ;;
plot)
  expect_rc 0 -- "$vexp" plan "$quick" "$tsn" --cluster "$cluster" --gpus 1,2,4,8 --plot "$tmp/plan.png"
  $PY - "$tmp/plan.png" <<'PYEOF' || fail "not a PNG"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", b[:8]
w, h = struct.unpack(">II", b[16:24])
assert w == 1040 and h == 780, (w, h)  # two recipes side by side
PYEOF
  mkdir "$tmp/dir.png"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --plot "$tmp/dir.png"
  expect_out "is not a regular file"
  ;;
noise_value)
  # --noise-from CLIPS: the time-to-accuracy block, its JSON recomputed from the rows.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,4,8 --noise-from 100
  expect_out "time to accuracy: B_noise 100 clips (--noise-from 100); reference: the recipe's global batch 32 trained 3 epochs (12,000 clips)"
  grep -qE '^ +4 +128 +57\.9 .*critical batch, over the epoch budget$' "$tmp/out" || { cat "$tmp/out"; fail "the critical row"; }
  grep -qE '^ +1 +32 +100\.0 +375 +12,000 ' "$tmp/out" || { cat "$tmp/out"; fail "the reference row"; }
  expect_out "epoch budget (3 epochs, +10%): suffices up to a global batch of 45 clips"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,4,8 --noise-from 100 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "time_to_accuracy JSON"
import json, math, sys
[p] = json.load(open(sys.argv[1]))["plans"]
t = p["time_to_accuracy"]
bn, b0 = 100.0, 32
assert t["noise_scale"] == bn and t["noise_from"] == "--noise-from 100", t
assert t["reference_batch"] == b0 and t["train_size"] == 4000 and t["reference_clips"] == 12000, t
assert t["budget_epochs"] == 3 and t["budget_tolerance"] == 0.1, t
assert abs(t["budget_max_batch"] - (1.1 * (bn + b0) - bn)) < 1e-9, t
assert [r["gpus"] for r in t["rows"]] == [r["gpus"] for r in p["rows"]] == [1, 2, 4, 8]
times = []
for r, x in zip(p["rows"], t["rows"]):
    b = r["global_batch"]
    assert x["global_batch"] == b
    eff = (bn + b0) / (bn + b)
    assert abs(x["statistical_efficiency"] - eff) < 1e-12, x
    clips = 12000 / eff
    assert abs(x["clips"] - clips) < 1e-6 and abs(x["steps"] - clips / b) < 1e-9, x
    assert abs(x["epochs"] - clips / 4000) < 1e-12, x
    assert abs(x["time_s"] - clips / b * r["step_ms"] / 1e3) < 1e-9, x
    assert abs(x["gpu_hours"] - r["gpus"] * x["time_s"] / 3600) < 1e-12, x
    assert abs(x["goodput"] - r["clips_per_s"] * eff) < 1e-9, x
    assert x["within_budget"] == (clips / 4000 <= 3 * 1.1), x
    times.append(x["time_s"])
# McCandlish's hyperbola through every row: (S/S_min - 1)(E/E_min - 1) = 1.
e_min = 12000 / (1 + b0 / bn); s_min = e_min / bn
for x in t["rows"]:
    assert abs((x["steps"] / s_min - 1) * (x["clips"] / e_min - 1) - 1) < 1e-9, x
crit = min(t["rows"], key=lambda x: abs(math.log(x["global_batch"] / bn)))
assert t["critical_gpus"] == crit["gpus"] == 4, t["critical_gpus"]
assert t["fastest_gpus"] == t["rows"][times.index(min(times))]["gpus"], t
PYEOF
  # The plot gains a third panel: the time to the recipe's progress.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,4,8 --noise-from 100 --plot "$tmp/plan.png"
  $PY - "$tmp/plan.png" <<'PYEOF' || fail "not a PNG of three panels"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", b[:8]
assert struct.unpack(">II", b[16:24]) == (520, 1170), struct.unpack(">II", b[16:24])
PYEOF
  # --fixed-batch: every row has the reference batch, so the same efficiency.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,2,4 --set dist.world_size=4 --fixed-batch --noise-from 100
  expect_out "(--fixed-batch: every row trains the recipe's global batch; only the step time differs)"
  [ "$(grep -cE '^ +[124] +128 +100\.0 ' "$tmp/out")" = 3 ] || { cat "$tmp/out"; fail "fixed batch rows"; }
  ;;
noise_run)
  # --noise-from RUN_DIR: the last smoothed B_noise of a run that measured it (the tiny
  # recipe on 2 emulated GPUs), the same figure summary.json holds.
  cat >"$tmp/noise.toml" <<TOML
extends = "$here/data/tiny.toml"
[run]
name = "tiny_noise"
noise_scale_every = 1
[dist]
world_size = 2
batch_per_gpu = 4
TOML
  expect_rc 0 -- "$vexp" run "$tmp/noise.toml" --out "$tmp/run"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,8 --noise-from "$tmp/run" --json
  $PY - "$tmp/out" "$tmp/run" <<'PYEOF' || fail "noise from the run"
import json, sys
[p] = json.load(open(sys.argv[1]))["plans"]
summary = json.load(open(sys.argv[2] + "/summary.json"))
steps = [j for j in map(json.loads, open(sys.argv[2] + "/metrics.jsonl")) if j["type"] == "step" and "noise_big_batch" in j]
t = p["time_to_accuracy"]
assert t["noise_scale"] == summary["noise_scale"] > 0, (t["noise_scale"], summary.get("noise_scale"))
assert t["noise_from"] == "%s (last smoothed value, step %d, global batch 8)" % (sys.argv[2], steps[-1]["global_step"]), t["noise_from"]
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,8 --noise-from "$tmp/run"
  expect_out "time to accuracy: B_noise "
  expect_out "($tmp/run (last smoothed value, step "
  ;;
noise_errors)
  # Each bad --noise-from: one line, exit 2, nothing planned.
  plan_noise() { expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --noise-from "$@"; }
  for bad in 0 -3 nan inf 1e300 abc ""; do
    plan_noise "$bad"
    [ "$(wc -l <"$tmp/out")" = 1 ] || { cat "$tmp/out"; fail "--noise-from '$bad': not one line"; }
    ! grep -q "time to accuracy" "$tmp/out" || fail "--noise-from '$bad' planned"
  done
  plan_noise 0; expect_out "--noise-from '0': a noise scale is a positive number of clips, at most 1e15"
  plan_noise abc; expect_out "--noise-from 'abc': no such run folder, and not a number of clips"
  mkdir "$tmp/empty"; plan_noise "$tmp/empty"; expect_out "--noise-from '$tmp/empty' is not a run folder"
  : >"$tmp/file"; plan_noise "$tmp/file"; expect_out "--noise-from '$tmp/file' is not a folder"
  # A run folder that measured no noise scale, and one whose last B_noise is negative
  # (|G|^2 estimated below 0 early in training).
  mkdir "$tmp/plain" "$tmp/neg"
  echo '{"type": "step", "global_step": 1, "loss": 1.0}' >"$tmp/plain/metrics.jsonl"
  echo '{"type": "step", "global_step": 2, "noise_big_batch": 8, "noise_scale": -5.0}' >"$tmp/neg/metrics.jsonl"
  plan_noise "$tmp/plain"; expect_out "the run measured no noise scale (train with run.noise_scale_every = N"
  plan_noise "$tmp/neg"; expect_out "the run's last noise scale is -5"
  mkdir "$tmp/sweep"; : >"$tmp/sweep/sweep.db"
  plan_noise "$tmp/sweep"; expect_out "is a sweep folder"
  # A folder named like a number is the folder.
  (cd "$tmp" && mkdir 64 && expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --noise-from 64) || fail "64"
  expect_out "--noise-from '64' is not a run folder"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --noise-from 100
  expect_out "takes no --cluster, --gpus, --json, --plot, --tune or --noise-from"
  ;;
tune)
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 1,8 --layout videos --tune "$tmp/tuned.toml"
  expect_out "overlay: $tmp/tuned.toml"
  grep -q '^extends = ".*recipes/quickstart/tsm_motion.toml"' "$tmp/tuned.toml" || { cat "$tmp/tuned.toml"; fail "extends"; }
  grep -q '^workers = ' "$tmp/tuned.toml" || { cat "$tmp/tuned.toml"; fail "no data.workers"; }
  expect_rc 0 -- "$vexp" check "$tmp/tuned.toml"
  expect_out "ok ("
  mkdir "$tmp/dir.toml"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --tune "$tmp/dir.toml"
  expect_out "is not a regular file"
  expect_rc 2 -- "$vexp" plan "$quick" "$tsn" --cluster "$cluster" --tune "$tmp/two.toml"
  expect_out "give one RECIPE"
  ;;
tune_schema)
  # Every overlay --tune writes passes vexp check (issue #36 item 7.3): on a large cluster
  # reading videos the decode threads needed per GPU (thousands) are past data.workers'
  # range (at most 256); the overlay holds 256 and says so, as does stderr.
  sed 's/^nodes = 4$/nodes = 4096/' "$cluster" >"$tmp/big.toml"
  n=0
  for c in "$cluster" "$tmp/big.toml" "$src/clusters/summit.toml" "$src/clusters/slurm_example.toml"; do
    for layout in videos frames; do
      for gpus in 1,8 8,64; do
        [ "$c" = "$cluster" ] && [ "$gpus" != 1,8 ] && continue
        rm -f "$tmp/t.toml"
        expect_rc 0 -- "$vexp" plan "$quick" --cluster "$c" --gpus "$gpus" --layout "$layout" --tune "$tmp/t.toml"
        cp "$tmp/out" "$tmp/plan_out"
        expect_rc 0 -- "$vexp" check "$tmp/t.toml"
        w=$(sed -n 's/^workers = //p' "$tmp/t.toml")
        if [ -n "$w" ] && [ "$w" -gt 256 ]; then cat "$tmp/t.toml"; fail "workers = $w"; fi
        if grep -q "data.workers is at most 256" "$tmp/t.toml"; then
          n=$((n + 1))
          [ "$w" = 256 ] || { cat "$tmp/t.toml"; fail "a clamped overlay without workers = 256"; }
          grep -q "vexp: warning: --tune '$tmp/t.toml': decode threads per GPU for $layout: [0-9]* needed, but data.workers is at most 256: 256 written" "$tmp/plan_out" \
            || { cat "$tmp/plan_out"; fail "the clamp was not said on stderr"; }
        fi
      done
    done
  done
  [ "$n" -ge 2 ] || fail "expected overlays clamped to data.workers' range, found $n"
  ;;
bad_cluster)
  sed 's/^rails = 2$/rails = 0/' "$cluster" > "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$tmp/bad.toml"
  expect_out "$tmp/bad.toml:37:1: error: 'rails' in [links.inter]"
  [ "$(wc -l < "$tmp/out")" = 1 ] || { cat "$tmp/out"; fail "expected one line"; }
  expect_rc 2 -- "$vexp" check "$tmp/bad.toml"
  expect_out "$tmp/bad.toml:37:1: error: 'rails' in [links.inter]"
  sed 's/^bandwidth_GBps = 0.5$/bandwith_GBps = 0.5/' "$cluster" > "$tmp/typo.toml"
  expect_rc 2 -- "$vexp" check "$tmp/typo.toml"
  expect_out "$tmp/typo.toml:31:1: error: unknown key 'bandwith_GBps' in [links.intra] (did you mean 'bandwidth_GBps'?)"
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$tmp/missing.toml"
  expect_out "missing.toml"
  # No profile and no [gpu.derive] for TSN's model.
  sed '/^\[gpu.derive\]/,/^$/d' "$cluster" > "$tmp/noderive.toml"
  expect_rc 2 -- "$vexp" plan "$tsn" --cluster "$tmp/noderive.toml"
  expect_out "has no [[gpu.profile]] for model 'resnet18' at 8 frames, size 32, fp32 (none for that model) and no [gpu.derive]"
  # the fix: the table that would match, [gpu.derive], or a measured cluster file
  expect_out "add to '$tmp/noderive.toml' a [[gpu.profile]] with model = \"resnet18\", frames = 8, size = 32, precision = \"fp32\" and its measured times"
  expect_out "or a [gpu.derive] table (train_macs_per_s, optimizer_ms_per_mparam, source)"
  expect_out 'or measure this machine into a cluster file with `vexp plan --measure-local RECIPE --out FILE.toml`'
  # the profiles the file has for the model, when their clip differs
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$tmp/noderive.toml" --set data.params.frames=4
  expect_out "has no [[gpu.profile]] for model 'tsm_resnet18' at 4 frames, size 32, fp32 (its profiles of 'tsm_resnet18': 8 frames, size 32, fp32)"
  # the table it names, added, is what the planner matches (plain text: one profile)
  sed -n '/^\[\[gpu.profile\]\]/,/^$/p' "$cluster" | sed '0,/^model = .*/s//model = "resnet18"/' >"$tmp/profile.toml"
  cat "$tmp/noderive.toml" "$tmp/profile.toml" >"$tmp/added.toml"
  expect_rc 0 -- "$vexp" plan "$tsn" --cluster "$tmp/added.toml"
  ;;
busy_ranks)
  # A second TSM profile measured with 2 ranks busy on the node (a CPU node) and one at
  # 2 threads: the 1-GPU row takes the alone profile, the 2- and 8-GPU rows (2 ranks per
  # node) the busy one; run.threads = 2 takes the 2-thread one (closest in busy_ranks).
  $PY - "$cluster" "$tmp/busy.toml" <<'PYEOF'
import sys
text = open(sys.argv[1]).read()
one = text[text.index("[[gpu.profile]]"):text.index("# Everything else")]
busy = one.replace("forward_ms = 100.0", "forward_ms = 250.0").replace("source = ", "busy_ranks = 2\nsource = ")
two = one.replace("forward_ms = 100.0", "forward_ms = 60.0").replace("source = ", "threads = 2\nsource = ")
one = one.replace("source = ", "threads = 1\nsource = ")
open(sys.argv[2], "w").write(text.replace(text[text.index("[[gpu.profile]]"):text.index("# Everything else")],
                                          busy + one + two))
PYEOF
  expect_rc 0 -- "$vexp" check "$tmp/busy.toml"
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/busy.toml" --gpus 1,2,8 --set run.threads=1 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "profile per GPU count"
import json, sys
p = json.loads(open(sys.argv[1]).read())["plans"][0]
rows = p["rows"]
assert [r["forward_ms"] for r in rows] == [100, 250, 250], rows
assert p["profile_source"].endswith("[threads 1, busy_ranks 1]"), p["profile_source"]
assert rows[1]["profile_source"].endswith("[threads not given, busy_ranks 2]"), rows[1]
assert p["compute_threads"] == 1
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/busy.toml" --gpus 1,2 --set run.threads=2
  expect_out "compute measured (made up for the tests [threads 2, busy_ranks 1])"
  expect_out "from 2 GPU(s): made up for the tests [threads not given, busy_ranks 2]"
  # 3 threads: no such profile; the 2-thread one is the closest, and with the 1-thread
  # one Amdahl's law extrapolates (forward 100 at 1 thread, 60 at 2: serial share 1/3,
  # t(3) = 60 (1/3 + 2/3 x 2/3) = 46.67; backward 200 at both: 200); the range goes from
  # a linear speed-up from 2 threads (2/3 of the 2-thread compute) to none.
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/busy.toml" --gpus 1 --set run.threads=3 --json
  $PY - "$tmp/out" <<'PYEOF' || fail "the range of a closest profile"
import json, sys
[r] = json.loads(open(sys.argv[1]).read())["plans"][0]["rows"]
assert abs(r["forward_ms"] - 140 / 3) < 1e-9 and r["backward_ms"] == 200, r
assert r["unsure"] == ["no profile at 3 compute thread(s): Amdahl's law through the 2- and 1-thread ones, extrapolated"], r
# up to the 2-thread profile's own forward + backward (260 ms) over the curve's, every phase
assert abs(r["step_ms_high"] - 1.1 * r["compute_ms"] * 260 / (r["forward_ms"] + r["backward_ms"])) < 1e-9, r
# (one rank: no comm; at 2/3 of the compute, the loader's 200 ms per step binds instead)
assert r["data_ms"] == 200 and abs(r["step_ms_low"] - 0.9 * 200) < 1e-6, r  # the loader binds first
PYEOF
  expect_rc 0 -- "$vexp" plan "$quick" --cluster "$tmp/busy.toml" --gpus 1 --set run.threads=3
  expect_out "wider where it was not:"
  expect_out "  1 GPU(s): "; expect_out " ms: no profile at 3 compute thread(s): Amdahl's law through the 2- and 1-thread ones, extrapolated"
  ;;
check_cluster)
  expect_rc 0 -- "$vexp" check "$cluster"
  expect_out "$cluster: ok (cluster 'test cluster': 4 node(s) x 2 GPU(s) (Test GPU), 1 compute profile(s) + derived from MACs"
  ;;
*) fail "unknown test" ;;
esac
echo "PASS [$name]"
