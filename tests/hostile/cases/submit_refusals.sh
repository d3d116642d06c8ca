# vexp submit refuses bad input in one line, before anything is written or submitted:
# a cluster file without [scheduler], no sbatch on PATH, a world the nodes cannot
# hold, names and values that would become shell or #SBATCH syntax, a time limit
# shorter than the signal's lead, an sbatch that refuses the job (its directory is
# removed again). Slurm itself is not needed: a stand-in sbatch on PATH.
source "$(dirname "$0")/../lib.sh"
C=$src/tests/slurm/data/fixture_cluster.toml
TWO=(--set dist.backend=mpi --set dist.world_size=2)
mkdir -p bin empty
one_line() { [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }; }
nothing() { [ ! -e "$tmp/job" ] || fail "a refused submit left $tmp/job"; [ ! -e "$tmp/submitted" ] || fail "sbatch ran"; }

expect_rc 2 -- "$vexp" submit tiny.toml --cluster "$src/clusters/local.toml" --out job
expect_out "vexp: error: $src/clusters/local.toml: no [scheduler] table: vexp submit needs one"
one_line; nothing
expect_rc 1 -- env PATH="$tmp/empty" "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --out job
expect_out "vexp: error: sbatch is not on PATH"; one_line; nothing
# (a stand-in sbatch from here on)
cat >bin/sbatch <<EOF
#!/bin/sh
echo "\$@" >"$tmp/submitted"
case "\$(cat "\$2")" in *"--partition=nope"*) echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1 ;; esac
echo "4242;vexptest"
EOF
chmod +x bin/sbatch
export PATH="$tmp/bin:$PATH"
expect_rc 2 -- "$vexp" submit tiny.toml --set dist.backend=mpi --set dist.world_size=4 --cluster "$C" --out job
expect_out "vexp: error: dist.world_size = 4 needs 4 nodes of 1 GPU(s), and $C has 2; --nodes 2 emulates that world exactly"
one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml --set dist.backend=mpi --set dist.world_size=4 --nodes 3 --cluster "$C" --out job
expect_out "vexp: error: --nodes 3: $C has 2 node(s)"; one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml --set dist.world_size=2 --cluster "$C" --out job
expect_out "dist.backend = \"local\" trains in one process, and the job has 2 ranks; add --set dist.backend=mpi"
one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --partition 'debug;reboot' --out job
expect_out "vexp: error: --partition 'debug;reboot' holds ';'"; one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --time '1 && reboot' --out job
expect_out "vexp: error: --time '1 && reboot' is not a Slurm time limit"; one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --time 0:45 --out job
expect_out "vexp: error: --time '0:45' is 45 s, not longer than $C's signal_lead_s = 45"; one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --set $'run.name=a\nb' --cluster "$C" --out job
expect_out "holds a newline or control character"; one_line; nothing
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --out 'my job'
expect_out "which an #SBATCH line cannot hold; choose another with --out"; one_line
[ ! -e "my job" ] || fail "a refused submit created 'my job'"
# A setup line that is two lines: located in the cluster file.
{ cat "$C"; printf 'setup = ["module load a\\nrm -rf ~"]\n'; } >c.toml
line=$(grep -n '^setup' c.toml | cut -d: -f1)
expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster c.toml --out job
expect_out "c.toml:$line:1: error: 'setup' in [scheduler] holds a newline or control character"; nothing
# sbatch says no: its reason in one line, nothing submitted, no directory left.
expect_rc 1 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --partition nope --out job
expect_out "vexp: error: sbatch refused the job (exit code 1): sbatch: error: Batch job submission failed: Invalid partition name specified; nothing submitted"
one_line
[ ! -e job ] || fail "a refused job left its directory: $(ls -a job)"
rm -f submitted
# A folder that holds a finished run (#36): its job would "complete" at once (vexp run
# --resume auto of a finished run) and write summary.json anew. Refused up front, with
# --dry-run too: one line, nothing queued, nothing written in the folder.
mkdir -p done && echo '{"top1": 0.5}' >done/summary.json && cp done/summary.json summary.before
for dry in "" --dry-run; do
  expect_rc 2 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --out done ${dry:+"$dry"}
  expect_out "vexp: error: '$tmp/done' holds a finished run (summary.json): give another --out, or move that run away"
  expect_out "nothing submitted"; one_line
done
[ ! -e submitted ] || fail "sbatch ran for a finished run: $(cat submitted)"
[ "$(ls -A done)" = summary.json ] || fail "a refused submit wrote into the finished run: $(ls -A done)"
cmp -s done/summary.json summary.before || fail "a refused submit changed summary.json"
# --dry-run: the script on stdout, valid sh, nothing written or submitted.
"$vexp" submit tiny.toml "${TWO[@]}" --set "run.name=it's" --cluster "$C" --out job --dry-run >script.sh 2>dry.err ||
  { cat dry.err; fail "--dry-run failed"; }
nothing
bash -n script.sh || fail "the script is not valid bash"
grep -q "^#SBATCH --nodes=2$" script.sh || fail "no --nodes=2"
grep -q -- "--set 'run.name=it'\\\\''s'" script.sh || { cat script.sh; fail "a quote in a --set value is not quoted"; }
grep -qF "dry run: 2 node(s) x 1 task(s) = 2 rank(s)" dry.err || { cat dry.err; fail "dry run summary"; }
# Fewer nodes than the world needs: emulated, and said so.
"$vexp" submit tiny.toml --set dist.backend=mpi --set dist.world_size=4 --nodes 2 --cluster "$C" --out job --dry-run \
  >/dev/null 2>dry.err || { cat dry.err; fail "--nodes 2 of a world of 4"; }
grep -qF "each rank emulates 2 of them" dry.err || { cat dry.err; fail "emulation not said"; }
# A cluster file's backend stands in for a recipe's local one.
{ cat "$C"; printf 'backend = "mpi"\n'; } >mpi.toml
"$vexp" submit tiny.toml --set dist.world_size=2 --cluster mpi.toml --out job --dry-run >script.sh 2>dry.err ||
  { cat dry.err; fail "the cluster's backend was not used"; }
grep -qF -- "--set dist.backend=mpi" script.sh || { cat script.sh; fail "no --set dist.backend=mpi in the script"; }
grep -qF "dist.backend=mpi (the recipe's is local; mpi.toml's [scheduler] backend)" dry.err || { cat dry.err; fail "backend not said"; }
# Submitted: the job id printed and recorded; the directory's lock is not held.
expect_rc 0 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster "$C" --out job
expect_out "submitted Slurm job 4242: $tmp/job (2 node(s) x 1 task(s)"
grep -q '"event":"submitted","job":"4242"' job/jobs.jsonl || fail "job 4242 not recorded"
grep -qx -- "--parsable $tmp/job/job.sbatch" submitted || fail "sbatch argv: $(cat submitted)"
expect_rc 0 -- "$vexp" status job
expect_out "job 4242: 0 start(s), 0 requeue(s) of at most 3"
expect_out "last: submitted, not started yet"
no_crash
exit 0
