#!/usr/bin/env bash
# How light the driver of `vexp sweep --cluster` is (issue: 100 submits in under 10 s
# of driver time; one scheduler call per poll whatever the number of trials; an idle
# driver under 1 % of a core), measured against the private two-node Slurm of the
# tests (tests/slurm/slurm_fixture.sh; root, slurm-wlm and munge needed).
#
#   tools/bench/sweep_driver.sh [BUILD_DIR] [TRIALS] [IDLE_SECONDS]     (defaults: build 100 60)
#
# The partition is set DOWN first, so every job stays queued: the driver submits all
# TRIALS (--max-running 0 means all), then polls them every 5 s. Measured:
#   - expansion: from the start to the first sbatch (every trial's recipe validated);
#   - submission: from the first sbatch to the last, against the baseline of the same
#     number of plain `sbatch --parsable` calls in a shell loop, in the same run
#     (the ratio says what the driver adds to Slurm's own cost);
#   - polls: squeue calls during the idle window, against the polls it made;
#   - idle: the driver's CPU time (its own and its children's: squeue) over the window,
#     as a share of one core.
set -uo pipefail
build=${1:-build}
n=${2:-100}
idle_s=${3:-60}
src=$(cd "$(dirname "$0")/../.." && pwd)
vexp=$src/$build/bin/vexp
[ -x "$vexp" ] || { echo "no $vexp: build first (make build)" >&2; exit 2; }
calc() { awk "BEGIN { print $1 }"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vexp_bench_sweep_XXXX")
drv=""
source "$src/tests/cli/testlib.sh"
name=bench_sweep_driver
source "$src/tests/slurm/slurm_fixture.sh"
cleanup() { [ -n "$drv" ] && kill -9 "$drv" 2>/dev/null; slurm_stop; rm -rf "$tmp"; }
trap cleanup EXIT
slurm_start || exit $?
scontrol update PartitionName=debug State=DOWN || { echo "cannot set the partition down" >&2; exit 1; }

# Every Slurm command the driver runs is logged (one line per call, with the time).
mkdir -p "$tmp/bin"
for c in sbatch squeue scancel; do
  real=$(command -v "$c")
  printf '#!/bin/bash\necho "%s $(date +%%s.%%N)" >>%q\nexec %q "$@"\n' "$c" "$tmp/calls" "$real" >"$tmp/bin/$c"
  chmod +x "$tmp/bin/$c"
done

# The baseline: N plain sbatch calls of a trivial script.
printf '#!/bin/bash\n#SBATCH --output=/dev/null\ntrue\n' >"$tmp/plain.sbatch"
t0=$(date +%s.%N)
for i in $(seq 1 "$n"); do sbatch --parsable "$tmp/plain.sbatch" >/dev/null || { echo "sbatch failed" >&2; exit 1; }; done
t1=$(date +%s.%N)
base_s=$(calc "$t1 - $t0")
scancel -u "$(id -un)"

lrs=$(/usr/bin/python3 -c "print(', '.join('%.6g' % (0.001 * (i + 1)) for i in range($n)))")
cat >"$tmp/sweep.toml" <<TOML
[sweep]
name = "bench"
base = "$src/tests/cli/data/tiny.toml"
[[sweep.axis]]
key = "optim.lr"
grid = [$lrs]
TOML
cluster=$src/tests/slurm/data/fixture_cluster.toml

: >"$tmp/calls"
start=$(date +%s.%N)
PATH="$tmp/bin:$PATH" "$vexp" sweep "$tmp/sweep.toml" --out "$tmp/s" --cluster "$cluster" --max-running 0 \
  --poll 5 --no-report >"$tmp/driver.log" 2>&1 &
drv=$!
for _ in $(seq 1 1200); do
  [ "$(grep -c ' submitted: job ' "$tmp/driver.log")" -ge "$n" ] && break
  kill -0 "$drv" 2>/dev/null || { cat "$tmp/driver.log" >&2; echo "the driver ended early" >&2; exit 1; }
  sleep 0.1
done
[ "$(grep -c ' submitted: job ' "$tmp/driver.log")" -ge "$n" ] || { tail "$tmp/driver.log" >&2; echo "not all submitted in 120 s" >&2; exit 1; }
first=$(awk '$1 == "sbatch" {print $2; exit}' "$tmp/calls")
last=$(awk '$1 == "sbatch" {t = $2} END {print t}' "$tmp/calls")
expand_s=$(calc "$first - $start")
submit_s=$(calc "$last - $first")

# Idle: CPU ticks of the driver and its waited-for children over the window.
ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$drv/stat"; }
hz=$(getconf CLK_TCK)
sleep 2
c0=$(ticks); w0=$(date +%s.%N); q0=$(grep -c '^squeue ' "$tmp/calls")
sleep "$idle_s"
c1=$(ticks); w1=$(date +%s.%N); q1=$(grep -c '^squeue ' "$tmp/calls")
kill -INT "$drv"; wait "$drv"; drv=""
window=$(calc "$w1 - $w0")
cpu_pct=$(calc "100 * ($c1 - $c0) / $hz / $window")
polls=$(calc "$window / 5")
squeue_calls=$((q1 - q0))
scancel -u "$(id -un)"

printf 'vexp sweep --cluster driver, %d trials (tiny recipe), fixture Slurm on %s (%s cores)\n' "$n" "$(hostname -s)" "$(nproc)"
printf '  expansion (every trial validated) : %6.2f s\n' "$expand_s"
printf '  submission of %d trials          : %6.2f s  (goal < 10 s)\n' "$n" "$submit_s"
printf '  baseline: %d plain sbatch calls  : %6.2f s  -> driver / baseline = %.2fx\n' "$n" "$base_s" \
  "$(calc "$submit_s / $base_s")"
printf '  polls in %.0f s idle (every 5 s)  : %d squeue call(s) for %.1f polls (goal: one per poll)\n' "$window" \
  "$squeue_calls" "$polls"
printf '  idle driver CPU                   : %.3f %% of one core (goal < 1 %%)\n' "$cpu_pct"
