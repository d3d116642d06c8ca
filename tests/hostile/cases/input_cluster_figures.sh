# Cluster figures are physically meaningful, and the plan table's columns never run
# together (issue #36 item 7.4). A profile read through `from` (a `vexp bench train
# --json` output) was not held to any range: forward median_ms = 1e300 was accepted and
# printed as a 300-digit number that ran every column of the table together; typed-in
# figures had no lower bound (forward_ms = 1e-300 planned 10^300 clips/s). Now every
# figure, typed in or read from a bench JSON, has a documented range, checked with the
# cluster file's FILE:LINE:COL; and a figure too wide for its column is written in
# scientific notation with a space before it.
source "$(dirname "$0")/../lib.sh"
c=$src/tests/cli/data/plan_cluster.toml
r=$src/recipes/quickstart/tsm_motion.toml
line_of() { grep -n "$1" "$2" | head -1 | cut -d: -f1; }
cp -r "$src/clusters/local.toml" "$src/clusters/local" .
# 1. A bench JSON's 1e300 (and a decode rate's), at the line of the `from` naming it.
$PY - <<'PY' || fail "could not edit the bench JSON"
import json
for p, edit in [("local/train_tsm_motion_t1.json", lambda j: j["phases"]["forward"].update(median_ms=1e300)),
                ("local/data_frames.json", lambda j: j["results"][-1].update(clips_per_s_per_thread=1e300)),
                # the step's median scales the phases (medians do not add): held to their ranges too
                ("local/train_tsn_motion_t1.json", lambda j: j["phases"]["step"].update(median_ms=1e300))]:
    j = json.load(open(p)); edit(j); json.dump(j, open(p, "w"))
PY
expect_rc 2 -- "$vexp" plan "$r" --cluster local.toml
expect_out "local.toml:$(line_of 'train_tsm_motion_t1.json' local.toml):1: error: 'from' = \"local/train_tsm_motion_t1.json\": 'local/train_tsm_motion_t1.json': phases.forward.median_ms (the profile's 'forward_ms') must be in [0.001, 10000000], got 1e+300"
expect_out "local.toml:$(line_of 'from_frames' local.toml):1: error: 'from_frames' = \"local/data_frames.json\": 'local/data_frames.json': clips_per_s_per_thread must be in [1e-06, 1000000000], got 1e+300"
expect_no_out "00000000000000000000"
expect_rc 2 -- "$vexp" plan "$src/recipes/quickstart/tsn_motion.toml" --cluster local.toml
expect_out "local.toml:$(line_of 'train_tsn_motion_t1.json' local.toml):1: error: 'from' = \"local/train_tsn_motion_t1.json\": 'local/train_tsn_motion_t1.json': phases.step.median_ms scales the profile's 'forward_ms' out of its range: must be in [0.001, 10000000], got "
expect_no_out "scales the profile's 'backward_ms'"  # one error for the one figure at fault
expect_rc 2 -- "$vexp" check local.toml
expect_out "must be in [0.001, 10000000], got 1e+300"
# 2. Typed-in figures below their range.
sed 's/^forward_ms = .*/forward_ms = 1e-300/; s/^bandwidth_GBps = 0.5/bandwidth_GBps = 1e-300/; s/^frames_clip_bytes = .*/frames_clip_bytes = 1e-300/' "$c" >tiny_c.toml
expect_rc 2 -- "$vexp" plan "$r" --cluster tiny_c.toml
expect_out "tiny_c.toml:$(line_of '^forward_ms' tiny_c.toml):1: error: 'forward_ms' in [[gpu.profile]]: must be in [0.001, 10000000], got 1e-300"
expect_out "tiny_c.toml:$(line_of '^bandwidth_GBps' tiny_c.toml):1: error: 'bandwidth_GBps' in [links.intra]"
expect_out "tiny_c.toml:$(line_of '^frames_clip_bytes' tiny_c.toml):1: error: 'frames_clip_bytes' in [storage]"
# [scheduler] figures too (they become #SBATCH lines).
sed 's/^max_requeues = 3/max_requeues = 1000000/' "$src/tests/slurm/data/fixture_cluster.toml" >sched.toml
expect_rc 2 -- "$vexp" check sched.toml
expect_out "sched.toml:$(line_of '^max_requeues' sched.toml):1: error: 'max_requeues' in [scheduler]: must be in [0, 1000], got 1000000"
# 3. Every figure at the edge of its range: the table's columns stay apart (15 fields
# a row: 10 figures, epoch and total with their units, the bottleneck).
rows_apart() {
  local bad
  bad=$(grep -E '^ +[0-9]+ +[0-9]+ ' "$tmp/out" | awk 'NF != 15')
  [ -z "$bad" ] || { cat "$tmp/out"; fail "columns ran together: $bad"; }
  [ "$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$tmp/out")" -ge 2 ] || { cat "$tmp/out"; fail "expected rows"; }
}
sed 's/^forward_ms = .*/forward_ms = 0.001/; s/^backward_ms = .*/backward_ms = 0.001/; s/^optimizer_ms = .*/optimizer_ms = 0/;
     s/^latency_us = .*/latency_us = 0/; s/^bandwidth_GBps = .*/bandwidth_GBps = 1000000/; s/^read_GBps = .*/read_GBps = 1e9/;
     s/^frames_clip_bytes = .*/frames_clip_bytes = 1/; s/^frames_clips_per_s_per_core = .*/frames_clips_per_s_per_core = 1e9/;
     s/^nodes = 4/nodes = 100000/' "$c" >fast.toml
expect_rc 0 -- "$vexp" plan "$r" --cluster fast.toml --gpus 1,2,8,64
rows_apart
sed 's/^forward_ms = .*/forward_ms = 1e7/; s/^backward_ms = .*/backward_ms = 1e7/; s/^optimizer_ms = .*/optimizer_ms = 1e7/;
     s/^latency_us = .*/latency_us = 1e9/; s/^bandwidth_GBps = .*/bandwidth_GBps = 1e-6/; s/^read_GBps = .*/read_GBps = 1e-6/;
     s/^frames_clip_bytes = .*/frames_clip_bytes = 1e12/; s/^frames_clips_per_s_per_core = .*/frames_clips_per_s_per_core = 1e-6/;
     s/^cores_per_node = .*/cores_per_node = 0.001/' "$c" >slow.toml
expect_rc 0 -- "$vexp" plan "$r" --cluster slow.toml --gpus 1,2,8
rows_apart
expect_out "e+"
no_crash
exit 0
