# A sweep folder runs one way (issue #36 item 7.1). A plain `vexp sweep SWEEP --out DIR`
# on a folder made by `vexp sweep --cluster` ran every queued trial again on this
# machine and forgot their job ids; `--cluster` on a local sweep folder whose trials
# were interrupted submitted them again as Slurm jobs. The store records how the folder
# runs (meta runs_on, cluster_file), a store of an earlier vexp is judged by its rows,
# and the other way is refused in one line that says how to follow it. Slurm stand-ins:
# sbatch answers a job id, squeue shows the job PENDING until $tmp/gone exists.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
slurm_stand_ins 4243
one_trial_sweep sw.toml runs_on
# The refusal is one line (stdout has the sweep's "1 trials, every recipe valid" before it).
one_line() { [ "$(grep -c 'vexp: error' "$tmp/out")" -eq 1 ] && [ "$(grep -vc 'vexp: error\|every recipe valid' "$tmp/out")" -eq 0 ] || { cat "$tmp/out"; fail "not one line"; }; }
sql() {  # DB STATEMENT
  $PY - "$1" "$2" <<'PY' || fail "could not edit $1"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.execute(sys.argv[2]); db.commit()
PY
}
row() { $PY -c 'import sqlite3,sys; print("|".join(str(x) for x in sqlite3.connect(sys.argv[1]).execute("SELECT status, job FROM trials WHERE id=1").fetchone()))' "$1"; }

# 1. A cluster sweep with a queued job, stopped; a plain vexp sweep on its folder.
"$vexp" sweep sw.toml --out cs --cluster "$C" --poll 1 --no-report >cs.log 2>&1 &
p=$!
for i in $(seq 1 200); do grep -q "submitted: job 4243" cs.log 2>/dev/null && break; sleep 0.1; done
kill -INT "$p"; wait "$p"
grep -q "submitted: job 4243" cs.log || { cat cs.log; fail "the trial was not submitted"; }
[ "$(row cs/sweep.db)" = "running|4243" ] || fail "the stopped driver left $(row cs/sweep.db)"
expect_rc 1 -- "$vexp" sweep sw.toml --out cs --no-report
expect_out "vexp: error: 'cs' is a cluster sweep: its trials are Slurm jobs submitted with --cluster '$C' (1 queued or running, their job ids in sweep.db); a plain vexp sweep would run them again on this machine and forget their jobs: follow it with vexp sweep sw.toml --out cs --cluster $C"
one_line
[ "$(row cs/sweep.db)" = "running|4243" ] || fail "the refused sweep changed the trial: $(row cs/sweep.db)"
[ ! -e cs/trials/001/resolved.toml ] || fail "the refused sweep ran the queued trial here"
# 2. The same folder written by an earlier vexp (no runs_on key): its rows say so.
sql cs/sweep.db "DELETE FROM meta WHERE key IN ('runs_on', 'cluster_file')"
expect_rc 1 -- "$vexp" sweep sw.toml --out cs --no-report
expect_out "vexp: error: 'cs' is a cluster sweep: its trials are Slurm jobs submitted with --cluster (1 queued or running, their job ids in sweep.db); a plain vexp sweep would run them again on this machine and forget their jobs: follow it with vexp sweep sw.toml --out cs --cluster CLUSTER.toml"
one_line
[ ! -e cs/trials/001/resolved.toml ] || fail "the refused sweep ran the queued trial here"
# The way it says is followed: the job is followed to its end (and the key recorded).
touch gone
expect_rc 1 -- "$vexp" sweep sw.toml --out cs --cluster "$C" --poll 1 --no-report
expect_out "trial 001 failed (job 4243)"
[ "$($PY -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT value FROM meta WHERE key=\"runs_on\"").fetchone()[0])' cs/sweep.db)" = cluster ] \
  || fail "the store of an earlier vexp did not record runs_on"
rm gone
[ "$(wc -l <sbatch.log)" -eq 1 ] || fail "the job was submitted more than once"

# 3. A local sweep whose trial was interrupted (killed while running): --cluster refused.
expect_rc 0 -- "$vexp" sweep sw.toml --out ls --no-report
sql ls/sweep.db "UPDATE trials SET status='running' WHERE id=1"
expect_rc 1 -- "$vexp" sweep sw.toml --out ls --cluster "$C" --poll 1 --no-report
expect_out "vexp: error: 'ls' is a local sweep: its trials run on this machine (1 of 1 trials started); --cluster would submit them again as Slurm jobs and mix two machines' figures in one study: follow it with vexp sweep sw.toml --out ls (without --cluster), or give --cluster a new --out"
one_line
[ "$(wc -l <sbatch.log)" -eq 1 ] || fail "a local sweep's trial was submitted"
# 4. And a local store of an earlier vexp, judged by its rows.
sql ls/sweep.db "DELETE FROM meta WHERE key IN ('runs_on', 'cluster_file')"
expect_rc 1 -- "$vexp" sweep sw.toml --out ls --cluster "$C" --poll 1 --no-report
expect_out "'ls' is a local sweep: its trials run on this machine (1 of 1 trials started)"
[ "$(wc -l <sbatch.log)" -eq 1 ] || fail "a local sweep's trial was submitted"
# Followed locally, the interrupted trial runs again.
expect_rc 0 -- "$vexp" sweep sw.toml --out ls --no-report
expect_out "trial 001 was interrupted: running it again"

# 5. sweep.db lost: the trial folders say how they ran (a jobs.jsonl: a Slurm job).
rm cs/sweep.db*
expect_rc 1 -- "$vexp" sweep sw.toml --out cs --no-report
expect_out "'cs' is a cluster sweep: its trials are Slurm jobs submitted with --cluster; a plain vexp sweep"
[ ! -e cs/trials/001/resolved.toml ] || fail "the refused sweep ran the trial here"
no_crash
exit 0
