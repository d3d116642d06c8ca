#!/usr/bin/env bash
# The gradient noise scale from the command line (docs/batch-size.md): run.noise_scale_every
# writes its keys to metrics.jsonl, TensorBoard, summary.json and the report's chart; one
# GPU is refused at the key's line; vexp bench train --noise-scale-every prints its cost.
# Usage: noise_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" noise

cd "$here"
# The tiny recipe on 2 emulated GPUs, measured every 2nd step (6 steps per epoch).
cat >"$tmp/noise.toml" <<TOML
extends = "$here/data/tiny.toml"

[run]
name = "tiny_noise"
noise_scale_every = 2
log_every = 3

[dist]
world_size = 2
batch_per_gpu = 4
TOML
# The same on one GPU: refused at line 5 (the key).
cat >"$tmp/one_gpu.toml" <<TOML
extends = "$here/data/tiny.toml"

[run]
name = "tiny_noise_1"
noise_scale_every = 2
TOML

case "$name" in
run)
  expect_rc 0 -- "$vexp" run "$tmp/noise.toml" --out "$tmp/run"
  $PY - "$tmp/run" <<'PY' || fail "the noise keys are missing or wrong"
import json, math, sys
d = sys.argv[1]
steps = [j for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
measured = [j for j in steps if "noise_scale" in j]
# 2 epochs of 6 steps: global steps 2, 4, ..., 12 measured, each with a record.
assert [j["global_step"] for j in measured] == [2, 4, 6, 8, 10, 12], [j["global_step"] for j in steps]
for j in measured:
    assert j["noise_small_batch"] == 4 and j["noise_big_batch"] == 8, j
    for k in ("noise_small_sq", "noise_big_sq", "noise_g2_step", "noise_trace_step", "noise_g2", "noise_trace"):
        assert isinstance(j[k], float) and math.isfinite(j[k]), (k, j)
    # The estimates from the norms (docs/batch-size.md).
    s, b = j["noise_small_sq"], j["noise_big_sq"]
    assert s > 0 and b > 0
    assert abs(j["noise_g2_step"] - (8 * b - 4 * s) / 4) <= 1e-9 * s, j
    assert abs(j["noise_trace_step"] - (s - b) / (1 / 4 - 1 / 8)) <= 1e-9 * s * 8, j
    if j["noise_scale"] is not None:
        assert abs(j["noise_scale"] - j["noise_trace"] / j["noise_g2"]) <= 1e-9 * abs(j["noise_scale"]), j
# The steps between (log_every 3) carry none.
assert all("noise_g2" not in j for j in steps if j["global_step"] % 2), steps
summary = json.load(open(d + "/summary.json"))
assert summary["noise_measurements"] == 6, summary
last = measured[-1]
assert summary["noise_g2"] == last["noise_g2"] and summary["noise_trace"] == last["noise_trace"], summary
assert summary["noise_scale"] == last["noise_scale"], (summary, last)
print("B_noise", [j["noise_scale"] for j in measured], "global batch", last["noise_big_batch"])
PY
  # TensorBoard: train/noise_scale and the others beside train/loss.
  $PY tfevents_check.py "$tmp/run"/events.out.tfevents.* train/noise_scale train/noise_g2 train/noise_trace \
    train/noise_g2_step train/loss >/dev/null || fail "no train/noise_* TensorBoard scalars"
  # The report's chart: B_noise with the global batch as a line.
  expect_rc 0 -- "$vexp" report "$tmp/run" --out "$tmp/report.html"
  grep -qF "gradient noise scale B_noise" "$tmp/report.html" || fail "the report has no noise scale chart"
  grep -qF "global batch 8" "$tmp/report.html" || fail "the noise chart lacks the global batch"
  # A run without the key has neither the keys nor the chart.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/plain" --set run.epochs=1
  ! grep -q noise_ "$tmp/plain/metrics.jsonl" || fail "noise keys without run.noise_scale_every"
  expect_rc 0 -- "$vexp" report "$tmp/plain" --out "$tmp/plain.html"
  ! grep -qF "gradient noise scale B_noise" "$tmp/plain.html" || fail "a noise chart without measurements"
  # Resumed: the moving averages continue from the checkpoint (the same summary).
  expect_rc 0 -- "$vexp" run "$tmp/noise.toml" --out "$tmp/resumed" --stop-after 1
  expect_rc 0 -- "$vexp" run "$tmp/noise.toml" --out "$tmp/resumed" --resume
  $PY - "$tmp/run/summary.json" "$tmp/resumed/summary.json" <<'PY' || fail "a resumed run's noise scale differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("noise_scale", "noise_g2", "noise_trace", "noise_measurements"):
    assert a[k] == b[k], (k, a[k], b[k])
PY
  ;;
refused)
  # One GPU: an error at the key, in check and run, and at a --set.
  expect_rc 2 -- "$vexp" check "$tmp/one_gpu.toml"
  expect_out "one_gpu.toml:5:1: error: run.noise_scale_every = 2 measures the gradient noise scale from the GPUs' gradients against their mean, and dist.world_size is 1: it needs at least two GPUs or emulated GPUs per step"
  expect_rc 2 -- "$vexp" run "$tmp/one_gpu.toml" --out "$tmp/x"
  expect_out "one_gpu.toml:5:1: error: run.noise_scale_every = 2"
  [ ! -e "$tmp/x/metrics.jsonl" ] || fail "a refused run trained"
  expect_rc 2 -- "$vexp" check data/tiny.toml --set run.noise_scale_every=5
  expect_out "--set run.noise_scale_every=5"
  expect_out "needs at least two GPUs or emulated GPUs per step"
  # Emulated GPUs are GPUs: the same recipe with dist.world_size = 2 is accepted.
  expect_rc 0 -- "$vexp" check "$tmp/one_gpu.toml" --set dist.world_size=2
  # Out of range.
  expect_rc 2 -- "$vexp" check data/tiny.toml --set run.noise_scale_every=-1
  expect_rc 2 -- "$vexp" check data/tiny.toml --set run.noise_scale_ema=1.0
  # The benchmark's option needs two GPUs as well.
  expect_rc 1 -- "$vexp" bench train data/tiny.toml --synthetic --steps 1 --warmup 0 --noise-scale-every 10
  expect_out "needs at least two GPUs or emulated GPUs per step"
  ;;
bench)
  # The step time with the measurement against without, in the same process.
  expect_rc 0 -- "$vexp" bench train "$tmp/noise.toml" --synthetic --steps 3 --warmup 2 --noise-scale-every 10
  expect_out "noise scale: a measured step"
  expect_out "measured every 10 steps (3 blocks of 10 steps each way, alternating:"
  expect_rc 0 -- "$vexp" bench train "$tmp/noise.toml" --synthetic --steps 2 --warmup 1 --noise-scale-every 5 --json
  $PY - "$tmp/out" <<'PY' || fail "bench train --json lacks the noise scale's ratio"
import json, sys
j = json.load(open(sys.argv[1]))
n = j["noise_scale"]
assert n["every"] == 5 and n["ratio"] > 0 and n["measured_step_ms"] > 0, n
assert abs(n["ratio"] - n["measuring_blocks_s"] / n["plain_blocks_s"]) < 1e-9, n
PY
  ;;
*) fail "unknown test $name" ;;
esac
