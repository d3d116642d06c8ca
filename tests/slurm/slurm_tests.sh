#!/usr/bin/env bash
# vexp under a real Slurm (tests/slurm/slurm_fixture.sh starts it). Usage:
# slurm_tests.sh NAME VEXP SOURCE_DIR MPIRUN. Exit 77 (a skip) with the reason where
# this machine cannot run the cluster.
set -uo pipefail
name=$1 vexp=$2 src=$3 mpirun=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vexp_slurm_${name}_XXXX")
PY=/usr/bin/python3
source "$src/tests/cli/testlib.sh"
source "$here/slurm_fixture.sh"
cleanup() { slurm_stop; rm -rf "$tmp"; }
trap cleanup EXIT

R=$src/tests/cli/data/tiny.toml
MPI=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)
# Every srun is bounded: a step that hangs fails its test instead of its CTest timeout.
SRUN=(srun --mpi=pmix --time=3 --kill-on-bad-exit=1)
export VEXP_TEST_EPOCHS=2

gone() {  # gone PID...: each ends (or is a zombie) within 5 s
  local p i
  for p in "$@"; do
    for i in $(seq 1 50); do
      [ -e "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null || continue 2
      sleep 0.1
    done
    return 1
  done
}

start_cluster() {
  local t0=$SECONDS
  slurm_start
  local rc=$?
  [ $rc -eq 0 ] || exit $rc
  trap cleanup EXIT
  trap 'cleanup; exit 130' INT
  trap 'cleanup; exit 143' TERM
  echo "slurm fixture started in $((SECONDS - t0)) s"
}

case "$name" in
fixture)
  # The cluster comes up with two idle nodes, runs a step on both, and leaves
  # nothing behind when stopped, also when the shell that started it is killed.
  start_cluster
  d=$SLURM_FIXTURE_DIR
  expect_rc 0 -- "${SRUN[@]}" -N 2 -n 2 sh -c 'echo "task $SLURM_PROCID on $SLURMD_NODENAME"'
  expect_out "task 0 on n1"; expect_out "task 1 on n2"
  pids=$(cat "$d"/run/*.pid)
  t0=$SECONDS
  slurm_stop
  echo "slurm fixture stopped in $((SECONDS - t0)) s"
  [ ! -e "$d" ] || fail "the fixture's folder $d is still there"
  gone $pids || fail "a process of the fixture still runs: $(ps -o pid,args -p "$(echo $pids | tr ' ' ,)")"
  # SIGKILL to the owner: its watcher stops the cluster.
  bash -c "source '$here/slurm_fixture.sh'; slurm_start >/dev/null 2>&1 || exit 1; echo \"\$SLURM_FIXTURE_DIR\" >'$tmp/dir'; cat \"\$SLURM_FIXTURE_DIR\"/run/*.pid >'$tmp/pids'; exec sleep 600" &
  owner=$!
  for _ in $(seq 1 300); do [ -s "$tmp/pids" ] && break; kill -0 $owner 2>/dev/null || break; sleep 0.1; done
  [ -s "$tmp/pids" ] || fail "the second fixture did not start"
  kill -9 $owner; wait $owner 2>/dev/null
  d2=$(cat "$tmp/dir")
  for _ in $(seq 1 300); do [ -e "$d2" ] || break; sleep 0.1; done
  [ ! -e "$d2" ] || fail "a killed owner's fixture $d2 was not removed within 30 s"
  gone $(cat "$tmp/pids") || fail "a process of a killed owner's fixture still runs: $(ps -o pid,args -p "$(tr '\n' , <"$tmp/pids")")"
  ;;
srun_equals_mpirun)
  # `srun -N 2 -n 2` (one rank per node) trains the same 2-rank job as `mpirun -np 2`:
  # the final weights are bit-identical.
  S=(--set dist.backend=mpi --set dist.world_size=2)
  t0=$SECONDS
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run "$R" "${S[@]}" --out "$tmp/mpirun"
  echo "mpirun -np 2 run: $((SECONDS - t0)) s"
  start_cluster
  t0=$SECONDS
  expect_rc 0 -- "${SRUN[@]}" -N 2 -n 2 "$vexp" run "$R" "${S[@]}" --out "$tmp/srun"
  echo "srun -N 2 -n 2 run: $((SECONDS - t0)) s"
  [ "$(grep -c "^$tmp/srun: top-1" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one result line (rank 0's)"; }
  grep -q '"ranks":2' "$tmp/srun/metrics.jsonl" || fail "the srun job was not one 2-rank run"
  $PY - "$tmp/mpirun" "$tmp/srun" <<'PY' || fail "the srun and mpirun runs differ"
import glob, sys, torch
def last(d):
    return torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
a, b = (last(d) for d in sys.argv[1:3])
ma, mb = a["model"], b["model"]
assert ma and set(ma) == set(mb), "tensor names differ"
diff = [k for k in ma if not torch.equal(ma[k], mb[k])]
assert not diff, f"{len(diff)} of {len(ma)} tensors differ, first {diff[0]}"
print(f"{len(ma)} tensors bit-identical")
PY
  no_crash
  ;;
srun_local_refused)
  start_cluster
  # The recipe's default backend (local) cannot span the two tasks: refused before
  # anything is written, in one line, by the first task only.
  t0=$SECONDS
  expect_rc 2 -- "${SRUN[@]}" -N 2 -n 2 "$vexp" run "$R" --out "$tmp/two"
  echo "refused srun: $((SECONDS - t0)) s"
  expect_out "dist.backend = \"local\" trains in one process, but Slurm (srun) started 2 tasks (SLURM_STEP_NUM_TASKS=2)"
  expect_out "--set dist.backend=mpi"
  [ "$(grep -c "dist.backend" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }
  [ ! -e "$tmp/two" ] || fail "a refused run wrote $tmp/two"
  no_crash
  # One task with the local backend is a plain run.
  expect_rc 0 -- "${SRUN[@]}" -n 1 "$vexp" run "$R" --set run.epochs=1 --out "$tmp/one"
  expect_out "top-1"
  # A batch script's shell is one process, whatever its allocation: it plans one rank.
  printf '#!/bin/sh\nexec "%s" run "%s" --dry-run\n' "$vexp" "$R" >"$tmp/job.sh"
  t0=$SECONDS
  job=$(sbatch --parsable -n 2 -o "$tmp/job.out" "$tmp/job.sh") || fail "sbatch failed"
  # (sbatch --wait polls every 10 s)
  for _ in $(seq 1 600); do [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break; sleep 0.1; done
  [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] || fail "batch job $job still queued or running after 60 s"
  echo "batch job: $((SECONDS - t0)) s"
  grep -qF "(ranks launched: 1)" "$tmp/job.out" || { cat "$tmp/job.out"; fail "the batch shell planned more than one rank"; }
  ;;
*) fail "unknown test $name" ;;
esac
echo "ok [$name]"
