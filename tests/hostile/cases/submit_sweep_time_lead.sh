# A time limit not longer than signal_lead_s (issue #35 item 3): the run is told to stop
# that long before the limit, so it would be stopped before it starts. `vexp submit`
# refused such a [scheduler] time and `vexp sweep --cluster` submitted it, every trial
# a job. Now the check is made once, where the settings are read: the cluster file is
# refused at its time's line by both commands in the same words (exit 2, nothing
# written or submitted), and vexp submit's --time is held to the same check. Slurm
# stand-ins: sbatch answers job 4244 (its arguments in sbatch.log); squeue shows the
# job ended ($tmp/gone), so a sweep that submits does not wait.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml   # signal_lead_s = 45
slurm_stand_ins 4244
touch "$tmp/gone"
one_trial_sweep sw.toml lead
nothing() {
  [ ! -e sbatch.log ] || fail "sbatch ran: $(cat sbatch.log)"
  [ ! -e job ] && [ ! -e s ] || fail "a refused command wrote its folder"
}
errors() { grep 'error' "$1"; }
sed 's/^time = .*/time = "0:45"/' "$C" >short.toml
line=$(grep -n '^time' short.toml | cut -d: -f1)
msg="short.toml:$line:1: error: 'time' in [scheduler] is 45 s, not longer than signal_lead_s = 45 (the run is told to stop that long before the limit)"

expect_rc 2 -- "$vexp" submit tiny.toml --cluster short.toml --out job
expect_out "$msg"
nothing
cp "$tmp/out" submit.out
expect_rc 2 -- "$vexp" sweep sw.toml --cluster short.toml --out s --poll 1 --no-report
expect_out "$msg"
nothing
[ "$(errors submit.out)" = "$(errors "$tmp/out")" ] || fail "vexp sweep --cluster refused it in other words than vexp submit"
expect_rc 2 -- "$vexp" sweep sw.toml --cluster short.toml --out s --dry-run
expect_out "$msg"
nothing
expect_rc 2 -- "$vexp" check short.toml
expect_out "$msg"
# vexp submit --time: the same check, over the cluster file's signal_lead_s.
expect_rc 2 -- "$vexp" submit tiny.toml --cluster "$C" --time 0:30 --out job
expect_out "vexp: error: --time '0:30' is 30 s, not longer than $C's signal_lead_s = 45 (the run is told to stop that long before the limit); nothing submitted"
nothing

# A second longer than the lead: both submit it.
sed 's/^time = .*/time = "0:46"/' "$C" >ok.toml
expect_rc 0 -- "$vexp" submit tiny.toml --cluster ok.toml --out job
expect_out "submitted Slurm job 4244"
grep -qx '#SBATCH --time=0:46' job/job.sbatch || fail "vexp submit's job has no --time=0:46"
expect_rc 1 -- "$vexp" sweep sw.toml --cluster ok.toml --out s --poll 1 --no-report
expect_out "trial 001 submitted: job 4244"
grep -qx '#SBATCH --time=0:46' s/trials/001/job.sbatch || fail "the sweep's job has no --time=0:46"
[ "$(wc -l <sbatch.log)" -eq 2 ] || fail "sbatch ran $(wc -l <sbatch.log) times, expected 2"
no_crash
exit 0
