# Sourced first by every hostile case: cases/NAME.sh VEXP SOURCE_DIR BUILD_DIR.
# Gives: $name $vexp $src $build, and what tests/support/setup.sh gives every shell
# test ($tmp removed on exit, a private $HOME, VEXP_PLUGIN_PATH unset, $PY, the
# expect_* helpers); the case runs in $tmp.
name=$(basename "$0" .sh)
vexp=$1 src=$2 build=$3
source "$src/tests/support/setup.sh" hostile
cd "$tmp"
# A small valid recipe to build attacks on: $tmp/tiny.toml (synthetic data, seconds to run).
sed "s|^extends = .*|extends = \"$src/recipes/quickstart/tsm_motion.toml\"|" "$src/tests/cli/data/tiny.toml" >"$tmp/tiny.toml"

# one_trial_sweep FILE NAME: a sweep file of one 1-epoch trial (optim.lr 0.05) of $tmp/tiny.toml.
one_trial_sweep() {
  cat >"$1" <<TOML
[sweep]
name = "$2"
base = "$tmp/tiny.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
TOML
}

# slurm_stand_ins JOB: Slurm's commands without a Slurm, first on PATH: sbatch answers
# job JOB (its arguments appended to $tmp/sbatch.log), squeue shows the job PENDING until
# $tmp/gone exists and nothing after (ended), scancel appends its arguments to
# $tmp/scancel.log.
slurm_stand_ins() {
  mkdir -p "$tmp/bin"
  printf '#!/bin/sh\necho "$@" >>"%s/sbatch.log"\necho %s\n' "$tmp" "$1" >"$tmp/bin/sbatch"
  printf '#!/bin/sh\n[ -e "%s/gone" ] && exit 0\necho "%s|PENDING|Priority|"\n' "$tmp" "$1" >"$tmp/bin/squeue"
  printf '#!/bin/sh\necho "$@" >>"%s/scancel.log"\n' "$tmp" >"$tmp/bin/scancel"
  chmod +x "$tmp/bin/sbatch" "$tmp/bin/squeue" "$tmp/bin/scancel"
  export PATH="$tmp/bin:$PATH"
}
