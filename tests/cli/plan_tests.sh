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
assert rows[0]["efficiency"] == 1 and rows[0]["comm_ms"] == 0 and rows[0]["nodes"] == 1
assert rows[1]["comm_ms"] > 0 and rows[1]["nodes"] == 1 and rows[2]["nodes"] == 4
assert rows[2]["efficiency"] < rows[1]["efficiency"] <= 1
assert rows[2]["global_batch"] == 8 * 32
PYEOF
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
  # More GPUs than the cluster has.
  expect_rc 2 -- "$vexp" plan "$quick" --cluster "$cluster" --gpus 16
  expect_out "16 GPUs: cluster 'test cluster' has 4 nodes x 2 = 8; plan at fewer with --gpus (e.g. --gpus 1,8), keeping the recipe's global batch with --fixed-batch"
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
  expect_out "has no [[gpu.profile]] for model 'resnet18' at 8 frames, size 32, fp32"
  expect_out 'measure one on this machine with `vexp plan RECIPE --measure-local OUT.toml`'
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
  ;;
check_cluster)
  expect_rc 0 -- "$vexp" check "$cluster"
  expect_out "$cluster: ok (cluster 'test cluster': 4 node(s) x 2 GPU(s) (Test GPU), 1 compute profile(s) + derived from MACs"
  ;;
*) fail "unknown test" ;;
esac
echo "PASS [$name]"
