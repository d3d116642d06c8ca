#!/usr/bin/env bash
# End-to-end tests of `vexp plan --measure-local` and the shipped cluster files.
# Usage: plan_measure_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
CHECK_CRASH_EVERY_RUN=1
source "$src/tests/support/setup.sh" plan
quick=$src/recipes/quickstart/tsm_motion.toml
# The smallest measurement: one step of one recipe, two small allreduces, a 4 MiB file.
small=(--measure-steps 1 --measure-warmup 0 --allreduce-mb 0.01,32 --storage-mb 4 --ranks 2 --measure-threads 1)

case "$name" in
measure_local)
  mkdir -p "$tmp/c"
  # (the load average given, as this test's machine's is not known: it is recorded)
  expect_rc 0 -- env VEXP_TEST_LOADAVG="1.75 1.5 1.25 2/300 4242" "$vexp" plan --measure-local "$quick" \
    --out "$tmp/c/here.toml" "${small[@]}" --measure-rounds 2
  expect_out "alone; round 2 of 2)"
  expect_out "1 node x 2 ranks"
  # the two bucket sizes twice a round, 25, 0.05, 0.05, 25 MiB (a drift reaches both alike)
  order=$(grep -o 'ranks training together, [0-9.]* MiB buckets' "$tmp/out" | awk '{print $4}' | tr '\n' ' ')
  [ "$order" = "25.0 0.05 0.05 25.0 25.0 0.05 0.05 25.0 " ] || fail "the bucket sizes were measured in the order '$order'"
  [ -f "$tmp/c/here.toml" ] || fail "no cluster file"
  $PY - "$tmp/c" <<'PYEOF' || fail "the cluster file is not what --measure-local should write"
import json, os, re, statistics, sys, tomllib
d = sys.argv[1]
c = tomllib.load(open(os.path.join(d, "here.toml"), "rb"))
assert c["cluster"]["nodes"] == 1 and c["cluster"]["gpus_per_node"] == 2, c["cluster"]
assert "measured by vexp plan --measure-local" in c["cluster"]["source"]
# the command to remake it: every option that differs from its default
assert "--ranks 2 --measure-threads 1 --measure-steps 1 --measure-warmup 0 --measure-rounds 2 --allreduce-mb 0.01,32 " \
       "--storage-mb 4" in c["cluster"]["source"], c["cluster"]["source"]
# the load average when the measurement began, in the first comment and every source
cores = len(os.sched_getaffinity(0))
load = "load average 1.75 over %d core(s) at the start%s" % (cores, ", busy: slower than idle" if 1.75 > 0.5 * cores else "")
first = open(os.path.join(d, "here.toml")).readline()
assert first.startswith("# This machine, measured by") and load in first, (first, load)
for src in [c["cluster"]["source"], c["links"]["intra"]["source"], c["cpu"]["source"], c["storage"]["source"]] + \
        [p["source"] for p in c["gpu"]["profile"]]:
    assert load in src, (src, load)
# One profile measured alone, one with both ranks computing at once (mpirun).
(p, b) = c["gpu"]["profile"]
assert p["busy_ranks"] == 1 and b["busy_ranks"] == 2, (p, b)
# the load it was measured under, for the plan's range (Compute::low)
assert p["background_load"] == 1.75 and b["background_load"] == 1.75, (p, b)
t = json.load(open(os.path.join(d, p["from"])))
assert t["clip"] == [8, 1, 32, 32] and t["threads"] == 1 and t["phases"]["backward"]["median_ms"] > 0, t
# --measure-rounds 2: each profile measured twice, interleaved; the samples of both rounds pooled
assert t["rounds"] == 2 and len(t["round_step_medians_ms"]) == 2 and len(t["phases"]["step"]["samples_ms"]) == 2, t
assert "in each of 2 interleaved rounds (step medians " in p["source"], p["source"]
tb = json.load(open(os.path.join(d, b["from"])))
assert tb["busy_ranks"] == 2 and tb["rounds"] == 2 and len(tb["per_rank"]) == 4 and tb["threads"] == 1, tb["command"]
# Lockstep: at each step of each round, the phases of the rank whose compute took longest
# (a synchronous step waits for it); per_rank holds round 1's two ranks, then round 2's.
n = len(tb["per_rank"][0]["phases"]["forward"]["samples_ms"])
assert len(tb["phases"]["forward"]["samples_ms"]) == 2 * n and tb["phases"]["forward"]["median_ms"] > 0, tb["phases"]
want, ratios = {ph: [] for ph in tb["phases"]}, []
for rnd in range(2):
    ranks = tb["per_rank"][2 * rnd:2 * rnd + 2]
    for i in range(n):
        cost = [sum(r["phases"][ph]["samples_ms"][i] for ph in ("forward", "backward", "optimizer")) for r in ranks]
        slow = ranks[cost.index(max(cost))]
        for ph in want:
            want[ph].append(slow["phases"][ph]["samples_ms"][i])
        ratios.append(slow["phases"]["backward"]["samples_ms"][i] / slow["phases"]["forward"]["samples_ms"][i])
for ph in want:
    assert sorted(want[ph]) == tb["phases"][ph]["samples_ms"], (ph, want[ph], tb["phases"][ph])
# each step's backward over its own forward, the slowest rank's, in the rounds' order
assert tb["backward_over_forward"] == ratios, (tb["backward_over_forward"], ratios)
assert [sum(c) for c in tb["slowest_rank_steps"]] == [n, n], tb["slowest_rank_steps"]
# the cost of a bucket: each recipe trained by both ranks together at 25 and 0.05 MiB, in
# the rounds (its own per_bucket_ms in its profiles; [reducer]: the first recipe's)
rd = c["reducer"]
assert rd["per_bucket_ms"] >= 0 and "25 and 0.05 MiB buckets (here/buckets_tsm_motion.json)" in rd["source"] and load in rd["source"], rd
bk = json.load(open(os.path.join(d, "here", "buckets_tsm_motion.json")))
assert [r["bucket_mb"] for r in bk["runs"]] == [25, 0.05] and bk["runs"][0]["buckets"] == 1 and bk["rounds"] == 2, bk
assert bk["runs"][1]["buckets"] > 1 and bk["runs"][1]["ranks"] == 2 and bk["runs"][1]["busy_ranks"] == 2, bk["runs"][1]
# (the reducer's own layout: TSM's 0.70 MB of gradients make 7 buckets of 0.05 MiB, not 14)
assert bk["runs"][1]["buckets"] == 7, bk["runs"][1]["buckets"]
# lockstep over the ranks (the slowest one's each step), pooled over both rounds, each
# size measured twice a round: 4 samples of one step
assert len(bk["runs"][1]["phases"]["backward"]["samples_ms"]) == 4, bk["runs"][1]["phases"]["backward"]
assert all(len(r["round_step_medians_ms"]) == 4 and len(r["settle_attempts"]) == 4 for r in bk["runs"]), bk["runs"]
for q in (p, b):
    assert q["per_bucket_ms"] == rd["per_bucket_ms"] and "here/buckets_tsm_motion.json" in q["per_bucket_source"], q
n1, n2 = bk["runs"][0]["buckets"], bk["runs"][1]["buckets"]
f1, f2 = (r["phases"]["forward"]["median_ms"] for r in bk["runs"])
# each step's backward read against the same step's forward (the machine's speed moves
# between runs): the medians over both rounds' steps of those ratios
r1, r2 = (statistics.median(r["backward_over_forward"]) for r in bk["runs"])
assert all(len(r["backward_over_forward"]) == 4 for r in bk["runs"]), bk["runs"]
want = max(0, (r2 - r1) * (f1 + f2) / 2 / (n2 - n1))
assert abs(bk["per_bucket_ms"] - want) < 1e-9 and rd["per_bucket_ms"] == float("%.4g" % bk["per_bucket_ms"]), (bk, want)
assert "median %.3f with 1 bucket(s) of 25 MiB" % r1 in bk["how"], bk["how"]
intra = c["links"]["intra"]
assert intra["bandwidth_GBps"] > 0 and intra["latency_us"] > 0, intra
a = json.load(open(os.path.join(d, "here", "allreduce.json")))
assert [round(r["mb"], 2) for r in a["results"]] == [0.01, 32.0] and a["ranks"] == 2, a
for k in ("from_frames", "from_videos"):
    r = json.load(open(os.path.join(d, c["cpu"][k])))["results"][0]
    assert r["threads"] == 1 and r["clips"] > 0 and r["clips_per_s"] > 0, r
# the cores' speeds, before and after the profiles: the slower ratio of the two
cpu = c["cpu"]
assert 0 < cpu["core_speed_min"] <= 1 and "before the compute profiles (" in cpu["core_speed_source"], cpu
assert bool(re.search(r"\(core \d+ [0-9.]+ ms, core \d+ ", cpu["core_speed_source"])) == (cores > 1), cpu
assert load in cpu["core_speed_source"], cpu
s = c["storage"]
assert s["read_GBps"] > 0 and s["frames_clip_bytes"] > 0 and s["videos_clip_bytes"] > 0, s
left = [f for f in os.listdir(d) + os.listdir(os.path.join(d, "here")) if ".tmp" in f or f.startswith("vexp-measure")]
assert not left, left
PYEOF
  ;;
measure_local_append)
  # --measure-append pools a later run's rounds with the measurements already there.
  mkdir -p "$tmp/c"
  expect_rc 0 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-rounds 1
  cp -r "$tmp/c" "$tmp/first"
  # --measure-settle: a round slower than the profile's fastest earlier one (the first
  # run's) by more than 0.01 % is measured again, at most twice.
  expect_rc 0 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-rounds 1 \
    --measure-append --measure-settle 0.0001 --measure-settle-tries 2
  grep -q "measured again in 5 s (--measure-settle)" "$tmp/out" && again=1 || again=0
  $PY - "$tmp/first" "$tmp/c" "$again" <<'PYEOF' || fail "--measure-append did not pool the two runs"
import json, os, statistics, sys, tomllib
first, d, again = sys.argv[1:]
c = tomllib.load(open(os.path.join(d, "here.toml"), "rb"))
retried = []
for p in c["gpu"]["profile"]:
    a, b = (json.load(open(os.path.join(x, p["from"]))) for x in (first, d))
    # both runs' rounds: the first run's samples and round medians kept, this run's added
    assert a["rounds"] == 1 and b["rounds"] == 2 and len(b["measured_at"]) == 2, (a["rounds"], b)
    assert b["round_step_medians_ms"][0] == a["round_step_medians_ms"][0], (a, b)
    # each round's samples kept; the pool: the rounds within 0.01 % of the fastest
    # round's step median (--measure-settle 0.0001), the others left out
    assert a["round_pooled"] == [True] and len(a["round_samples_ms"]) == 1, a
    assert b["round_samples_ms"][0] == a["round_samples_ms"][0] and len(b["round_samples_ms"]) == 2, b
    m = b["round_step_medians_ms"]
    assert b["round_pooled"] == [x <= min(m) * 1.0001 for x in m], (m, b["round_pooled"])
    for ph, v in a["phases"].items():
        assert sorted(a["round_samples_ms"][0][ph]) == v["samples_ms"], (ph, a["round_samples_ms"], v)
        want = sorted(x for r, k in zip(b["round_samples_ms"], b["round_pooled"]) if k for x in r[ph])
        assert b["phases"][ph]["samples_ms"] == want, (ph, b["phases"][ph], b["round_samples_ms"], b["round_pooled"])
        assert statistics.median(want) == b["phases"][ph]["median_ms"], (ph, want, b["phases"][ph])
    if b["round_pooled"] != [True, True]:
        assert "in each of 2 interleaved rounds" in p["source"] and ", 1 of them pooled (the others more than 0.01 % slower than the fastest: --measure-settle)" in p["source"], p
    if p["busy_ranks"] == 2:
        assert len(b["per_rank"]) == 4 and len(b["slowest_rank_steps"]) == 2, b
    # --measure-settle: a round measured once is within 0.01 % of the earlier fastest
    att = b["settle_attempts"]
    assert att[0] == 1 and att[1] in (1, 2), att
    m = b["round_step_medians_ms"]
    if att[1] == 1:
        assert m[1] <= m[0] * 1.0001, (m, att)
    retried.append(att[1] == 2)
    assert "in each of 2 interleaved rounds" in p["source"] and "pooled over 2 runs of --measure-local" in p["source"], p
bk = json.load(open(os.path.join(d, "here", "buckets_tsm_motion.json")))
assert bk["rounds"] == 2 and len(bk["measured_at"]) == 2, bk
for r in bk["runs"]:
    # each size twice a round: the first run's two, then this run's two, each measured
    # once only when within 0.01 % of the fastest before it
    att, m = r["settle_attempts"], r["round_step_medians_ms"]
    assert len(att) == 4 and att[:2] == [1, 1], (att, m)
    for k in (2, 3):
        assert att[k] in (1, 2) and (att[k] == 2 or m[k] <= min(m[:k]) * 1.0001), (att, m)
        retried.append(att[k] == 2)
# the log says so exactly when a round was measured again
assert any(retried) == (again == "1"), (retried, again)
assert [len(r["phases"]["backward"]["samples_ms"]) for r in bk["runs"]] == [4, 4], bk
# each step's backward / forward: the first run's, then this run's
bk1 = json.load(open(os.path.join(first, "here", "buckets_tsm_motion.json")))
for r, r1 in zip(bk["runs"], bk1["runs"]):
    assert len(r["backward_over_forward"]) == 4 and r["backward_over_forward"][:2] == r1["backward_over_forward"], (r, r1)
# the cores' speeds: every run's, the smallest ratio of all
runs = json.load(open(os.path.join(d, "here", "cores.json")))["runs"]
assert len(runs) == 2 and all(0 < r["min"] <= 1 for r in runs), runs
assert abs(c["cpu"]["core_speed_min"] - min(r["min"] for r in runs)) < 6e-4, (c["cpu"], runs)
assert "and of the 1 earlier run(s) the profiles are pooled with (here/cores.json)" in c["cpu"]["core_speed_source"], c["cpu"]
PYEOF
  # Refused before anything is measured, the measurements there left as they were: other
  # thread counts (no earlier profile), other steps, a damaged file, and nothing earlier.
  sums() { (cd "$tmp/c" && find . -type f | sort | xargs sha256sum); }
  before=$(sums)
  other=(--measure-warmup 0 --allreduce-mb 0.01,32 --storage-mb 4 --ranks 2)
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${other[@]}" --measure-steps 1 \
    --measure-threads 1,2 --measure-append
  expect_out "--measure-append: there is no earlier measurement '$tmp/c/here/train_tsm_motion_t2.json'"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${other[@]}" --measure-steps 2 \
    --measure-threads 1 --measure-append
  expect_out "here/train_tsm_motion_t1.json' was measured with steps 1, this run's is 2"
  [ "$(sums)" = "$before" ] || fail "a refused --measure-append changed the measurements"
  # A profile without each round's samples (an older vexp's) cannot be pooled by round.
  cp "$tmp/c/here/train_tsm_motion_t1.json" "$tmp/t1.json"
  $PY -c 'import json, sys; f = sys.argv[1]; j = json.load(open(f)); del j["round_samples_ms"]; json.dump(j, open(f, "w"))' \
    "$tmp/c/here/train_tsm_motion_t1.json"
  before=$(sums)
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-append
  expect_out "here/train_tsm_motion_t1.json' has no round_samples_ms, one per round_step_medians_ms"
  [ "$(sums)" = "$before" ] || fail "a refused --measure-append changed the measurements"
  cp "$tmp/t1.json" "$tmp/c/here/train_tsm_motion_t1.json"
  # Phases other than this run's are found only once it has measured (here in the second
  # profile): nothing is written then either, not even the first profile's pooled file.
  $PY -c 'import json, sys; f = sys.argv[1]; j = json.load(open(f)); del j["phases"]["comm"]
[r.pop("comm") for r in j["round_samples_ms"]]; json.dump(j, open(f, "w"))' "$tmp/c/here/train_tsm_motion_t1_busy2.json"
  before=$(sums)
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-append
  expect_out "train_tsm_motion_t1_busy2.json' has other phases than this run's measurement of it"
  [ "$(sums)" = "$before" ] || fail "a --measure-append refused after measuring changed the measurements"
  echo '{"phases": {"step": {"samples_ms": ["x"]}}}' >"$tmp/c/here/train_tsm_motion_t1_busy2.json"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-append
  expect_out "train_tsm_motion_t1_busy2.json' was measured with busy_ranks (none), this run's is 2"
  echo '{"phases": ' >"$tmp/c/here/train_tsm_motion_t1_busy2.json"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/c/here.toml" "${small[@]}" --measure-append
  expect_out "train_tsm_motion_t1_busy2.json' is not a measurement's JSON"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/none.toml" "${small[@]}" --measure-append
  expect_out "there is no earlier measurement"
  [ ! -e "$tmp/none.toml" ] || fail "a refused --measure-append wrote a cluster file"
  ;;
measure_local_refuses)
  # A path that is not a regular file is never overwritten; bad sizes are usage errors.
  mkdir -p "$tmp/dir.toml"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/dir.toml" "${small[@]}"
  expect_out "is not a regular file"
  ln -s "$tmp/elsewhere.toml" "$tmp/link.toml"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/link.toml" "${small[@]}"
  expect_out "is not a regular file"
  [ ! -e "$tmp/elsewhere.toml" ] || fail "wrote through a symbolic link"
  echo "not a folder" > "$tmp/x"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/x.toml" "${small[@]}"
  expect_out "for the measurements"
  expect_rc 2 -- "$vexp" plan --measure-local "$quick" --out "$tmp/y.toml" --allreduce-mb 1
  expect_out "two or more different sizes"
  # An idle machine (as this test's load is not known, it is given) gets no warning ...
  expect_rc 2 -- env VEXP_TEST_LOADAVG="0.10 0.10 0.10 1/1 1" "$vexp" plan --measure-local "$quick" \
    --out "$tmp/y.toml" --allreduce-mb 1
  expect_no_out "this machine is busy"
  # A loaded machine is measured with a warning (the load average against its cores).
  expect_rc 2 -- env VEXP_TEST_LOADAVG="4096.5 1 1 1/1 1" "$vexp" plan --measure-local "$quick" --out "$tmp/y.toml" \
    --allreduce-mb 1
  expect_out "vexp: warning: this machine is busy (load average 4096.5 over "
  expect_rc 2 -- "$vexp" plan --measure-local "$tmp/none.toml" --out "$tmp/y.toml"
  expect_out "none.toml"
  [ ! -e "$tmp/y.toml" ] || fail "a refused measurement wrote its cluster file"
  ;;
shipped_clusters)
  # The cluster files in clusters/ are valid, and plan what they were made for.
  for c in summit local; do
    expect_rc 0 -- "$vexp" check "$src/clusters/$c.toml"
  done
  # (stdout alone: the recipes warn on stderr that their Kinetics data is not here)
  "$vexp" plan "$src/recipes/tsm_k400_1536.toml" "$src/recipes/i3d333_k400_1536.toml" \
    "$src/recipes/i3d311_k400_1536.toml" --cluster "$src/clusters/summit.toml" --gpus 6,96,1536 --json \
    >"$tmp/summit.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "vexp plan on clusters/summit.toml failed"; }
  $PY - "$tmp/summit.json" <<'PYEOF' || fail "the Summit plan is not what clusters/summit.toml should give"
import json, sys
j = json.load(open(sys.argv[1]))
assert [p["model"] for p in j["plans"]] == ["tsm_resnet50", "resnet3d50_3x3x3", "resnet3d50_3x1x1"], j["plans"]
for p in j["plans"]:
    assert p["profile"] == "derived", p["profile"]  # no public V100 profile: derived from MACs
    assert [r["gpus"] for r in p["rows"]] == [6, 96, 1536]
    assert p["rows"][-1]["nodes"] == 256
    for r in p["rows"]:
        assert 0 < r["efficiency"] <= 1.0 + 1e-9 and r["step_ms"] > 0, r
PYEOF
  "$vexp" plan "$quick" --cluster "$src/clusters/local.toml" --gpus 1,2 --json >"$tmp/local.json" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "vexp plan on clusters/local.toml failed"; }
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"][0]; assert p["profile"] == "measured", p["profile"]' \
    "$tmp/local.json" || fail "the quickstart on clusters/local.toml is not planned from its measured profile"
  # Its profiles were measured in 3 rounds: the range reaches from the fastest round to
  # the slowest (over the pooled median), and says so when they are over 10 % apart.
  $PY - "$tmp/local.json" <<'PYEOF' || fail "the plan's range does not follow its profile's rounds"
import json, sys
for r in json.load(open(sys.argv[1]))["plans"][0]["rows"]:
    prof = json.load(open(r["profile_source"].split(" [")[0]))
    m, pooled = prof["round_step_medians_ms"], prof["phases"]["step"]["median_ms"]
    said = [u for u in r["unsure"] if "speed moved while it measured" in u]
    assert len(m) == 3 and bool(said) == (max(m) / min(m) > 1.1), (m, r["unsure"])
    if said: assert "%.1f to %.1f ms per step" % (min(m), max(m)) in said[0], (said, m)
    if r["exposed_comm_ms"] == 0 and r["exposed_data_ms"] == 0:  # the step is its compute: it scales alike
        assert r["step_ms_high"] >= 1.1 * r["step_ms"] * max(1.0, max(m) / pooled) * (1 - 1e-9), (r, m, pooled)
PYEOF
  ;;
*) fail "no such test: $name" ;;
esac
echo "PASS [$name]"
