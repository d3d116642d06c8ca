# The batch script vexp submit writes, run without Slurm (stand-in srun and scontrol):
# SIGUSR1 (the time limit is near) -> the run stops with a checkpoint -> the script
# requeues the job; the next start resumes; past max_requeues it ends with
# requeue_limit instead; SIGTERM (scancel) -> cancelled, not requeued. Each start and
# end is recorded in jobs.jsonl, and vexp status reads them.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
mkdir -p bin
printf '#!/bin/sh\necho "4242"\n' >bin/sbatch
# srun: drop its options, become the command (signals reach vexp directly).
printf '#!/bin/bash\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n' >bin/srun
# scontrol: requeue is logged; anything else finds no controller.
printf '#!/bin/sh\n[ "$1" = requeue ] || { echo "scontrol: error: Unable to contact slurm controller" >&2; exit 1; }\necho "$@" >>"%s/scontrol.log"\n' "$tmp" >bin/scontrol
chmod +x bin/*
export PATH="$tmp/bin:$PATH"
expect_rc 0 -- "$vexp" submit tiny.toml --set run.epochs=200 --cluster "$C" --out job
expect_out "submitted Slurm job 4242"

# start_job RESTART_COUNT: the script in the background, as Slurm would start it.
start_job() {
  SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=$1 SLURM_JOB_NODELIST='n[1-2]' bash job/job.sbatch >>job.out 2>&1 &
  pid=$!
}
# signal_after_steps SIGNAL N: once N more steps are logged, send SIGNAL to the script.
signal_after_steps() {
  local have want
  have=$(grep -c '"type":"step"' job/metrics.jsonl 2>/dev/null)
  want=$((have + $2))
  for _ in $(seq 1 600); do
    [ "$(grep -c '"type":"step"' job/metrics.jsonl 2>/dev/null)" -ge "$want" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Slurm's scancel signals the step's tasks as well as the batch shell.
  if [ "$1" = TERM ]; then kill -TERM "$pid" $(pgrep -P "$pid"); else kill -"$1" "$pid"; fi
  wait "$pid"
}
ends() { grep -c "\"event\":\"end\".*\"state\":\"$1\"" job/jobs.jsonl; }

start_job 0
signal_after_steps USR1 3
[ "$(ends requeued)" -eq 1 ] || { cat job.out job/jobs.jsonl; fail "not requeued after SIGUSR1"; }
grep -qx "requeue 4242" scontrol.log || { cat job.out; fail "scontrol requeue 4242 not called"; }
grep -qF "interrupted: stopped after step" job.out || { cat job.out; fail "the run did not stop with a checkpoint"; }
# srun reports every rank's clean stop as "task N: Exited with exit code 130" (#36): the
# log says right after the signal that those lines are expected.
note="every rank stops after the same step with a checkpoint and exit code 130 (the job then requeues, at most 3 times): srun's 'task N: Exited with exit code 130' lines below are expected, not failures"
grep -qF -- "$note" job.out || { cat job.out; fail "the log does not say that exit code 130 is expected"; }
signal_at=$(grep -n -F "SIGUSR1: the time limit is near" job.out | head -n 1 | cut -d: -f1)
note_at=$(grep -n -F -- "$note" job.out | head -n 1 | cut -d: -f1)
[ "$note_at" -gt "$signal_at" ] || { cat job.out; fail "the note does not follow the signal's line"; }
# The requeued start resumes; at the limit (3 of 3) it is not requeued again.
start_job 3
signal_after_steps USR1 3
grep -qF "holds a run: continuing it" job.out || { cat job.out; fail "the restart did not resume"; }
[ "$(ends requeue_limit)" -eq 1 ] || { cat job.out job/jobs.jsonl; fail "no requeue_limit end"; }
[ "$(grep -c requeue scontrol.log)" -eq 1 ] || fail "requeued past the limit: $(cat scontrol.log)"
grep -qF "not requeued: 3 requeue(s), the cluster's max_requeues" job.out || { cat job.out; fail "the limit not said"; }
# SIGTERM (scancel): cancelled, not requeued.
start_job 1
signal_after_steps TERM 3
[ "$(ends cancelled)" -eq 1 ] || { cat job.out job/jobs.jsonl; fail "not recorded as cancelled"; }
[ "$(grep -c requeue scontrol.log)" -eq 1 ] || fail "a cancelled job was requeued"
[ "$(grep -c '"event":"start"' job/jobs.jsonl)" -eq 3 ] || fail "three starts not recorded"
expect_rc 0 -- "$vexp" status job
expect_out "the run is not complete"
expect_out "job 4242: 3 start(s), 1 requeue(s) of at most 3, nodes n[1-2]"
expect_out "last: cancelled"
expect_out "Slurm: not reachable from here"
# vexp report shows the same jobs.
expect_rc 0 -- "$vexp" report job --out report.html
grep -qF "<h2>Slurm jobs</h2>" report.html || fail "no Slurm jobs section in the report"
grep -qF "<td>4242</td>" report.html || fail "job 4242 not in the report"
grep -qF "cancelled (scancel" report.html || fail "the job's last state not in the report"
no_crash
exit 0
