# vexp sweep --cluster takes vexp submit's --time, --partition and --account (#36): the
# same meaning and the same checks (one function, slurm::apply_choices), every trial's
# job asks for them, and they are recorded in sweep.db: a driver started again without
# them submits the rest of the trials with the recorded values, and a value given
# again replaces the recorded one. Slurm stand-ins: sbatch answers job 4245 (its
# arguments in sbatch.log), squeue shows it PENDING until $tmp/gone exists.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml   # signal_lead_s = 45, time = "1", partition = "debug"
slurm_stand_ins 4245
cat >sw.toml <<TOML
[sweep]
name = "choices"
base = "$tmp/tiny.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
TOML
nothing() {
  [ ! -e sbatch.log ] || fail "sbatch ran: $(cat sbatch.log)"
  [ ! -e s ] || fail "a refused sweep wrote its folder"
}
# Refused as vexp submit refuses them, in the same words: one line, nothing written.
expect_rc 2 -- "$vexp" sweep sw.toml --cluster "$C" --out s --time 0:30
want="vexp: error: --time '0:30' is 30 s, not longer than $C's signal_lead_s = 45 (the run is told to stop that long before the limit); nothing submitted"
expect_out "$want"
[ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }
nothing
expect_rc 2 -- "$vexp" submit tiny.toml --cluster "$C" --out job --time 0:30
expect_out "$want"
expect_rc 2 -- "$vexp" sweep sw.toml --cluster "$C" --out s --partition 'gpu;reboot'
expect_out "vexp: error: --partition 'gpu;reboot' holds ';' (a name has only letters, digits and ._-); nothing submitted"
nothing
expect_rc 2 -- "$vexp" sweep sw.toml --out s --account proj.1
expect_out "--time, --partition and --account apply to a cluster sweep (--cluster FILE)"
nothing
# --dry-run: every trial's script asks for them, nothing written.
expect_rc 0 -- "$vexp" sweep sw.toml --cluster "$C" --out s --time 7 --partition gpu --account proj.1 --dry-run
for line in '#SBATCH --time=7' '#SBATCH --partition=gpu' '#SBATCH --account=proj.1'; do
  [ "$(grep -cx -- "$line" "$tmp/out")" = 2 ] || { cat "$tmp/out"; fail "not 2 scripts with $line"; }
done
nothing
# A driver with them: trial 001 is submitted (--max-running 1: trial 002 waits), then the
# driver is stopped.
"$vexp" sweep sw.toml --cluster "$C" --out s --time 7 --partition gpu --account proj.1 --max-running 1 --poll 1 \
  --no-report >first.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "trial 001 submitted" first.log && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q "trial 001 submitted" first.log || { cat first.log; fail "trial 001 not submitted"; }
kill -TERM $pid; wait $pid
for line in '#SBATCH --time=7' '#SBATCH --partition=gpu' '#SBATCH --account=proj.1'; do
  grep -qx -- "$line" s/trials/001/job.sbatch || fail "trial 001's job lacks $line"
done
[ ! -e s/trials/002/job.sbatch ] || fail "trial 002 was submitted past --max-running 1"
# Started again without them: trial 001's job has ended (squeue no longer lists it), trial
# 002 is submitted with the recorded values.
touch gone
expect_rc 1 -- "$vexp" sweep sw.toml --cluster "$C" --out s --max-running 1 --poll 1 --no-report
expect_out "the trials are submitted with --time 7 --partition gpu --account proj.1, recorded by an earlier driver of this sweep"
expect_out "trial 002 submitted: job 4245"
for line in '#SBATCH --time=7' '#SBATCH --partition=gpu' '#SBATCH --account=proj.1'; do
  grep -qx -- "$line" s/trials/002/job.sbatch || { cat s/trials/002/job.sbatch; fail "trial 002's job lacks $line"; }
done
grep -qF -- "--cluster $C --time 7 --partition gpu --account proj.1)" s/trials/002/job.sbatch ||
  fail "the script's header does not name the options"
# Given again with another value: it replaces the recorded one; the others stay.
expect_rc 1 -- "$vexp" sweep sw.toml --cluster "$C" --out s --retry-failed --time 9 --poll 1 --no-report
expect_out "the trials are submitted with --partition gpu --account proj.1, recorded by an earlier driver"
for t in 001 002; do
  grep -qx -- '#SBATCH --time=9' s/trials/$t/job.sbatch || fail "trial $t's job does not ask for --time=9"
  grep -qx -- '#SBATCH --partition=gpu' s/trials/$t/job.sbatch || fail "trial $t's job lost --partition=gpu"
done
$PY -c "
import json, sqlite3, sys
v = dict(sqlite3.connect('s/sweep.db').execute('SELECT key, value FROM meta').fetchall())
c = json.loads(v['slurm_choices'])
assert c == {'time': '9', 'partition': 'gpu', 'account': 'proj.1'}, c
" || fail "sweep.db does not record the choices"
[ "$(wc -l <sbatch.log)" -eq 4 ] || fail "sbatch ran $(wc -l <sbatch.log) times, expected 4"
no_crash
exit 0
