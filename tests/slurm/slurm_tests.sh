#!/usr/bin/env bash
# vexp under a real Slurm (tests/slurm/slurm_fixture.sh starts it). Usage:
# slurm_tests.sh NAME VEXP SOURCE_DIR MPIRUN. Exit 77 (a skip) with the reason where
# this machine cannot run the cluster.
name=$1 vexp=$2 src=$3 mpirun=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" slurm
source "$here/slurm_fixture.sh"
cleanup() { slurm_stop; rm -rf "$tmp"; }

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

# vexp submit (cluster file with [scheduler]: one task per node, one-minute jobs,
# SIGUSR1 45 s before the limit).
C=$here/data/fixture_cluster.toml
TWO=(--set dist.backend=mpi --set dist.world_size=2)
# job_event DIR EVENT STATE: jobs.jsonl holds that event.
job_event() { grep -q "\"event\":\"$2\".*\"state\":\"$3\"" "$1/jobs.jsonl" 2>/dev/null; }
show_job() {  # what a failed wait shows
  echo "--- jobs.jsonl"; cat "$1/jobs.jsonl" 2>/dev/null
  echo "--- Slurm output (last lines)"; tail -n 40 "$1"/slurm-*.out 2>/dev/null
  echo "--- squeue"; squeue 2>&1
} >&2
# wait_until LIMIT_S DIR WHAT COMMAND...: polls COMMAND every 0.5 s.
wait_until() {
  local limit=$1 dir=$2 what=$3 t0=$SECONDS
  shift 3
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || { show_job "$dir"; fail "$what: not within $limit s"; }
    sleep 0.5
  done
}
job_id_of() { sed -n 's/.*"event":"submitted","job":"\([0-9]*\)".*/\1/p' "$1/jobs.jsonl" | tail -n 1; }
# same_state A B: the last checkpoints of two runs hold bit-identical parameters,
# buffers and optimizer state, and their summaries the same top-1 and top-5.
same_state() {
  $PY - "$1" "$2" <<'PY' || fail "runs $1 and $2 differ"
import glob, json, sys, torch
a, b = sys.argv[1], sys.argv[2]
def last(d): return torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
ca, cb = last(a), last(b)
for part in ("model", "optimizer"):
    ta, tb = ca[part], cb[part]
    assert set(ta) == set(tb) and ta, f"{part}: names differ"
    for k in ta:
        xa, xb = ta[k], tb[k]
        pairs = [(xa[j], xb[j]) for j in xa] if isinstance(xa, dict) else [(xa, xb)]
        for u, v in pairs:
            if isinstance(u, torch.Tensor):
                assert torch.equal(u, v), f"{part} {k} differs"
    print(f"{part}: {len(ta)} entries bit-identical")
sa, sb = (json.load(open(d + "/summary.json")) for d in (a, b))
print("top-1", sa["top1"], sb["top1"], "top-5", sa["top5"], sb["top5"])
assert sa["top1"] == sb["top1"] and sa["top5"] == sb["top5"]
PY
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
submit_completes)
  # vexp submit -> the job runs the 2-rank run to its end, with the summary and
  # weights of the same run started locally (mpirun).
  E=(--set run.epochs=2)
  t0=$SECONDS
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run "$R" "${TWO[@]}" "${E[@]}" --out "$tmp/local"
  echo "local mpirun -np 2 run: $((SECONDS - t0)) s"
  start_cluster
  t0=$SECONDS
  expect_rc 0 -- "$vexp" submit "$R" "${TWO[@]}" "${E[@]}" --cluster "$C" --time 3 --out "$tmp/job"
  expect_out "submitted Slurm job "
  expect_out "(2 node(s) x 1 task(s) = 2 rank(s) for dist.world_size = 2)"
  job=$(job_id_of "$tmp/job")
  [ -n "$job" ] || fail "no job id recorded in $tmp/job/jobs.jsonl"
  grep -q '^#SBATCH --signal=B:USR1@45$' "$tmp/job/job.sbatch" || fail "the script does not ask for the signal"
  wait_until 150 "$tmp/job" "job $job's end" job_event "$tmp/job" end completed
  echo "submitted job: $((SECONDS - t0)) s"
  same_state "$tmp/local" "$tmp/job"
  expect_rc 0 -- "$vexp" status "$tmp/job"
  expect_out "the run is complete (summary.json)"
  expect_out "job $job: 1 start(s), 0 requeue(s) of at most 3, nodes n[1-2]"
  expect_out "last: the run is complete"
  expect_out "Slurm: job $job "
  expect_rc 0 -- "$vexp" report "$tmp/job" --out "$tmp/report.html"
  grep -qF "<td>$job</td>" "$tmp/report.html" || fail "job $job not in vexp report's Slurm jobs"
  no_crash
  ;;
submit_requeue)
  # A one-minute limit cuts the run: SIGUSR1 -> every rank stops after the same
  # step, rank 0 writes a checkpoint -> the job requeues itself -> the next start
  # resumes (--resume auto) -> the final weights are bit-identical to an
  # uninterrupted run's.
  E=(--set run.epochs=${SUBMIT_EPOCHS:-50})
  t0=$SECONDS
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run "$R" "${TWO[@]}" "${E[@]}" --out "$tmp/whole"
  echo "uninterrupted mpirun -np 2 run: $((SECONDS - t0)) s"
  start_cluster
  t0=$SECONDS
  # The job's steps sleep 300 ms more (test-only fault; the values are unchanged), so that
  # its 150 steps outlast the signal ~30 s into the one-minute limit on any machine
  # (unslowed, a quiet 2-core machine trains all 50 epochs in 5 s). sbatch passes the
  # environment on, to the requeued start too.
  expect_rc 0 -- env VEXP_TEST_FAULT="slow_step@ms=${SUBMIT_STEP_MS:-300}" \
    "$vexp" submit "$R" "${TWO[@]}" "${E[@]}" --cluster "$C" --out "$tmp/job"
  job=$(job_id_of "$tmp/job")
  wait_until 100 "$tmp/job" "job $job stopped at the time limit and requeued" job_event "$tmp/job" end requeued
  echo "requeued after $((SECONDS - t0)) s"
  # A requeued job waits for its credentials to expire (120 s): start it now, and
  # with a limit long enough for the rest of the run (its start must not be cut again).
  # (Only once its first start has left the nodes: a step started while the old one
  # is still being killed fails to launch.)
  in_begin_wait() { [ "$(squeue -h -j "$job" -o '%T %r' 2>/dev/null)" = "PENDING BeginTime" ]; }
  wait_until 30 "$tmp/job" "job $job pending after its requeue" in_begin_wait
  nodes_idle() { [ "$(sinfo -h -N -o %t | sort -u)" = idle ]; }
  wait_until 30 "$tmp/job" "the nodes idle after the requeue" nodes_idle
  scontrol update JobId="$job" StartTime=now TimeLimit=4 || fail "scontrol update of job $job failed"
  wait_until 150 "$tmp/job" "job $job's end after its requeue" job_event "$tmp/job" end completed
  echo "submitted job, with its requeue(s): $((SECONDS - t0)) s"
  same_state "$tmp/whole" "$tmp/job"
  out=$(cat "$tmp/job/slurm-$job.out")
  for want in "SIGUSR1: the time limit is near" "interrupted: stopped after step" \
    "requeueing (1 of 3)" "start 2 on" "holds a run: continuing it" "the run is complete"; do
    grep -qF -- "$want" <<<"$out" || { show_job "$tmp/job"; fail "the job's output lacks: $want"; }
  done
  expect_rc 0 -- "$vexp" status "$tmp/job"
  expect_out "the run is complete (summary.json)"
  expect_out "job $job: 2 start(s), 1 requeue(s) of at most 3, nodes n[1-2]"
  echo "--- timeline (jobs.jsonl and the job's own lines)"
  cat "$tmp/job/jobs.jsonl"
  grep -E "^vexp job|interrupted|resum|--resume auto" "$tmp/job/slurm-$job.out"
  no_crash
  ;;
submit_scancel)
  # scancel mid-run: the run says cancelled; `vexp run ... --resume auto` continues it.
  E=(--set run.epochs=${SUBMIT_CANCEL_EPOCHS:-20})
  start_cluster
  expect_rc 0 -- "$vexp" submit "$R" "${TWO[@]}" "${E[@]}" --cluster "$C" --time 5 --out "$tmp/job"
  job=$(job_id_of "$tmp/job")
  has_checkpoint() { compgen -G "$tmp/job/checkpoints/epoch_*.pt" >/dev/null; }
  wait_until 90 "$tmp/job" "job $job's first checkpoint" has_checkpoint
  t0=$SECONDS
  scancel "$job" || fail "scancel $job failed"
  wait_until 60 "$tmp/job" "job $job's end after scancel" job_event "$tmp/job" end cancelled
  echo "cancelled job ended after $((SECONDS - t0)) s"
  job_gone() { [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; }
  wait_until 30 "$tmp/job" "job $job gone from squeue" job_gone
  expect_rc 0 -- "$vexp" status "$tmp/job"
  expect_out "the run is not complete"
  expect_out "last: cancelled"
  t0=$SECONDS
  expect_rc 0 -- "${SRUN[@]}" -N 2 -n 2 "$vexp" run "$R" "${TWO[@]}" "${E[@]}" --out "$tmp/job" --resume auto
  echo "resumed run: $((SECONDS - t0)) s"
  expect_out "holds a run: continuing it"
  expect_out "$tmp/job: top-1"
  no_crash
  ;;
submit_refused)
  # Bad input: one line each, nothing written, nothing submitted.
  start_cluster
  nothing_submitted() {
    [ ! -e "$tmp/job" ] || fail "a refused submit left $tmp/job"
    [ -z "$(squeue -h 2>/dev/null)" ] || fail "a refused submit queued a job: $(squeue)"
  }
  one_line() { [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }; }
  mkdir -p "$tmp/bin"   # a PATH without Slurm's commands
  expect_rc 1 -- env PATH="$tmp/bin" "$vexp" submit "$R" "${TWO[@]}" --cluster "$C" --out "$tmp/job"
  expect_out "vexp: error: sbatch is not on PATH"; expect_out "nothing submitted"; one_line; nothing_submitted
  t0=$SECONDS
  expect_rc 1 -- "$vexp" submit "$R" "${TWO[@]}" --cluster "$C" --partition nope --out "$tmp/job"
  echo "refused by sbatch: $((SECONDS - t0)) s"
  expect_out "vexp: error: sbatch refused the job (exit code 1): "
  expect_out "nvalid partition"; expect_out "nothing submitted"; one_line; nothing_submitted
  expect_rc 2 -- "$vexp" submit "$R" --set dist.backend=mpi --set dist.world_size=4 --cluster "$C" --out "$tmp/job"
  expect_out "vexp: error: dist.world_size = 4 needs 4 nodes of 1 GPU(s), and $C has 2; --nodes 2 emulates that world exactly; nothing submitted"
  one_line; nothing_submitted
  expect_rc 2 -- "$vexp" submit "$R" "${TWO[@]}" --cluster "$src/clusters/local.toml" --out "$tmp/job"
  expect_out "vexp: error: $src/clusters/local.toml: no [scheduler] table: vexp submit needs one"
  one_line; nothing_submitted
  no_crash
  ;;
*) fail "unknown test $name" ;;
esac
echo "ok [$name]"
