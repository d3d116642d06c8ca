#!/usr/bin/env bash
# The GPU path's CPU-side checks (docs/gpu.md): gpu_tests.sh NAME VEXP SRC BUILD
name=$1 vexp=$2 src=$3
source "$src/tests/support/setup.sh" gpu

case "$name" in
plan)
  # DRY_RUN=1 tools/bench/gpu.sh: every step of the one-call plan, each with its time
  # limit, and limits that fit the 8 minutes (480 s).
  OUT="$tmp/out_dir" DRY_RUN=1 bash "$src/tools/bench/gpu.sh" "$tmp/build" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "dry run exited $?"; }
  for s in bundle-check bundle-unpack configure build kernel-test run-bf16 resume-bf16 run-fp16 resume-fp16 \
           op-float op-float-cl op-bfloat16 op-bfloat16-cl train-tsm train-tsn train-i3d333 train-i3d311 \
           torch-tsm torch-tsn torch-tsm-compile data-make-frames data-frames data-videos nccl-check nccl-allreduce summary; do
    grep -qE "^\[dry\] $s +\(limit +[0-9]+s\):" "$tmp/out" || { cat "$tmp/out" >&2; fail "the plan lacks step $s"; }
  done
  sum=$(grep -oE '^\[dry\] [^ ]+ +\(limit +[0-9]+s\)' "$tmp/out" | grep -oE '[0-9]+s\)$' | tr -d 's)' | awk '{t += $1} END {print t}')
  [ "$sum" -le 480 ] || fail "the steps' limits sum to $sum s, over 480"
  expect_out "time limits summing to $sum s (budget 480 s)"
  grep -q "bench train recipes/kinetics400/i3d_r50_333_32f.toml .*--device cuda --precision bf16 --channels-last" "$tmp/out" \
    || fail "the I3D training benchmark is not in the plan"
  grep -q -- "--compile" "$tmp/out" || fail "torch.compile is not in the plan"
  [ ! -e "$tmp/build" ] || fail "the dry run built something"
  ;;
synthetic_frames)
  # make-synthetic --as frames: JPEG frame folders (no FFmpeg needed) that the kinetics
  # dataset reads like videos, RGB with --channels 3.
  expect_rc 0 -- "$vexp" data make-synthetic --as frames --channels 3 --size 24 --frames 6 --classes 2 --train-clips 6 \
    --val-clips 2 --out "$tmp/f"
  expect_out "JPEG frame folders"
  first=$(head -1 "$tmp/f/train_list.txt")
  set -- $first
  [ -d "$tmp/f/$1" ] && [ "$2" = 6 ] || fail "train_list.txt's first line '$first' is not a 6-frame folder"
  [ -f "$tmp/f/$1/img_00006.jpg" ] && [ ! -e "$tmp/f/$1/img_00007.jpg" ] || fail "the folder does not hold img_00001..6.jpg"
  ls "$tmp/f/train" | grep -q partial && fail "a .partial folder was left"
  expect_rc 0 -- "$vexp" bench data data/tiny_video.toml --set "data.params.root=$tmp/f" --set data.params.classes=2 \
    --set data.params.channels=3 --set 'data.params.mean=[0.5,0.5,0.5]' --set 'data.params.std=[0.25,0.25,0.25]' --set model.node.features.in_channels=3 --threads 1
  expect_out "clips/s"
  expect_rc 2 -- "$vexp" data make-synthetic --as jpeg --out "$tmp/g"
  expect_rc 2 -- "$vexp" data make-synthetic --layout kinetics400 --as frames --out "$tmp/h"
  expect_out "--as does not apply to --layout kinetics400"
  ;;
*)
  fail "unknown test $name"
  ;;
esac
