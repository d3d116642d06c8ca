# vexp cancel RUN_OR_SWEEP and vexp status of a sweep folder (#36), against Slurm
# stand-ins that keep a queue ($tmp/queue: sbatch adds a PENDING job, scancel makes it
# CANCELLED, squeue lists it). A run: its recorded job is cancelled and the record says
# so (vexp status: "cancelled by vexp cancel"); again: nothing to cancel. A folder with no
# recorded job, and a local sweep, are refused in one line (exit 2). A cluster sweep:
# vexp status lists the trials' jobs (trial, job, state, run folder) and a summary;
# vexp cancel cancels the queued and running jobs in one scancel call and the trials not
# submitted yet, the driver that still runs records them cancelled and submits none,
# a driver started again submits none, and --retry-cancelled submits them again.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
mkdir -p bin
cat >bin/sbatch <<SBATCH_END
#!/bin/sh
echo "\$@" >>"$tmp/sbatch.log"
n=\$(( \$(cat "$tmp/next" 2>/dev/null || echo 100) + 1 ))
echo \$n >"$tmp/next"
echo "\$n|PENDING|Priority|" >>"$tmp/queue"
echo \$n
SBATCH_END
cat >bin/squeue <<SQUEUE_END
#!/bin/sh
cat "$tmp/queue" 2>/dev/null
SQUEUE_END
cat >bin/scancel <<SCANCEL_END
#!/bin/sh
echo "\$@" >>"$tmp/scancel.log"
for j in "\$@"; do sed -i "s/^\$j|[A-Z]*|[^|]*|/\$j|CANCELLED|None|/" "$tmp/queue"; done
SCANCEL_END
chmod +x bin/*
export PATH="$tmp/bin:$PATH"
one_line() { [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }; }

# Nothing recorded: refused.
mkdir -p norun
expect_rc 2 -- "$vexp" cancel norun
expect_out "vexp: error: 'norun' has no recorded Slurm job (norun/jobs.jsonl is missing or empty): nothing to cancel"
one_line
[ ! -e scancel.log ] || fail "scancel ran"
expect_rc 1 -- "$vexp" cancel nothere
expect_out "'nothere' is not a directory"

# A run: submitted (job 101, pending), cancelled, recorded.
expect_rc 0 -- "$vexp" submit tiny.toml --cluster "$C" --out job
expect_out "submitted Slurm job 101"
expect_rc 0 -- "$vexp" cancel job
expect_out "cancelled Slurm job 101 (PENDING) of job: recorded in its jobs.jsonl"
[ "$(cat scancel.log)" = 101 ] || fail "scancel: $(cat scancel.log)"
grep -q '"event":"cancel","job":"101","state":"cancelled","by":"vexp cancel"' job/jobs.jsonl || fail "no cancel record"
expect_rc 0 -- "$vexp" status job
expect_out "last: cancelled by vexp cancel ("
expect_rc 0 -- "$vexp" cancel job
expect_out "nothing to cancel in job: job 101 ended (its record says: cancelled by vexp cancel"
[ "$(wc -l <scancel.log)" -eq 1 ] || fail "scancel ran again: $(cat scancel.log)"

# A local sweep: its trials are no Slurm jobs.
one_trial_sweep local.toml localsw
expect_rc 0 -- "$vexp" sweep local.toml --out ls --no-report
expect_rc 2 -- "$vexp" cancel ls
expect_out "vexp: error: 'ls' is a local sweep: its trials run on this machine, not as Slurm jobs; nothing to cancel"
one_line
expect_rc 0 -- "$vexp" status ls
expect_out "ls: local sweep 'localsw' (1 trials): its trials run on this machine, not as Slurm jobs"

# A cluster sweep of three trials, two at a time: jobs 102 and 103, trial 003 waits.
cat >sw.toml <<TOML
[sweep]
name = "cs"
base = "$tmp/tiny.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.01, 0.02, 0.03]
TOML
"$vexp" sweep sw.toml --cluster "$C" --out s --max-running 2 --poll 1 --no-report >driver.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "trial 002 submitted" driver.log && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q "trial 002 submitted: job 103" driver.log || { cat driver.log; fail "trials 1 and 2 not submitted"; }
sed -i 's/^102|PENDING|Priority|$/102|RUNNING|None|n1/' queue
sleep 1.5  # a poll sees it running
expect_rc 0 -- "$vexp" status s
expect_out "s: cluster sweep 'cs' (3 trials, --cluster $C)"
grep -qE "^001 +102 +RUNNING on n1 +$tmp/s/trials/001$" "$tmp/out" || { cat "$tmp/out"; fail "trial 001's row"; }
grep -qE "^002 +103 +PENDING \(Priority\) +$tmp/s/trials/002$" "$tmp/out" || { cat "$tmp/out"; fail "trial 002's row"; }
grep -qE "^003 +- +pending \(not submitted yet\) +$tmp/s/trials/003$" "$tmp/out" || { cat "$tmp/out"; fail "trial 003's row"; }
expect_out "3 trials: 2 running, 1 pending; 2 job(s) queued or running"
expect_no_out "no Slurm job recorded"
# Cancelled while the driver runs.
expect_rc 0 -- "$vexp" cancel s
expect_out "cancelled 2 Slurm job(s) of the sweep s: trial 001 (job 102, RUNNING), trial 002 (job 103, PENDING)"
expect_out "1 trial(s) not submitted yet are cancelled too: 003"
expect_out "--retry-cancelled submits them again"
[ "$(tail -n 1 scancel.log)" = "102 103" ] || fail "not one scancel call for both jobs: $(cat scancel.log)"
wait $pid; rc=$?
cat driver.log
[ "$rc" -eq 0 ] || fail "the driver exited $rc after vexp cancel, expected 0"
grep -q "trial 001 cancelled (job 102)" driver.log || fail "the driver did not record trial 001 cancelled"
grep -q "trial 002 cancelled (job 103)" driver.log || fail "the driver did not record trial 002 cancelled"
grep -q "trial 003 is cancelled (vexp cancel): not submitted" driver.log || fail "the driver did not skip trial 003"
[ "$(grep -c . sbatch.log)" -eq 3 ] || fail "sbatch ran $(grep -c . sbatch.log) times, expected 3 (1 run, 2 trials)"
statuses() { $PY -c "
import sqlite3; print(' '.join(r[0] for r in sqlite3.connect('s/sweep.db').execute('SELECT status FROM trials ORDER BY id')))"; }
[ "$(statuses)" = "cancelled cancelled cancelled" ] || fail "statuses: $(statuses)"
grep -q '"event":"cancel","job":"102"' s/trials/001/jobs.jsonl || fail "trial 001's job record lacks the cancel"
expect_rc 0 -- "$vexp" status s
grep -qE "^001 +102 +cancelled \(vexp cancel\) " "$tmp/out" || { cat "$tmp/out"; fail "trial 001 not shown cancelled"; }
grep -qE "^003 +- +cancelled before it was submitted " "$tmp/out" || { cat "$tmp/out"; fail "trial 003 not shown cancelled"; }
expect_out "3 trials: 3 cancelled; 0 job(s) queued or running"
expect_rc 0 -- "$vexp" results s
expect_out "3 trials: 3 cancelled"
expect_rc 0 -- "$vexp" cancel s
expect_out "nothing to cancel in s"
# A driver started again submits none of them; --retry-cancelled submits them again.
expect_rc 0 -- "$vexp" sweep sw.toml --cluster "$C" --out s --poll 1 --no-report
expect_out "0 trial(s) to submit"
expect_out "3 trial(s) cancelled by vexp cancel (not failed); --retry-cancelled submits them again"
[ "$(grep -c . sbatch.log)" -eq 3 ] || fail "a driver started again submitted a cancelled trial"
"$vexp" sweep sw.toml --cluster "$C" --out s --poll 1 --no-report --retry-cancelled >retry.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "trial 003 submitted" retry.log && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -TERM $pid; wait $pid
grep -q "3 trial(s) to submit" retry.log || { cat retry.log; fail "--retry-cancelled did not submit them"; }
[ "$(grep -c . sbatch.log)" -eq 6 ] || fail "sbatch ran $(grep -c . sbatch.log) times, expected 6"
expect_rc 2 -- "$vexp" sweep sw.toml --out s2 --retry-cancelled
expect_out "--retry-cancelled apply to a cluster sweep"
no_crash
exit 0
