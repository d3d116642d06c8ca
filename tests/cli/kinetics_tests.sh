#!/usr/bin/env bash
# Every Kinetics recipe, as written, on the miniature Kinetics-400 tree: the test that
# would have caught the doubled list path (root + "data/kinetics400/train_videofolder.txt").
# Only scale is overridden (world size, clips per GPU, input size, epochs, threads);
# never a list name, a format or the data section's structure.
# Usage: kinetics_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" k400
cd "$tmp"
unset VEXP_R50_IMAGENET

paper="tsm_k400_8gpu tsn_k400_8gpu tsm_k400_1536 tsm_k400_3072_accum2 tsm_k400_6144_accum4 tsn_k400_1536 i3d311_k400_1536 i3d333_k400_1536"
mmaction="tsm_r50_8f tsn_r50_8f i3d_r50_311_32f i3d_r50_333_32f"
recipe_of() { case "$1" in *_r50_*) echo "$src/recipes/kinetics400/$1.toml" ;; *) echo "$src/recipes/$1.toml" ;; esac; }
# Scale only: 2 GPUs (emulated on this rank) x 2 clips, 32x32 crops, one epoch, one thread.
scale=(--set dist.world_size=2 --set dist.batch_per_gpu=2 --set run.epochs=1 --set data.params.input_size=32
       --set data.params.scale_size=32 --set run.threads=1 --set run.progress=plain)

# The miniature tree (16 good train and 8 good val videos in 8 classes; broken and
# missing ones as in real downloads) and `vexp data prepare kinetics400` on it.
fixture() {
  "$vexp" data make-synthetic --layout kinetics400 --out "$tmp/k" >"$tmp/fixture.out" 2>&1 ||
    { cat "$tmp/fixture.out"; fail "make-synthetic --layout kinetics400"; }
}
prepare() {  # OUT ARGS...
  local out=$1; shift
  "$vexp" data prepare kinetics400 --annotations "$tmp/k/kinetics400" --videos "$tmp/k/videos" --out "$out" \
    --workers 2 "$@" >"$tmp/prepare.out" 2>&1 || { cat "$tmp/prepare.out"; fail "prepare $*"; }
}
# run_recipes ROOT NAMES...: each recipe trains one epoch on ROOT and evaluates; every
# listed clip decodes (no skipped samples) and the whole split is seen.
run_recipes() {
  local root=$1; shift
  for r in "$@"; do
    KINETICS_ROOT=$root expect_rc 0 -- "$vexp" run "$(recipe_of "$r")" --out "$tmp/runs/$r" "${scale[@]}"
    no_crash
    expect_out "TRAINING FROM SCRATCH"  # VEXP_R50_IMAGENET is unset: said once
    [ "$(grep -c "TRAINING FROM SCRATCH" "$tmp/out")" = 1 ] || fail "$r: the from-scratch warning is not said once"
    $PY - "$tmp/runs/$r/summary.json" "$r" <<'PY' || fail "$r: summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "done", s
assert s["skipped_samples"] == 0, s
assert s["steps"] >= 1, s
PY
    rm -rf "$tmp/runs/$r"
  done
}

case "$name" in
missing_lists)
  # An existing root without lists: vexp check and vexp run refuse, at the recipe line
  # naming the list (the base recipe's line for those that extend it); --dry-run and
  # check --no-data only warn (those three for one recipe of each kind). The path is root + the list name, nothing doubled.
  mkdir -p "$tmp/empty"
  for r in $paper $mmaction; do
    f=$(recipe_of "$r")
    case "$r" in *_r50_*) at="$f:$(grep -n '^train_list' "$f" | cut -d: -f1):1" ;;
                 *) at="$src/recipes/tsm_k400_8gpu.toml:$(grep -n '^train_list' "$src/recipes/tsm_k400_8gpu.toml" | cut -d: -f1):1" ;; esac
    msg="train_list: list file '$tmp/empty/train_videofolder.txt' does not exist"
    KINETICS_ROOT=$tmp/empty expect_rc 2 -- "$vexp" check "$f"
    expect_out "$at: error: dataset 'kinetics': $msg"; expect_out "docs/data.md"
    case "$r" in tsm_k400_8gpu|tsm_k400_1536|i3d311_k400_1536|tsm_r50_8f) ;; *) continue ;; esac
    KINETICS_ROOT=$tmp/empty expect_rc 2 -- "$vexp" run "$f" --out "$tmp/r"
    expect_out "$at: error: dataset 'kinetics': $msg"
    [ ! -e "$tmp/r" ] || fail "$r: a refused run created its directory"
    KINETICS_ROOT=$tmp/empty expect_rc 0 -- "$vexp" check --no-data "$f"
    expect_out "$at: warning: dataset 'kinetics': $msg"
    KINETICS_ROOT=$tmp/empty expect_rc 0 -- "$vexp" run "$f" --dry-run
    expect_out "$at: warning: dataset 'kinetics': $msg"; expect_out "global batch:"
  done
  # A root that does not exist: at the root line.
  f=$src/recipes/tsm_k400_8gpu.toml
  KINETICS_ROOT=$tmp/nowhere expect_rc 2 -- "$vexp" check "$f"
  expect_out "$f:$(grep -n '^root' "$f" | cut -d: -f1):1: error: dataset 'kinetics': root: data root '$tmp/nowhere' does not exist"
  no_crash
  ;;
paper_videos)
  fixture; prepare "$tmp/videos"
  KINETICS_ROOT=$tmp/videos expect_rc 0 -- "$vexp" check "$src/recipes/tsm_k400_1536.toml" "${scale[@]}"
  KINETICS_ROOT=$tmp/videos expect_rc 2 -- "$vexp" check "$src/recipes/tsm_k400_1536.toml"  # 16 clips < 12,288
  expect_out "the training split has 16 clips, fewer than one global batch of 12288"
  expect_out "give data with at least one global batch of training clips (data.root or the lists), or a smaller world (--set dist.world_size=2 or less)"
  # The README's dry run of the paper's recipe with that small set at the root: the
  # declared dataset's plan, and one line saying why and what a run would need.
  KINETICS_ROOT=$tmp/videos expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --dry-run
  expect_out "planning with the declared data.train_size = 240436: the data at hand holds only 16 training clips, fewer than one global batch; \`vexp run\` with it would stop: give data with at least one global batch"
  expect_out "training clips:    240436 per epoch"
  run_recipes "$tmp/videos" $paper
  ;;
paper_frames)
  fixture; prepare "$tmp/frames" --frames
  run_recipes "$tmp/frames" $paper
  ;;
mmaction_recipes)
  fixture; prepare "$tmp/videos"; prepare "$tmp/frames" --frames
  run_recipes "$tmp/videos" $mmaction
  run_recipes "$tmp/frames" $mmaction
  ;;
official_tsm_lists)
  # A user of the official TSM scripts: frame folders and their lists, linked into the
  # images folder as docs/data.md says, read by the recipes unchanged.
  fixture
  t=$tmp/k/tsm/kinetics
  ln -s ../labels/train_videofolder.txt ../labels/val_videofolder.txt "$t/images/"
  run_recipes "$t/images" tsm_k400_8gpu tsn_k400_8gpu tsm_k400_1536
  ;;
mmaction2_lists)
  # A user of mmaction2: its tree and lists (paths under videos_train/ and videos_val/,
  # broken downloads listed too), read through the prefixes as mmaction2's data_prefix.
  fixture
  m=$tmp/k/mmaction2/data/kinetics400
  KINETICS_ROOT=$m expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_8gpu.toml" --out "$tmp/r" "${scale[@]}" \
    --set data.params.train_list=kinetics400_train_list_videos.txt --set data.params.train_prefix=videos_train \
    --set data.params.val_list=kinetics400_val_list_videos.txt --set data.params.val_prefix=videos_val \
    --set data.params.max_bad_fraction=0.5
  no_crash; expect_out "top-1"
  $PY -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['skipped_samples'] == 4, s" "$tmp/r/summary.json" ||
    fail "the 3 + 1 broken videos of mmaction2's lists are not the skipped samples"
  ;;
ranks)
  # Two real ranks: the 1,536-GPU recipe as 2 GPUs on 2 ranks, and the accumulation
  # recipe as 4 GPUs emulated on 2 ranks (2 micro-batches each, 2 accumulated).
  fixture; prepare "$tmp/videos"
  export KINETICS_ROOT=$tmp/videos
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --nproc 2 --out "$tmp/r2" "${scale[@]}"
  no_crash; expect_out "top-1"
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_3072_accum2.toml" --nproc 2 --out "$tmp/r4" "${scale[@]}" \
    --set dist.world_size=4 --set dist.batch_per_gpu=1
  no_crash; expect_out "top-1"
  [ "$(grep -c "TRAINING FROM SCRATCH" "$tmp/out")" = 1 ] || fail "the from-scratch warning is not said once over the ranks"
  # Said when a run starts, not when it resumes from its checkpoint.
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --out "$tmp/r1" "${scale[@]}" --set run.epochs=2 --stop-after 1
  expect_out "TRAINING FROM SCRATCH"
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --out "$tmp/r1" "${scale[@]}" --set run.epochs=2 --resume
  expect_out "top-1"; expect_no_out "TRAINING FROM SCRATCH"
  ;;
*)
  fail "unknown test"
  ;;
esac
exit 0
