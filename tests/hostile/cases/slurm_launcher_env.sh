# What launchers leave in the environment, without a launcher (the Slurm tests skip
# where Slurm cannot run): several tasks with a local backend are refused before
# anything is written; a batch shell's allocation, one task, and malformed counts
# are one process; nothing crashes on hostile values.
source "$(dirname "$0")/../lib.sh"
R=$tmp/tiny.toml
# A Slurm step of 2 tasks, its first task: one line naming dist.backend, the launcher, the count.
expect_rc 2 -- env SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_NTASKS=2 SLURM_PROCID=0 \
  "$vexp" run "$R" --out "$tmp/a"
expect_out "dist.backend = \"local\" trains in one process, but Slurm (srun) started 2 tasks (SLURM_STEP_NUM_TASKS=2)"
expect_out "add --set dist.backend=mpi"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }
[ ! -e "$tmp/a" ] || fail "a refused run wrote its directory"
# Its second task exits 2 without repeating the line.
expect_rc 2 -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 "$vexp" run "$R" --out "$tmp/a"
[ ! -s "$tmp/out" ] || { cat "$tmp/out"; fail "the second task printed"; }
[ ! -e "$tmp/a" ] || fail "a refused run wrote its directory"
# Open MPI, PMI, PMIx (a rank above 0 shows several) and torchrun-style WORLD_SIZE.
expect_rc 2 -- env OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=0 "$vexp" run "$R" --out "$tmp/a" --dry-run
expect_out "Open MPI (mpirun) started 4 tasks (OMPI_COMM_WORLD_SIZE=4)"
expect_rc 2 -- env PMI_SIZE=3 PMI_RANK=0 "$vexp" run "$R" --dry-run
expect_out "PMI started 3 tasks"
expect_rc 2 -- env WORLD_SIZE=2 RANK=0 "$vexp" run "$R" --dry-run
expect_out "WORLD_SIZE started 2 tasks"
expect_rc 2 -- env PMIX_RANK=1 "$vexp" run "$R" --dry-run
[ ! -s "$tmp/out" ] || { cat "$tmp/out"; fail "a later PMIx task printed"; }
# The switch the line names works: with the MPI backend the plan counts the tasks.
expect_rc 0 -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 \
  "$vexp" run "$R" --set dist.backend=mpi --set dist.world_size=4 --dry-run
expect_out "world size:        4 GPUs (ranks launched: 2)"
# A batch shell (an allocation of 2, no step) and a step of one task are one process.
expect_rc 0 -- env SLURM_JOB_ID=1 SLURM_NTASKS=2 SLURM_NPROCS=2 SLURM_PROCID=0 "$vexp" run "$R" --dry-run
expect_out "(ranks launched: 1)"
expect_rc 0 -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0 "$vexp" run "$R" --dry-run
expect_out "(ranks launched: 1)"
# Hostile counts are no counts: neither a crash nor a refusal.
for bad in "" "2x" "-5" "99999999999999999999999999" $'2\n3' "0x10"; do
  expect_rc 0 -- env OMPI_COMM_WORLD_SIZE="$bad" OMPI_COMM_WORLD_RANK="$bad" "$vexp" run "$R" --dry-run
  expect_out "(ranks launched: 1)"
  no_crash
done
