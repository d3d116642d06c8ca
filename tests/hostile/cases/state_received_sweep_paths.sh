# A stored path is never trusted (issue #36 item 1). The cluster sweep driver took a
# trial's folder from sweep.db's run_dir column and appended its outcome to
# <run_dir>/log.txt through an ofstream that follows links: a received sweep.db whose
# run_dir held a newline and named a folder whose log.txt links to a bashrc-like file
# wrote a shell line into it. `results --best-recipe` and the report read another
# folder's files through the column, and a copied cluster sweep folder wrote into the
# original's trials. Now every trial folder is DIR/trials/NNN of the folder given, the
# column is a label, and every append refuses a link. Slurm stand-ins: sbatch answers a
# job id, squeue shows the job PENDING until $tmp/gone exists, then nothing (ended).
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
slurm_stand_ins 4243
one_trial_sweep sw.toml received
# A driver that submits the trial and is stopped while the job is pending.
submit_and_stop() {  # DIR
  "$VEXP_DRIVER" sweep sw.toml --out "$1" --cluster "$C" --poll 1 --no-report >"$1.log" 2>&1 &
  local p=$! i
  for i in $(seq 1 200); do grep -q "submitted: job 4243" "$1.log" 2>/dev/null && break; sleep 0.1; done
  kill -INT "$p"; wait "$p"
  grep -q "submitted: job 4243" "$1.log" || { cat "$1.log"; fail "the trial was not submitted"; }
}
VEXP_DRIVER=$vexp
printf 'export PATH=/usr/bin\n' >bashrc
sum() { md5sum "$1" | cut -d' ' -f1; }
rc_before=$(sum bashrc)

# 1. A received sweep.db naming a folder with a newline whose log.txt links to bashrc.
submit_and_stop s
mkdir -p "victim"$'\n'"x" && ln -s "$tmp/bashrc" "victim"$'\n'"x/log.txt"
$PY - s/sweep.db "$tmp/victim"$'\n'"x" <<'PY' || fail "could not edit sweep.db"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE trials SET run_dir=? WHERE id=1", (sys.argv[2],))
db.commit()
PY
touch gone
expect_rc 1 -- "$vexp" sweep sw.toml --out s --cluster "$C" --poll 1 --no-report
expect_out "this sweep folder is a copy of another (or was moved)"
grep -q "^x'" "$tmp/out" && fail "a stored path's newline reached the terminal raw"
[ "$(sum bashrc)" = "$rc_before" ] || fail "the driver appended to a file a stored path named"
[ ! -e scancel.log ] || fail "the driver cancelled a job a received store named"
rm gone

# 2. A copy of a cluster sweep folder with a queued job: the copy does not follow (or
# write into) the original's trial.
submit_and_stop orig
cp -a orig copy
log_before=$(sum orig/trials/001/log.txt)
touch gone
expect_rc 1 -- "$vexp" sweep sw.toml --out copy --cluster "$C" --poll 1 --no-report
expect_out "trial 001's job 4243 was submitted for '$tmp/orig/trials/001', not for '$tmp/copy/trials/001'"
[ "$(sum orig/trials/001/log.txt)" = "$log_before" ] || fail "the copy wrote into the original's trial"
# The original itself follows its job to the end, in its own folder.
expect_rc 1 -- "$vexp" sweep sw.toml --out orig --cluster "$C" --poll 1 --no-report
expect_out "trial 001 failed (job 4243)"
grep -q "end of trial 001 failed" orig/trials/001/log.txt || fail "the outcome is not in the trial's own log"
rm gone

# 3. The trial's own log.txt planted as a link: the append is refused, nothing written.
submit_and_stop own
rm own/trials/001/log.txt && ln -s "$tmp/bashrc" own/trials/001/log.txt
touch gone
expect_rc 1 -- "$vexp" sweep sw.toml --out own --cluster "$C" --poll 1 --no-report
expect_out "cannot append to '$tmp/own/trials/001/log.txt': it is a symbolic link"
[ "$(sum bashrc)" = "$rc_before" ] || fail "an outcome was appended through a planted log.txt link"

# 4. A local sweep's store naming another run folder: results and the report read
# the trial's own folder.
expect_rc 0 -- "$vexp" sweep sw.toml --out local --no-report
VEXP_TEST_EPOCHS=1 "$vexp" run tiny.toml --out other --set run.name=OTHER_RUN >/dev/null 2>&1 || fail "the other run failed"
$PY - local/sweep.db "$tmp/other" <<'PY' || fail "could not edit sweep.db"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE trials SET run_dir=?", (sys.argv[2],))
db.commit()
PY
expect_rc 0 -- "$vexp" results local --best-recipe best.toml
grep -q OTHER_RUN best.toml && fail "--best-recipe copied another folder's recipe"
grep -q "^# from trial 001 " best.toml || fail "best.toml does not say it is trial 001's recipe"
# The cell's recipe is trial 001's resolved recipe less the sweep slot's run.threads
# (report::write_best_recipe), written again by the DSL: compare what it says.
$PY - best.toml local/trials/001/resolved.toml <<'PY' || fail "best.toml is not trial 001's recipe"
import sys, tomllib
best = tomllib.load(open(sys.argv[1], "rb"))
trial = tomllib.load(open(sys.argv[2], "rb"))
trial.get("run", {}).pop("threads", None)
sys.exit(0 if best == trial else 1)
PY
expect_rc 0 -- "$vexp" results local --csv
expect_out "$tmp/local/trials/001"
expect_no_out "$tmp/other"
no_crash
exit 0
