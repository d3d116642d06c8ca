# Every string that reaches job.sbatch is checked, comments included (issue #36 item 2).
# A --cluster path with a newline put shell lines into the batch script through its
# comment lines ("#   vexp submit ... --cluster '...'", "# [scheduler] setup of ..."),
# for `vexp submit` and `vexp sweep --cluster` alike: a real job ran `touch PWNED`.
# The script's own records went to jobs.jsonl with the shell's `>>`, which follows a
# planted link (it wrote outside the run folder), and `vexp submit` reported failure
# for a job it had queued. Now: refused in one line, nothing written or submitted;
# the records go through `vexp job-record` (no link followed, the job goes on); a
# submitted job is reported submitted.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
mkdir -p bin
printf '#!/bin/sh\necho "$@" >>"%s/sbatch.log"\necho "4242"\n' "$tmp" >bin/sbatch
printf '#!/bin/bash\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n' >bin/srun
chmod +x bin/*
export PATH="$tmp/bin:$PATH"
pwned() { find "$tmp" -name 'PWNED*' | grep -q . && fail "a string from a path ran as a shell line"; return 0; }

# 1. A cluster file whose name holds a newline and a shell line.
evil=$'c\ntouch PWNED_SUBMIT\n.toml'
{ cat "$C"; printf 'setup = ["true"]\n'; } >"$evil"
expect_rc 2 -- "$vexp" submit tiny.toml --cluster "$evil" --out job
expect_out "holds a newline or another control character, which a batch script cannot hold; rename it; nothing written, nothing submitted"
[ "$(grep -c . "$tmp/out")" = 1 ] || fail "more than one line: $(cat "$tmp/out")"
[ ! -e job/job.sbatch ] || fail "a refused submit wrote job.sbatch"
[ ! -e sbatch.log ] || fail "sbatch ran for a refused submit"
cat >sw.toml <<TOML
[sweep]
base = "$tmp/tiny.toml"
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
TOML
expect_rc 2 -- "$vexp" sweep sw.toml --out s --cluster "$evil" --dry-run
expect_out "holds a newline or another control character, which a batch script cannot hold"
expect_rc 2 -- "$vexp" sweep sw.toml --out s --cluster "$evil" --no-report
expect_out "holds a newline or another control character"
[ ! -e sbatch.log ] || fail "sbatch ran for a refused sweep"
[ ! -e s ] || fail "a refused sweep wrote its folder"
pwned

# 2. jobs.jsonl planted as a link to a file outside the run folder: the submit's own
# record is refused, the job is still reported submitted (exit 0).
printf 'export PATH=/usr/bin\n' >bashrc
mkdir job && ln -s "$tmp/bashrc" job/jobs.jsonl
expect_rc 0 -- "$vexp" submit tiny.toml --cluster "$C" --out job
expect_out "submitted Slurm job 4242"
expect_out "warning: cannot append to '$tmp/job/jobs.jsonl': it is a symbolic link"
[ "$(cat bashrc)" = "export PATH=/usr/bin" ] || fail "the submit appended through the planted link"
# The script itself: its start and end records go through vexp job-record, which
# refuses the link; the job runs to the end all the same.
grep -q 'job-record "$run_dir"' job/job.sbatch || fail "the script does not record through vexp job-record"
grep -q '>>"$run_dir/jobs.jsonl"' job/job.sbatch && fail "the script still appends with >>"
SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=0 VEXP_TEST_EPOCHS=1 bash job/job.sbatch >job.out 2>&1 || { cat job.out; fail "the job failed"; }
grep -q "could not record the start (running) event in jobs.jsonl" job.out || { cat job.out; fail "the refused record was not said"; }
grep -q "the run is complete" job.out || { cat job.out; fail "the job did not complete"; }
[ "$(cat bashrc)" = "export PATH=/usr/bin" ] || fail "the batch script appended through the planted link"
# A hard link is refused too.
rm job/jobs.jsonl && ln bashrc job/jobs.jsonl
expect_rc 1 -- env SLURM_JOB_ID=4242 "$vexp" job-record job end completed 0
expect_out "cannot append to 'job/jobs.jsonl': it has more than one name"
[ "$(cat bashrc)" = "export PATH=/usr/bin" ] || fail "job-record appended to a hard link"
# Without a planted file the records are JSON lines vexp status reads.
rm job/jobs.jsonl
expect_rc 0 -- env SLURM_JOB_ID='42"x' SLURM_RESTART_COUNT=1 SLURM_JOB_NODELIST=$'n1\n{"evil":1}' "$vexp" job-record job start running
expect_rc 0 -- env SLURM_JOB_ID=42 "$vexp" job-record job end completed 0
$PY - job/jobs.jsonl <<'PY' || fail "jobs.jsonl is not what job-record should write"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [e["event"] for e in ev] == ["start", "end"], ev
assert ev[0]["job"] == "42" and ev[0]["restart"] == 1 and ev[0]["nodes"] == "n1evil1", ev[0]
assert ev[1]["state"] == "completed" and ev[1]["exit"] == 0, ev[1]
PY
expect_rc 2 -- "$vexp" job-record job begin running
expect_out "job event 'begin' is not start or end"
pwned
no_crash
exit 0
