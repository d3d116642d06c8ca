# A cluster file for jobs only (#36): vexp submit and vexp sweep --cluster read [cluster]
# and [scheduler], and required vexp plan's [gpu], [links.inter] and [cpu] all the same.
# Now such a file is enough for them; vexp check says it is valid for them and what
# vexp plan would lack; vexp plan refuses it at the missing tables. And gpus_per_node,
# which means the ranks per node in [cluster] and the GPUs asked of Slurm in
# [scheduler]: where the two differ, the error says both meanings.
source "$(dirname "$0")/../lib.sh"
slurm_stand_ins 4246
touch gone
cat >jobs.toml <<'TOML'
[cluster]
name = "jobs only"
nodes = 2
gpus_per_node = 1

[scheduler]
kind = "slurm"
partition = "debug"
time = "5"
launcher = ["srun", "--mpi=pmix"]
signal_lead_s = 45
TOML
TWO=(--set dist.backend=mpi --set dist.world_size=2)
one_trial_sweep sw.toml jobsonly
expect_rc 0 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster jobs.toml --out job --dry-run
expect_out "#SBATCH --nodes=2"
expect_out "#SBATCH --partition=debug"
[ ! -e job ] || fail "--dry-run wrote job"
expect_rc 0 -- "$vexp" submit tiny.toml "${TWO[@]}" --cluster jobs.toml --out job
expect_out "submitted Slurm job 4246: $tmp/job (2 node(s) x 1 task(s)"
expect_rc 0 -- "$vexp" sweep sw.toml --cluster jobs.toml --out s --dry-run
expect_out "# ---- trial 001: 1 node(s) x 1 task(s) = 1 rank(s) for dist.world_size = 1"
expect_rc 1 -- "$vexp" sweep sw.toml --cluster jobs.toml --out s --poll 1 --no-report
expect_out "trial 001 submitted: job 4246"
expect_rc 0 -- "$vexp" check jobs.toml
expect_out "jobs.toml: ok for vexp submit and vexp sweep --cluster (cluster 'jobs only': 2 node(s) x 1 GPU(s), [scheduler] slurm); vexp plan also needs [gpu], [cpu], [links.inter]"
expect_rc 2 -- "$vexp" plan tiny.toml --cluster jobs.toml
expect_out "jobs.toml:1:1: error: a cluster file needs a [gpu] table"
expect_out "jobs.toml:1:1: error: a cluster file needs a [cpu] table"
# Without [scheduler] it is nothing: vexp check says what is missing.
sed '/^\[scheduler\]/,$d' jobs.toml >bare.toml
expect_rc 2 -- "$vexp" check bare.toml
expect_out "needs a [gpu] table"
expect_rc 2 -- "$vexp" submit tiny.toml --cluster bare.toml --out job2
expect_out "bare.toml: no [scheduler] table: vexp submit needs one"
# The two gpus_per_node: 2 ranks per node on 1 GPU asked for.
sed 's/^gpus_per_node = 1/gpus_per_node = 2/; s/^kind = "slurm"/kind = "slurm"\ngpus_per_node = 1/' jobs.toml >gpus.toml
line=$(grep -n '^gpus_per_node = 1' gpus.toml | cut -d: -f1)
for cmd in "submit tiny.toml --cluster gpus.toml --out job3" "sweep sw.toml --cluster gpus.toml --out s3" "check gpus.toml"; do
  expect_rc 2 -- "$vexp" $cmd
  expect_out "gpus.toml:$line:1: error: 'gpus_per_node' in [scheduler] is 1, and [cluster] gpus_per_node is 2: the two differ in meaning ([cluster] gpus_per_node is the ranks vexp starts on each node, one per GPU; [scheduler] gpus_per_node the GPUs each node asks Slurm for, sbatch --gpus-per-node), so the job would start 2 rank(s) per node on 1 GPU(s) (ranks sharing a GPU)"
done
[ ! -e job3 ] && [ ! -e s3 ] || fail "a refused command wrote its folder"
[ "$(wc -l <sbatch.log)" -eq 2 ] || fail "sbatch ran $(wc -l <sbatch.log) times, expected 2"
no_crash
exit 0
