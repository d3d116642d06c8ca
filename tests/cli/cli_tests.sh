#!/usr/bin/env bash
# End-to-end tests of the vexp CLI. Usage: cli_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" cli

# The guide's out-of-tree examples (the sdk_*_example cases).
# example_build EXAMPLE DIR: examples/EXAMPLE configured against the build folder and built in DIR.
example_build() {
  cmake -S "$src/examples/$1" -B "$2" -DCMAKE_PREFIX_PATH="$build" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "configuring examples/$1 against the build folder failed"; }
  expect_out "-- vexp 0.1.0 from $build; its plugin folder: $build/lib/vexp/plugins"
  cmake --build "$2" -j2 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "building examples/$1 failed"; }
}
# example_listed DIR "KIND NAME" N: the N lines `vexp plugins --path DIR` prints under the
# plugin (its doc and parameters, all of them) are in docs/writing-a-plugin.md as "# LINE".
example_listed() {
  "$vexp" plugins --path "$1" >"$tmp/plugins.txt" 2>&1 || fail "vexp plugins --path $1 failed"
  grep -q "^$2  \[$1/" "$tmp/plugins.txt" || fail "vexp plugins --path $1 does not list $2 from $1: $(cat "$tmp/plugins.txt")"
  local n=0 line
  while IFS= read -r line; do
    n=$((n + 1))
    grep -qF "# $line" "$src/docs/writing-a-plugin.md" ||
      fail "docs/writing-a-plugin.md does not show this line of 'vexp plugins --path' for $2: $line"
  done < <(grep -A"$3" "^$2  \[" "$tmp/plugins.txt" | tail -n +2)
  [ "$n" -eq "$3" ] || fail "expected $3 lines after '$2' in: $(cat "$tmp/plugins.txt")"
  ! grep -A"$(($3 + 1))" "^$2  \[" "$tmp/plugins.txt" | tail -n +$(($3 + 2)) | grep -q '^    ' ||
    fail "'$2' has more than $3 lines in 'vexp plugins --path': update docs/writing-a-plugin.md and this test"
}
# example_recipe EXAMPLE FILE BUILD_NAME DIR: examples/EXAMPLE/FILE as shipped, but for its two
# relative paths (../../BUILD_NAME becomes DIR, ../../recipes/ the source tree's), as $tmp/r/FILE.
example_recipe() {
  mkdir -p "$tmp/r"
  sed -e "s#\"\.\./\.\./$3\"#\"$4\"#" -e "s#\"\.\./\.\./recipes/#\"$src/recipes/#" "$src/examples/$1/$2" >"$tmp/r/$2"
  grep -qF "\"$4\"" "$tmp/r/$2" && grep -qF "\"$src/recipes/" "$tmp/r/$2" ||
    fail "examples/$1/$2 no longer names ../../$3 and ../../recipes/: update this test"
}
# line_of FILE TEXT: the number of the first line of FILE holding TEXT.
line_of() { grep -nF -- "$2" "$1" | head -1 | cut -d: -f1; }

cd "$here"
# pyav_centres VIDEO OUT.pt CHANNELS MEAN STD: the video's 4 segment centres as PyAV
# decodes them (gray or RGB), (x / 255 - MEAN) / STD, saved as a [4, C, H, W] tensor.
pyav_centres() {
  $PY - "$@" <<'PY' || fail "could not decode the clip with PyAV"
import sys, av, numpy as np, torch
ch, mean, std = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
frames = [f.to_ndarray(format="gray" if ch == 1 else "rgb24") for f in av.open(sys.argv[1]).decode(video=0)]
n, T = len(frames), 4
idx = [min(n - 1, int(n / T / 2 + n / T * i)) for i in range(T)]
x = torch.tensor(np.stack([frames[i] for i in idx])).float()
x = x.unsqueeze(1) if ch == 1 else x.permute(0, 3, 1, 2)
torch.save((x / 255 - mean) / std, sys.argv[2])
PY
}

case "$name" in
version)
  expect_rc 0 -- "$vexp" --version
  expect_out "vexp 0.1.0"; expect_out "plugin ABI 6"; expect_out "torch="
  # the commit it was built from and the tree's state then (or unknown outside git)
  grep -Eq '; commit ([0-9a-f]{40}, (clean|dirty) tree|unknown)\)$' "$tmp/out" || { cat "$tmp/out"; fail "no commit in --version"; }
  ;;
help_and_usage)
  expect_rc 0 -- "$vexp" --help
  expect_out "check"; expect_out "run"; expect_out "plugins"
  expect_rc 2 -- "$vexp"                       # no subcommand
  expect_rc 2 -- "$vexp" frobnicate
  expect_rc 2 -- "$vexp" check                 # missing recipe
  no_crash
  ;;
plugins)
  expect_rc 0 -- "$vexp" plugins
  for p in "op temporal_shift" "backbone resnet" "op fold_time" "op classifier" "op segment_consensus" \
           "dataset synthetic_motion" "comm local"; do expect_out "$p"; done
  expect_out "fold_div (int, default 8"
  ;;
plugins_json)
  "$vexp" plugins --json >"$tmp/p.json" || fail "plugins --json failed"
  $PY - "$tmp/p.json" <<'PY' || fail "bad plugins json"
import json, sys
ps = json.load(open(sys.argv[1]))
names = {(p["kind"], p["name"]) for p in ps}
need = {("op","temporal_shift"),("backbone","resnet"),("op","fold_time"),("op","classifier"),
        ("op","segment_consensus"),("dataset","synthetic_motion"),("comm","local")}
assert need <= names, need - names
for p in ps:
    assert p["library"].endswith(".so"), p
    assert p["version"], p
    for q in p["params"]:
        assert {"name","type","doc","required"} <= set(q), q
ts = next(p for p in ps if p["name"] == "temporal_shift")
fd = next(q for q in ts["params"] if q["name"] == "fold_div")
assert fd["type"] == "int" and fd["default"] == 8, fd
mode = next(q for q in ts["params"] if q["name"] == "mode")
assert set(mode["choices"]) == {"bidirectional","left","right"}, mode
PY
  ;;
plugins_markdown_current)
  "$vexp" plugins --markdown > "$tmp/plugins.md" || fail "plugins --markdown failed"
  diff -u "$src/docs/plugins.md" "$tmp/plugins.md" >&2 || \
    fail "docs/plugins.md is out of date: regenerate it with 'vexp plugins --markdown > docs/plugins.md'"
  grep -q '| `fold_div` | int | `8` | >= 1 |' "$tmp/plugins.md" || fail "fold_div row missing"
  ;;
docs_examples_validate)
  # The complete example in docs/recipes.md is a valid recipe.
  awk '/^## A complete example/{f=1;next} f&&/^```toml/{g=1;next} g&&/^```/{exit} g{print}' \
    "$src/docs/recipes.md" > "$tmp/example.toml"
  [ -s "$tmp/example.toml" ] || fail "no example found in docs/recipes.md"
  expect_rc 0 -- "$vexp" check "$tmp/example.toml"
  ;;
docs_facts)
  # What the docs say of vexp's own vocabulary is what vexp accepts (issue #36).
  # docs/recipes.md's diagnostics table: the depth error, as vexp check writes it.
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set model.node.features.depth=20
  msg=$(grep -o "'depth' in node 'features' (resnet): must be one of [0-9, ]*, got 20" "$tmp/out") ||
    { cat "$tmp/out"; fail "vexp check did not refuse depth 20"; }
  grep -qF "\`$msg\`" "$src/docs/recipes.md" || fail "docs/recipes.md's diagnostics do not show: $msg"
  # Its test-only fault injection: every fault kind the trainer reads (its own error lists them).
  expect_rc 1 -- env VEXP_TEST_FAULT=no_such_fault@step=1 "$vexp" run data/tiny.toml --out "$tmp/f"
  grep -o '[a-z_]*@[a-z]*=N' "$tmp/out" | sort -u >"$tmp/kinds"
  [ "$(wc -l <"$tmp/kinds")" -ge 6 ] || { cat "$tmp/out"; fail "the fault error does not list the kinds"; }
  grep -q '^slow_step@ms=N$' "$tmp/kinds" || fail "slow_step is not a fault kind: $(cat "$tmp/kinds")"
  awk '/^\*\*Test-only fault injection\.\*\*/{f=1} f&&/^$/{exit} f' "$src/docs/recipes.md" >"$tmp/faults.md"
  while read -r k; do
    grep -qF "\`$k\`" "$tmp/faults.md" || fail "docs/recipes.md's fault injection lacks $k"
  done <"$tmp/kinds"
  # The sweep's pruning key: [sweep.prune] after_epochs; [sweep] prune_after is refused.
  sed 's/^metric = "val_loss"$/metric = "val_loss"\nprune_after = 1/' data/sweep_prune.toml >"$tmp/prune_after.toml"
  sed -i "s|^base = \"tiny.toml\"|base = \"$here/data/tiny.toml\"|" "$tmp/prune_after.toml"
  expect_rc 2 -- "$vexp" sweep "$tmp/prune_after.toml" --dry-run --out "$tmp/s"
  expect_out "unknown key 'prune_after' in [sweep]"
  ! grep -rn 'prune_after' "$src/README.md" "$src/docs" || fail "the docs name [sweep] prune_after, which vexp refuses"
  grep -qF '`[sweep.prune] after_epochs`' "$src/docs/clusters.md" || fail "docs/clusters.md does not name [sweep.prune] after_epochs"
  # docs/reproducing-the-paper.md: the official TSN baseline trained 5 segments, and the
  # command it gives to retrain it validates.
  grep -q 'The TSN baseline trained 5 segments' "$src/docs/reproducing-the-paper.md" ||
    fail "docs/reproducing-the-paper.md does not say the official TSN baseline trained 5 segments"
  grep -qF -- '--set data.params.frames=5' "$src/docs/reproducing-the-paper.md" || fail "no retrain command"
  expect_rc 0 -- "$vexp" check "$src/recipes/kinetics400/tsn_r50_8f.toml" --no-data --set data.params.frames=5
  ;;
check_quickstart)
  for r in tsm_motion tsn_motion i3d_motion; do
    expect_rc 0 -- "$vexp" check "$src/recipes/quickstart/$r.toml"
    expect_out ": ok ("
  done
  "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" >"$tmp/out" 2>&1
  expect_out "8 inserted operators"
  "$vexp" check "$src/recipes/quickstart/tsn_motion.toml" >"$tmp/out" 2>&1
  expect_out "0 inserted operators"
  # The small I3D: resnet3d at width 0.125 on the 1-channel clips, 3D head.
  expect_rc 0 -- "$vexp" info "$src/recipes/quickstart/i3d_motion.toml" --json
  expect_out '"params": 521312'; expect_out '"flops_per_clip": 17057792'
  ;;
check_broken)
  expect_rc 2 -- "$vexp" check data/broken.toml
  no_crash
  expect_out "data/broken.toml:5:1: error: 'epochs' in [run]: expected int, got string \"four\""
  expect_out "data/broken.toml:8:1: error: unknown key 'lrr' in [optim] (did you mean 'lr'?)"
  expect_out "data/broken.toml:9:1: error: 'momentum' in [optim]: must be in [0, 0.999999], got 1.5"
  expect_out "data/broken.toml:13:1: error: unknown key 'framez' in [data.params] of dataset 'synthetic_motion' (did you mean 'frames'?)"
  expect_out "data/broken.toml:31:1: error: unknown op 'classifer' (did you mean 'classifier'?); known: classifier"
  expect_out "data/broken.toml:32:1: error: node 'head' reads 'featurs', which is not a node or the model input (did you mean 'features'?)"
  expect_out "data/broken.toml:40:1: error: rewrite pattern 'features/layr*/block*/residual_in' matches no insertion point"
  expect_out "data/broken.toml: 7 errors"
  expect_out "errors"
  ;;
check_print)
  expect_rc 0 -- "$vexp" check "$src/recipes/quickstart/tsn_motion.toml" --print
  expect_out "# resolved recipe, hash"
  expect_out 'name = "tsn_motion"'
  "$vexp" check "$src/recipes/quickstart/tsn_motion.toml" --print > "$tmp/resolved.toml"
  ! grep -q "temporal_shift" "$tmp/resolved.toml" || fail "resolved TSN recipe still has temporal_shift"
  grep -q "warmup_start" "$tmp/resolved.toml" || fail "defaults are not filled in"
  # The resolved recipe is itself a valid recipe.
  expect_rc 0 -- "$vexp" check "$tmp/resolved.toml"
  ;;
check_set)
  expect_rc 0 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set optim.lr=0.05 --set run.name=abc --print
  expect_out "lr = 0.05"; expect_out 'name = "abc"'
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set optim.lr=fast
  expect_out "--set optim.lr=fast: error:"
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set optim.lrr=1
  expect_out "did you mean 'lr'"
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set novalue
  expect_out "expected KEY=VALUE"
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set model.node.features.depth=19
  expect_out "must be one of"
  expect_rc 2 -- "$vexp" check "$src/recipes/quickstart/tsm_motion.toml" --set model.rewrite.0.insert.fold_div=16
  expect_out "fold_div"
  ;;
graph)
  expect_rc 0 -- "$vexp" graph "$src/recipes/quickstart/tsm_motion.toml"
  expect_out "features = resnet(frames)"
  expect_out "@layer1/block0/residual_in += temporal_shift("
  expect_out "logits = segment_consensus(head) -> [32, 8]"
  expect_rc 0 -- "$vexp" graph "$src/recipes/quickstart/tsn_motion.toml"
  expect_no_out "temporal_shift"
  expect_rc 0 -- "$vexp" graph "$src/recipes/quickstart/tsm_motion.toml" --dot
  expect_out "digraph model"; expect_out '"features" -> "head"'
  ;;
predict_video_views)
  # vexp predict on a video goes through the recipe's own test pipeline (kinetics),
  # every view: 10 crops (with flips) are averaged, and the result differs from 1 crop.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
  export VEXP_MOTION_DATA="$tmp/motion"
  expect_rc 0 -- "$vexp" run data/tiny_video.toml --out "$tmp/run"
  ckpt=$(ls "$tmp/run/checkpoints/"*.pt | tail -1)
  video="$tmp/motion/$(head -1 "$tmp/motion/val_list.txt" | cut -d' ' -f1)"
  expect_rc 0 -- "$vexp" predict data/tiny_video.toml --weights "$ckpt" --input "$video" --logits "$tmp/one.json"
  expect_out "clip 0:"
  expect_rc 0 -- "$vexp" predict data/tiny_video.toml --weights "$ckpt" --input "$video" --logits "$tmp/three.json" \
    --set data.params.test_crops=10
  $PY - "$tmp/one.json" "$tmp/three.json" <<'PY' || fail "10-crop prediction does not differ from 1-crop"
import json, sys
a, b = (json.load(open(f))["logits"] for f in sys.argv[1:3])
assert len(a) == 1 and len(b) == 1, (len(a), len(b))   # views averaged into one clip
assert max(abs(x - y) for x, y in zip(a[0], b[0])) > 0, (a, b)
PY
  printf 'not a video' > "$tmp/bad.mp4"
  expect_rc 1 -- "$vexp" predict data/tiny_video.toml --weights "$ckpt" --input "$tmp/bad.mp4"
  expect_out "bad.mp4"; no_crash
  ;;
predict_video_generic)
  # A dataset plugin without Dataset::file_views (the fixture plain_clips): vexp
  # predict reads a video the generic way (TSN segment centres, short-side resize,
  # centre crop, ImageNet's mean and std), says so and why, and the logits equal
  # those of the same frames decoded by PyAV, normalised alike, given as a .pt.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
  video="$tmp/motion/$(head -1 "$tmp/motion/val_list.txt" | cut -d' ' -f1)"
  plain=(--plugin-path "$build/tests/fixtures/plain_dataset" --set data.dataset=plain_clips)
  expect_rc 0 -- "$vexp" run data/tiny.toml "${plain[@]}" --set run.epochs=1 --out "$tmp/run"
  expect_rc 0 -- "$vexp" predict data/tiny.toml "${plain[@]}" --weights "$tmp/run" --input "$video" --short-side 16 \
    --logits "$tmp/video.json"
  expect_out "clip 0:"
  expect_out "4 segment centres, shorter side 16, centre crop 16x16, gray, ImageNet mean and std"
  expect_out "the dataset 'plain_clips' makes no views of a file (its plugin has no Dataset::file_views)"
  pyav_centres "$video" "$tmp/frames.pt" 1 0.449 0.226
  expect_rc 0 -- "$vexp" predict data/tiny.toml "${plain[@]}" --weights "$tmp/run" --input "$tmp/frames.pt" \
    --logits "$tmp/tensor.json"
  $PY - "$tmp/video.json" "$tmp/tensor.json" <<'PY' || fail "the generic reading differs from PyAV's frames"
import json, sys
a, b = (json.load(open(f))["logits"][0] for f in sys.argv[1:3])
assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4 * max(1.0, max(abs(y) for y in b)), (a, b)
PY
  # Without --short-side: the crop x 256/224 (16 -> 19).
  expect_rc 0 -- "$vexp" predict data/tiny.toml "${plain[@]}" --weights "$tmp/run" --input "$video"
  expect_out "shorter side 19, centre crop 16x16"
  ;;
predict_video_centre)
  # vexp predict on a video for a dataset without a video pipeline (synthetic_motion),
  # at the recipe's clip shape (gray as the quickstart, and RGB): segment centres,
  # the whole frame, the dataset's own normalisation (x - 0.5) / 0.25, decoded by
  # vexp::media. The logits equal those of the same frames decoded by PyAV and given
  # as a .pt tensor.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
  video="$tmp/motion/$(head -1 "$tmp/motion/val_list.txt" | cut -d' ' -f1)"
  for ch in 1 3; do
    set_ch=(--set data.params.channels=$ch --set model.node.1.in_channels=$ch)
    expect_rc 0 -- "$vexp" run data/tiny.toml "${set_ch[@]}" --set run.epochs=1 --out "$tmp/run$ch"
    expect_rc 0 -- "$vexp" predict data/tiny.toml "${set_ch[@]}" --weights "$tmp/run$ch" --input "$video" \
      --logits "$tmp/video$ch.json"
    expect_out "clip 0:"; expect_out "4 segment centres, shorter side 16, centre crop 16x16"
    expect_out "(x - 0.5) / 0.25"
    pyav_centres "$video" "$tmp/frames$ch.pt" $ch 0.5 0.25
    expect_rc 0 -- "$vexp" predict data/tiny.toml "${set_ch[@]}" --weights "$tmp/run$ch" --input "$tmp/frames$ch.pt" \
      --logits "$tmp/tensor$ch.json"
    $PY - "$tmp/video$ch.json" "$tmp/tensor$ch.json" <<'PY' || fail "the decoded video differs from PyAV's frames ($ch channels)"
import json, sys
a, b = (json.load(open(f))["logits"][0] for f in sys.argv[1:3])
assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4 * max(1.0, max(abs(y) for y in b)), (a, b)
PY
  done
  rgb=(--set data.params.channels=3 --set model.node.1.in_channels=3)
  # --short-side resizes first; another shape with --clip
  expect_rc 0 -- "$vexp" predict data/tiny.toml "${rgb[@]}" --weights "$tmp/run3" --input "$video" --short-side 20
  expect_out "clip 0:"; expect_out "shorter side 20"
  expect_rc 0 -- "$vexp" predict data/tiny.toml "${rgb[@]}" --weights "$tmp/run3" --input "$video" --clip 3x3x12x12
  expect_out "clip 0:"
  expect_rc 2 -- "$vexp" predict data/tiny.toml --set model.node.1.in_channels=2 --weights "$tmp/run3" --input "$video" \
    --clip 3x2x12x12
  expect_out "a video needs a clip shape [T, 1 or 3, H, W]"
  printf 'not a video' > "$tmp/bad.mp4"
  expect_rc 1 -- "$vexp" predict data/tiny.toml "${rgb[@]}" --weights "$tmp/run3" --input "$tmp/bad.mp4"
  expect_out "vexp: error: cannot use video '$tmp/bad.mp4': '$tmp/bad.mp4': cannot open: "; no_crash
  expect_no_out "moov atom"   # FFmpeg's own log lines stay quiet: the one line above says it
  ;;
bench_comm_recipe)
  # vexp bench comm's default recipes are vexp's own, found from the executable, not
  # the current directory: from / in the build tree (two ranks, one repetition) and
  # after cmake --install (one rank: the recipes open, then it asks for ranks).
  (cd / && "$vexp" bench comm --nproc 2 --reps 1 --steps 1) > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "bench comm from /"; }
  expect_out "weak-scaling efficiency"; expect_out "share/vexp/recipes/quickstart/tsm_motion.toml"
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install failed"
  (cd / && "$tmp/prefix/bin/vexp" bench comm --reps 1 --steps 1) > "$tmp/out" 2>&1
  [ $? -eq 2 ] || { cat "$tmp/out"; fail "the installed bench comm did not reach the rank check"; }
  expect_out "needs 2 or more ranks"; expect_no_out "cannot open"
  [ -f "$tmp/prefix/share/vexp/recipes/tsm_k400_1536.toml" ] || fail "recipes not installed"
  (cd / && "$vexp" bench comm --recipe nowhere.toml) > "$tmp/out" 2>&1
  expect_out "nowhere.toml"
  ;;
bench_comm_step_reducer)
  # The step `vexp bench comm` times is built by the runtime's rig from the step
  # recipe: its reducer has that recipe's dist.bucket_mb and dist.compression, not
  # those of --recipe (whose gradients part 1 reduces), and the exact reduction has
  # none. Tiny recipes, two ranks, one repetition and one step each.
  printf '%s\n' "extends = \"$here/data/tiny.toml\"" "[dist]" "bucket_mb = 0.0625" 'compression = "fp16"' > "$tmp/step.toml"
  "$vexp" bench comm --nproc 2 --recipe data/tiny.toml --step-recipe "$tmp/step.toml" --reps 1 --steps 1 \
    > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "bench comm with a compressed step recipe"; }
  expect_out "weak-scaling efficiency"
  expect_out "buckets of 25 MiB"  # part 1: --recipe's gradients, in its (default) buckets
  grep -Eq "^  step's reducer: [0-9]+ buckets of 0.0625 MiB, fp16 wire " "$tmp/out" ||
    { cat "$tmp/out"; fail "the step's reducer is not the step recipe's (0.0625 MiB buckets, fp16 wire)"; }
  printf '%s\n' "extends = \"$here/data/tiny.toml\"" "[dist]" 'reduction = "exact"' > "$tmp/exact.toml"
  "$vexp" bench comm --nproc 2 --recipe data/tiny.toml --step-recipe "$tmp/exact.toml" --reps 1 --steps 1 \
    > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "bench comm with an exact step recipe"; }
  expect_out "step's gradients: dist.reduction = \"exact\" (the exact sum, no bucketed reducer)"
  expect_no_out "step's reducer"
  no_crash
  ;;
predict_names)
  # Class names: --labels, else the recipe's label_map (relative to the data root),
  # else the dataset's own names, else classes.txt in the data root.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
  export VEXP_MOTION_DATA="$tmp/motion"
  expect_rc 0 -- "$vexp" run data/tiny.toml --set run.epochs=1 --out "$tmp/run"
  printf '%s\n' 'a "quoted", name' '' '  second  ' third fourth > "$tmp/labels.txt"
  $PY -c 'import torch; torch.manual_seed(0); torch.save(torch.randn(2, 4, 1, 16, 16), "'"$tmp"'/x.pt")'
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/run" --input "$tmp/x.pt" --topk 4
  expect_out "class names from the dataset 'synthetic_motion'"; expect_out "(square_right)"; expect_out "(hollow_up)"
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/run" --input "$tmp/x.pt" --topk 4 --labels "$tmp/labels.txt"
  expect_out "class names from '$tmp/labels.txt'"; expect_out '(a "quoted", name)'; expect_out "(second)"
  expect_out "(fourth)"; expect_no_out "square_right"
  expect_rc 1 -- "$vexp" predict data/tiny.toml --weights "$tmp/run" --input "$tmp/x.pt" --labels "$tmp/none.txt"
  expect_out "cannot read the label map '$tmp/none.txt'"
  # kinetics: a relative label_map is under the data root, from any directory
  expect_rc 0 -- "$vexp" run data/tiny_video.toml --out "$tmp/vrun"
  cp "$tmp/labels.txt" "$tmp/motion/names.txt"
  (cd / && "$vexp" predict "$here/data/tiny_video.toml" --weights "$tmp/vrun" --input "$tmp/x.pt" --topk 4 \
     --set data.params.label_map='"names.txt"') > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "label_map under the root"; }
  expect_out "class names from the label map '$tmp/motion/names.txt'"; expect_out "(second)"
  # no label map, a TSM list (no names in it): classes.txt of the data root
  (cd / && "$vexp" predict "$here/data/tiny_video.toml" --weights "$tmp/vrun" --input "$tmp/x.pt" --topk 4) \
     > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "classes.txt of the root"; }
  expect_out "class names from '$tmp/motion/classes.txt'"; expect_out "(square_left)"
  # a names file of another length is used, with a warning
  printf 'one\ntwo\n' > "$tmp/two.txt"
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/run" --input "$tmp/x.pt" --topk 4 --labels "$tmp/two.txt"
  expect_out "names 2 classes, the model has 4"
  # the data gone: numbers only, no error
  rm -rf "$tmp/motion"
  expect_rc 0 -- "$vexp" predict data/tiny_video.toml --weights "$tmp/vrun" --input "$tmp/x.pt" --topk 2 --classes 4
  expect_out "clip 0:"; expect_no_out "class names from"
  ;;
predict_weights_run_dir)
  # --weights RUN_DIR: the run's latest checkpoint, for runs that wrote only the
  # final one, every epoch, or stopped mid-epoch; its checkpoints/ folder too; a
  # directory without one is an error naming it.
  $PY -c 'import torch; torch.save(torch.randn(1, 4, 1, 16, 16), "'"$tmp"'/x.pt")'
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/final" --set run.checkpoint_every=0
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/final" --input "$tmp/x.pt"
  expect_out "using its latest checkpoint '$tmp/final/checkpoints/epoch_0002.pt'"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/every" --set run.checkpoint_every=1
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/every" --input "$tmp/x.pt"
  expect_out "using its latest checkpoint '$tmp/every/checkpoints/epoch_0002.pt'"
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/every/checkpoints" --input "$tmp/x.pt"
  expect_out "using its latest checkpoint '$tmp/every/checkpoints/epoch_0002.pt'"
  # a run stopped after its first epoch of two (--stop-after), then as an interrupted
  # one leaves it: a mid-epoch checkpoint (epoch_0001_step_000003.pt; a copy here) is newer
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/stopped" --stop-after 1
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/stopped" --input "$tmp/x.pt"
  expect_out "using its latest checkpoint '$tmp/stopped/checkpoints/epoch_0001.pt'"
  cp "$tmp/stopped/checkpoints/epoch_0001.pt" "$tmp/stopped/checkpoints/epoch_0001_step_000003.pt"
  expect_rc 0 -- "$vexp" predict data/tiny.toml --weights "$tmp/stopped" --input "$tmp/x.pt"
  expect_out "using its latest checkpoint '$tmp/stopped/checkpoints/epoch_0001_step_000003.pt'"
  expect_rc 0 -- "$vexp" export "$tmp/stopped" --to "$tmp/stopped.pth"
  expect_out "from '$tmp/stopped/checkpoints/epoch_0001_step_000003.pt'"
  mkdir -p "$tmp/empty/checkpoints"; touch "$tmp/empty/checkpoints/epoch_0001.pt.corrupt"
  expect_rc 1 -- "$vexp" predict data/tiny.toml --weights "$tmp/empty" --input "$tmp/x.pt"
  expect_out "--weights '$tmp/empty' is a directory with no checkpoint"
  expect_rc 1 -- "$vexp" export "$tmp/empty" --to "$tmp/e.pth"
  expect_out "'$tmp/empty' is a directory with no checkpoint"
  ;;
data_video_run)
  # The quickstart through real mp4 files: make-synthetic, check, one epoch.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 48 --val-clips 16
  expect_out "wrote 48 train and 16 val clips"
  for f in classes.txt train_list.txt train_list_mmaction.txt train.csv val_list.txt val.csv; do
    [ -s "$tmp/motion/$f" ] || fail "make-synthetic did not write $f"
  done
  n=$(find "$tmp/motion/train" -name '*.mp4' | wc -l); [ "$n" -eq 48 ] || fail "expected 48 train mp4s, found $n"
  ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=codec_name,nb_read_frames -of csv=p=0 \
    "$(head -1 "$tmp/motion/train_list.txt" | cut -d' ' -f1 | sed "s|^|$tmp/motion/|")" >"$tmp/probe" 2>&1
  grep -q "h264,16" "$tmp/probe" || { cat "$tmp/probe"; fail "not an H.264 mp4 of 16 frames"; }
  export VEXP_MOTION_DATA="$tmp/motion"
  expect_rc 0 -- "$vexp" check "$src/recipes/quickstart/tsm_motion_video.toml"
  expect_rc 0 -- "$vexp" data check data/tiny_video.toml
  expect_out "train: 48 items"; expect_out "ok 48, bad 0"; expect_out "data ok"
  expect_rc 0 -- "$vexp" run data/tiny_video.toml --out "$tmp/run"
  no_crash; expect_out "top-1"
  $PY - "$tmp/run" <<'PY' || fail "bad run directory contents"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["epochs"] == 1 and s["steps"] == 6 and s["skipped_samples"] == 0, s
steps = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"step"' in l]
assert steps and all({"data_s", "compute_s", "comm_s"} <= set(l) for l in steps), steps
PY
  # The other list formats read the same files.
  expect_rc 0 -- "$vexp" data check data/tiny_video.toml --set data.params.train_list=train_list_mmaction.txt \
    --set data.params.val_list=val.csv --set data.params.label_map=classes.txt --set 'data.params.csv_path={split}/{label}/{id}_{start}_{end}.mp4'
  expect_out "val: 16 items"; expect_out "data ok"
  ;;
data_check_faults)
  # Planted faults: missing, truncated, garbage, wrong frame count.
  "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 16 --val-clips 8 >/dev/null 2>&1 || fail "make-synthetic"
  first=$(head -1 "$tmp/m/train_list.txt" | cut -d' ' -f1)
  head -c 600 "$tmp/m/$first" >"$tmp/m/truncated.mp4"
  echo "not a video" >"$tmp/m/garbage.mp4"
  { cat "$tmp/m/train_list.txt"; echo "missing.mp4 16 0"; echo "truncated.mp4 16 1"; echo "garbage.mp4 16 2"; } >"$tmp/m/faulty.txt"
  sed -i '2s/ 16 / 20 /' "$tmp/m/faulty.txt"
  export VEXP_MOTION_DATA="$tmp/m"
  expect_rc 1 -- "$vexp" data check data/tiny_video.toml --set data.params.train_list=faulty.txt --json "$tmp/report.json"
  no_crash
  expect_out "missing.mp4"; expect_out "truncated.mp4"; expect_out "garbage.mp4"
  expect_out "ok 16, bad 3, frame-count mismatches 1"; expect_out "the list says 20 frames, the file has 16"
  expect_out "class balance: 4 classes"; expect_out "3 bad item(s)"
  $PY -c "import json,sys; r=json.load(open('$tmp/report.json')); assert r['train']['bad']==3 and r['val']['bad']==0, r" || fail "bad JSON report"
  # Training skips the bad files (within max_bad_fraction), counts them, or fails when strict.
  expect_rc 0 -- "$vexp" run data/tiny_video.toml --out "$tmp/run" --set data.params.train_list=faulty.txt \
    --set data.params.max_bad_fraction=0.2
  expect_out "warning"; expect_out "missing.mp4"
  $PY -c "import json; s=json.load(open('$tmp/run/summary.json')); assert s['skipped_samples'] > 0, s" || fail "skipped_samples"
  expect_rc 1 -- "$vexp" run data/tiny_video.toml --out "$tmp/run2" --set data.params.train_list=faulty.txt \
    --set data.params.strict=true
  no_crash; expect_out "strict = true"
  expect_rc 1 -- "$vexp" run data/tiny_video.toml --out "$tmp/run3" --set data.params.train_list=faulty.txt \
    --set data.params.max_bad_fraction=0.05
  no_crash; expect_out "more than max_bad_fraction"
  ;;
data_missing_root)
  export VEXP_MOTION_DATA="$tmp/nowhere"
  expect_rc 2 -- "$vexp" run data/tiny_video.toml --out "$tmp/run"
  no_crash; expect_out "data root '$tmp/nowhere' does not exist"; expect_out "docs/data.md"
  [ ! -e "$tmp/run" ] || fail "a run directory was created before the data was checked"
  mkdir -p "$tmp/empty"; export VEXP_MOTION_DATA="$tmp/empty"
  expect_rc 2 -- "$vexp" data check data/tiny_video.toml
  expect_out "list file '$tmp/empty/train_list.txt' does not exist"; expect_out "docs/data.md"
  ;;
data_extract_frames)
  "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 8 --val-clips 8 >/dev/null 2>&1 || fail "make-synthetic"
  expect_rc 0 -- "$vexp" data extract-frames "$tmp/m/train_list.txt" --out "$tmp/frames" --workers 2
  expect_out "extracted 8 video(s), 0 already done, 0 failed"
  n=$(find "$tmp/frames" -name 'img_*.jpg' | wc -l); [ "$n" -eq 128 ] || fail "expected 128 frames, found $n"
  first=$(head -1 "$tmp/frames/train_list_frames.txt")
  [ "$(echo "$first" | cut -d' ' -f2)" = 16 ] || fail "frame list: $first"
  # Resumable: a second run keeps the finished folders; a half-written one is redone.
  d=$(echo "$first" | cut -d' ' -f1); rm -rf "$tmp/frames/$d"; mkdir -p "$tmp/frames/$d.partial"
  expect_rc 0 -- "$vexp" data extract-frames "$tmp/m/train_list.txt" --out "$tmp/frames"
  expect_out "extracted 1 video(s), 7 already done, 0 failed"
  [ ! -e "$tmp/frames/$d.partial" ] || fail "partial folder left behind"
  # The frames layout trains like the videos (TSM frame list).
  cp "$tmp/m/val_list.txt" "$tmp/frames/val_list.txt"; cp -r "$tmp/m/val" "$tmp/frames/val"
  export VEXP_MOTION_DATA="$tmp/frames"
  expect_rc 0 -- "$vexp" data check data/tiny_video.toml --set data.params.train_list=train_list_frames.txt
  expect_out "data ok"
  echo "missing.mp4 0" >"$tmp/bad_list.txt"
  expect_rc 1 -- "$vexp" data extract-frames "$tmp/bad_list.txt" --out "$tmp/f2"
  no_crash; expect_out "missing.mp4"
  ;;
bench_train)
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --steps 3 --warmup 1
  no_crash; expect_out "median of 3 steps after 1 warm-up"; expect_out "clips/s"; expect_out "backward"; expect_out "dataset data"
  "$vexp" bench train data/tiny.toml --synthetic --steps 2 --warmup 0 --json >"$tmp/t.json" || fail "bench train --json"
  $PY - "$tmp/t.json" <<'PY' || fail "bench train json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["synthetic"] and r["clips_per_step"] == 8 and r["clip"] == [4, 1, 16, 16], r
ph = r["phases"]
assert len(ph["step"]["samples_ms"]) == 2 and all(x > 0 for x in ph["step"]["samples_ms"]), ph
parts = sum(ph[k]["median_ms"] for k in ("data", "forward", "backward", "optimizer", "comm"))
assert ph["forward"]["median_ms"] > 0 and ph["backward"]["median_ms"] > 0 and ph["optimizer"]["median_ms"] > 0, ph
assert parts <= ph["step"]["median_ms"] * 1.5 + 1, (parts, ph)
assert abs(r["clips_per_s"] - 8 / (ph["step"]["median_ms"] / 1e3)) < 1e-6 * r["clips_per_s"] + 1e-9, r
assert r["frames_per_s"] == r["clips_per_s"] * 4 and r["peak_rss_mb"] > 0, r
PY
  # A Kinetics recipe without its data: --synthetic feeds clips of its shape.
  k=../../recipes/kinetics400/tsm_r50_8f.toml
  expect_rc 0 -- "$vexp" bench train $k --synthetic --steps 1 --warmup 0 --set run.threads=1 \
    --set data.params.frames=2 --set data.params.input_size=32 --set dist.batch_per_gpu=1
  no_crash; expect_out "1 clips x [2, 3, 32, 32]"; expect_out "synthetic data"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --synthetic --channels-last --steps 1 --warmup 0
  no_crash; expect_out "synthetic data, channels-last"
  # --memory-format overrides [run] memory_format (auto: channels-last);
  # --channels-last is its shorthand, and the two together are refused.
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --synthetic --memory-format contiguous --steps 1 --warmup 0
  expect_out "synthetic data, contiguous"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --synthetic --set run.memory_format=contiguous --steps 1 --warmup 0
  expect_out "synthetic data, contiguous"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --synthetic --steps 1 --warmup 0 --json
  expect_out '"memory_format": "channels_last"'
  expect_rc 2 -- "$vexp" bench train data/tiny.toml --synthetic --memory-format contiguous --channels-last
  expect_out "--memory-format excludes --channels-last"
  "$vexp" bench train data/tiny.toml --synthetic --precision bf16 --steps 2 --warmup 1 --json >"$tmp/b.json" \
    || fail "bench train --precision bf16"
  $PY -c "import json, math; r=json.load(open('$tmp/b.json')); assert r['precision']=='bf16' and r['device']=='cpu' and r['clips_per_s']>0 and math.isfinite(r['final_loss']), r" \
    || fail "bench train bf16 json"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml --synthetic --precision bf16 --device auto --steps 1 --warmup 0
  expect_out "cpu bf16"
  expect_rc 1 -- "$vexp" bench train data/tiny.toml --synthetic --precision fp16 --device cpu
  expect_out "--precision = \"fp16\" needs a CUDA device"
  expect_rc 2 -- "$vexp" bench train data/tiny.toml --synthetic --precision fp8
  expect_rc 2 -- "$vexp" bench train data/tiny.toml --steps 0
  expect_rc 2 -- "$vexp" bench train "$tmp/none.toml" --synthetic
  no_crash; expect_out "none.toml"
  ;;
bench_op)
  expect_rc 0 -- "$vexp" bench op temporal_shift --shape 8x16x8x8 --frames 4 --reps 3 --threads 1
  no_crash; expect_out "copy into a reused buffer"; expect_out "shift forward + backward"; expect_out "goal >= 0.8"
  "$vexp" bench op temporal_shift --shape 4x8x4x4 --frames 2 --reps 2 --dtype bfloat16 --channels-last --json >"$tmp/o.json" || fail "bench op --json"
  $PY -c "import json; r=json.load(open('$tmp/o.json')); assert r['shape']==[4,8,4,4] and r['dtype']=='bfloat16' and r['forward']['gb_per_s']>0 and r['copy']['gb_per_s']>0, r" || fail "bench op json"
  expect_rc 2 -- "$vexp" bench op temporal_shift --shape 6x8x4x4 --frames 4
  no_crash; expect_out "not a multiple of --frames 4"
  expect_rc 2 -- "$vexp" bench op temporal_shift --shape 4x8x4
  expect_out "expected four sizes"
  expect_rc 2 -- "$vexp" bench op conv
  # A device that is not one is a usage error (exit 2), named as written.
  expect_rc 2 -- "$vexp" bench op temporal_shift --shape 8x16x8x8 --frames 4 --device nosuch
  no_crash; expect_out '--device = "nosuch": expected cpu, cuda or auto'
  ;;
bench_data)
  "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 8 --val-clips 8 >/dev/null 2>&1 || fail "make-synthetic"
  export VEXP_MOTION_DATA="$tmp/m"
  expect_rc 0 -- "$vexp" bench data data/tiny_video.toml --threads 1,2
  expect_out "threads 1: 8 clips"; expect_out "threads 2: 8 clips"; expect_out "per thread"; expect_out "per CPU second"
  "$vexp" bench data data/tiny_video.toml --split train --json >"$tmp/b.json" || fail "bench --json"
  $PY -c "import json; r=json.load(open('$tmp/b.json')); assert r['results'][0]['clips']==8 and r['results'][0]['clips_per_s']>0 and r['results'][0]['cpu_seconds']>0, r" || fail "bench json"
  expect_rc 2 -- "$vexp" bench
  ;;
bench_train_matches_run)
  # `vexp bench train` takes `vexp run`'s training step (the runtime's TrainStep): N
  # steps of each leave the same weights, bit for bit. The recipe clips its gradients,
  # scales its lr from base_lr / base_batch, warms up, accumulates two micro-batches
  # and emulates two GPUs on one rank (four micro-batches per step; the other GPU's
  # leave BatchNorm's statistics alone): 48 clips / global batch 16 = 3 steps per epoch.
  sets=(--set run.epochs=1 --set optim.clip_grad_norm=0.05 --set optim.base_lr=0.05 --set optim.base_batch=4
        --set dist.world_size=2 --set dist.batch_per_gpu=4 --set dist.accum_steps=2)
  expect_rc 0 -- "$vexp" run data/tiny.toml "${sets[@]}" --out "$tmp/run"
  [ -f "$tmp/run/checkpoints/epoch_0001.pt" ] || fail "the run wrote no epoch_0001.pt"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml "${sets[@]}" --steps 2 --warmup 1 --save-weights "$tmp/bench3.pt"
  no_crash; expect_out "4 micro-batch(es) per step (global batch 16)"; expect_out "weights after 3 steps written to"
  expect_out "scheduled lr"
  "$vexp" bench train data/tiny.toml "${sets[@]}" --steps 3 --warmup 0 --json >"$tmp/b3.json" \
    || fail "bench train --steps 3 --json"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml "${sets[@]}" --steps 2 --warmup 0 --save-weights "$tmp/bench2.pt"
  $PY - "$tmp/run/checkpoints/epoch_0001.pt" "$tmp/bench3.pt" "$tmp/bench2.pt" "$tmp/b3.json" "$tmp/run/metrics.jsonl" <<'PY' \
    || fail "bench train's weights differ from vexp run's"
import json, sys, torch
run, b3, b2 = (torch.load(f, weights_only=True) for f in sys.argv[1:4])
j = json.load(open(sys.argv[4]))
assert j["micro_batches"] == 4 and j["global_batch"] == 16 and j["clips_per_step"] == 16, j
# The loader's stream runs on past the steps (4 micro-batches ahead: 1 step, + 1), never
# taken (the weights below are still vexp run's); data.workers' default.
assert j["loader_ahead_steps"] == 2 and j["data_workers"] == 2, j
# The lr the run logged at its third step is the bench's (0.05 x 16 / 4 = 0.2, warmed up, cosine).
steps = [json.loads(l) for l in open(sys.argv[5])]
last = [l for l in steps if l["type"] == "step" and l["global_step"] == 3]
assert last and last[0]["lr"] == j["lr_last"] and j["lr_last"] > 0, (last, j)
rm, bm = run["model"], b3["model"]
assert set(rm) == set(bm), set(rm) ^ set(bm)
assert any("running_mean" in k for k in rm), list(rm)
bad = [k for k in rm if not torch.equal(rm[k], bm[k])]
assert not bad, "3 steps of bench train and of vexp run differ in " + ", ".join(bad[:5])
assert set(run["optimizer"]) == set(b3["optimizer"]) and all(
    torch.equal(run["optimizer"][k], b3["optimizer"][k]) for k in run["optimizer"]), "momentum differs"
# Not equal by accident: 2 steps leave other weights than 3.
assert any(not torch.equal(rm[k], b2["model"][k]) for k in rm if rm[k].is_floating_point()), "2 steps = 3 steps?"
PY
  expect_rc 2 -- "$vexp" bench train data/tiny.toml --save-weights data/tiny.toml --steps 1 --warmup 0
  expect_out "--save-weights 'data/tiny.toml' is"
  ;;
open_recipe_stand_in)
  # One way to open a recipe (runtime open_recipe): a dataset plugin that is not
  # installed is stood in for by planning commands (run --dry-run, bench train
  # --synthetic) and, given both --input and --classes, by model-only ones (info);
  # a command that reads the data refuses it.
  ds=(--set 'data.dataset="imaginary"' --set data.params.channels=1)
  expect_rc 0 -- "$vexp" run data/tiny.toml "${ds[@]}" --set data.train_size=48 --dry-run
  no_crash; expect_out "dataset plugin 'imaginary' is not installed: planning from the recipe's declared numbers"
  expect_out "global batch"
  expect_rc 2 -- "$vexp" run data/tiny.toml "${ds[@]}" --dry-run
  expect_out "dataset plugin 'imaginary' is not installed and data.train_size is not declared"
  expect_rc 2 -- "$vexp" run data/tiny.toml "${ds[@]}" --set data.train_size=48
  expect_out "imaginary"; expect_out "1 error"
  expect_rc 0 -- "$vexp" info data/tiny.toml "${ds[@]}" --input 4x1x16x16 --classes 4 --json
  expect_out "dataset plugin 'imaginary' is not installed: using the given input shape and classes"
  expect_out '"classes": 4'
  expect_rc 2 -- "$vexp" info data/tiny.toml "${ds[@]}" --input 4x1x16x16
  expect_out "dataset 'imaginary' is not loaded: give both --input TxCxHxW and --classes N"
  # Given facts replace an installed dataset's too.
  expect_rc 0 -- "$vexp" info data/tiny.toml --input 2x1x16x16 --classes 3 --json
  expect_out '"classes": 3'; expect_no_out "not installed"
  expect_rc 0 -- "$vexp" bench train data/tiny.toml "${ds[@]}" --synthetic --steps 1 --warmup 0
  no_crash; expect_out "8 clips x [4, 1, 16, 16] per micro-batch"; expect_out "synthetic data"
  ;;
run_tiny)
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run"
  no_crash
  expect_out "top-1"
  for f in resolved.toml metrics.jsonl summary.json checkpoints/epoch_0002.pt; do
    [ -e "$tmp/run/$f" ] || fail "missing $f"
  done
  $PY - "$tmp/run" <<'PY' || fail "bad run directory contents"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
for k in ("top1","top5","epochs","steps","clips_per_s","wall_s"):
    assert k in s, k
assert 0 <= s["top1"] <= 1 and 0 <= s["top5"] <= 1, s
assert s["epochs"] == 2 and s["steps"] == 12, s
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
assert any(l["type"] == "step" for l in lines) and sum(l["type"] == "eval" for l in lines) == 2, lines
for l in lines:
    if l["type"] == "step":
        assert {"loss","lr","data_s","compute_s","comm_s"} <= set(l), l
PY
  # Interpolation reaches the trainer: one epoch from the environment.
  VEXP_TEST_EPOCHS=1 "$vexp" run data/tiny.toml --out "$tmp/run1" >"$tmp/out" 2>&1 || fail "env run failed"
  grep -q '"epochs": 1' "$tmp/run1/summary.json" || fail "VEXP_TEST_EPOCHS=1 was not applied"
  # compare prints both runs side by side.
  expect_rc 0 -- "$vexp" compare "$tmp/run" "$tmp/run1"
  expect_out "top-1"; expect_out "clips/s"; expect_out "MACs/clip"; expect_out "params"
  # stop + resume finishes the run.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run2" --stop-after 1
  expect_out "continue with --resume"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/run2" --resume
  expect_out "resuming"
  $PY - "$tmp/run" "$tmp/run2" <<'PY' || fail "resumed run differs from the uninterrupted one"
import json, sys
a, b = (json.load(open(d + "/summary.json")) for d in sys.argv[1:3])
for k in ("top1", "top5", "val_loss", "steps"):
    assert a[k] == b[k], (k, a[k], b[k])
PY
  ;;
run_refuses_existing)
  "$vexp" run data/tiny.toml --out "$tmp/run" --set run.epochs=1 >/dev/null 2>&1 || fail "first run failed"
  cp "$tmp/run/summary.json" "$tmp/summary.before"
  expect_rc 1 -- "$vexp" run data/tiny.toml --out "$tmp/run" --set run.epochs=1
  expect_out "already holds a run"
  cmp -s "$tmp/summary.before" "$tmp/run/summary.json" || fail "the existing run was modified"
  expect_rc 1 -- "$vexp" run data/tiny.toml --out "$tmp/nothing" --resume
  expect_out "does not exist"
  ;;
run_resume_auto)
  # One line for the first start and every restart: --resume auto starts a run in a
  # missing directory, or one that holds no run (a lock file is not a run) ...
  mkdir "$tmp/full"; : >"$tmp/full/.vexp.lock"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/full" --resume auto
  expect_out "--resume auto: '$tmp/full' holds no run: starting it"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume auto --stop-after 1
  expect_out "--resume auto: '$tmp/r' holds no run: starting it"
  expect_out "stopped after epoch 1"
  # ... and continues the run a directory holds, to the uninterrupted run's end.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume auto
  expect_out "--resume auto: '$tmp/r' holds a run: continuing it"
  expect_out "resuming '$tmp/r' from epoch_0001.pt"
  $PY - "$tmp/full" "$tmp/r" <<'PY' || fail "the run continued by --resume auto differs from the uninterrupted one"
import glob, json, sys, torch
a, b = (json.load(open(d + "/summary.json")) for d in sys.argv[1:3])
for k in ("top1", "top5", "val_loss", "steps"):
    assert a[k] == b[k], (k, a[k], b[k])
ma, mb = (torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)["model"] for d in sys.argv[1:3])
assert set(ma) == set(mb) and all(torch.equal(ma[k], mb[k]) for k in ma), "weights differ"
PY
  # Once the run is finished, --resume auto (a requeued job) and --resume say so and
  # change nothing (summary.json, metrics, provenance, checkpoints); another recipe
  # is refused below as before.
  snapshot() { (cd "$1" && find . -type f ! -name .vexp.lock -printf '%p %s %T@\n' | sort && cat summary.json provenance.jsonl metrics.jsonl); }
  snapshot "$tmp/r" >"$tmp/r.before"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume auto
  expect_out "holds this recipe's finished run (summary.json): nothing to train, nothing rewritten"
  expect_out "$tmp/r: already finished: top-1"
  expect_no_out "continuing it"
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume
  expect_out "already finished"
  snapshot "$tmp/r" | cmp -s - "$tmp/r.before" || fail "resuming a finished run changed its directory"
  # Interrupted, it prints the command that continues it: the same line with
  # --resume in place of --resume auto.
  VEXP_TEST_FAULT=sigint@step=2 "$vexp" run data/tiny.toml --out "$tmp/i" --resume auto >"$tmp/out" 2>&1
  [ $? -eq 130 ] || { cat "$tmp/out"; fail "the interrupted run did not exit 130"; }
  grep -q "^vexp: to continue: .* --out $tmp/i --resume\$" "$tmp/out" || { cat "$tmp/out"; fail "no resume command"; }
  expect_no_out "auto --resume"
  # The checks of --resume hold: another recipe does not continue this run.
  cp "$tmp/r/summary.json" "$tmp/summary.before"
  cp "$tmp/r/resolved.toml" "$tmp/resolved.before"
  expect_rc 1 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume auto --set optim.momentum=0.8
  expect_out "holds a run: continuing it"
  expect_out "the recipe changed since the run started"
  cmp -s "$tmp/summary.before" "$tmp/r/summary.json" || fail "a refused --resume auto modified the run"
  cmp -s "$tmp/resolved.before" "$tmp/r/resolved.toml" || fail "a refused --resume auto rewrote resolved.toml"
  # Plain --resume keeps its meaning (a missing directory is an error), also
  # before the recipe; a value other than auto is refused.
  expect_rc 1 -- "$vexp" run --resume data/tiny.toml --out "$tmp/nothing"
  expect_out "does not exist"
  expect_rc 2 -- "$vexp" run data/tiny.toml --out "$tmp/nothing" --resume sometimes
  expect_out "--resume takes no value other than auto (got 'sometimes')"
  expect_rc 2 -- "$vexp" run --resume
  expect_out "recipe is required"
  [ ! -e "$tmp/nothing" ] || fail "a refused run created its directory"
  no_crash
  ;;
run_bad_recipe)
  expect_rc 2 -- "$vexp" run data/broken.toml --out "$tmp/run"
  [ ! -e "$tmp/run" ] || fail "an invalid recipe created a run directory"
  expect_rc 2 -- "$vexp" run "$tmp/missing.toml"
  expect_out "missing.toml"
  printf '[run\nepochs = 1\n' > "$tmp/syntax.toml"
  expect_rc 2 -- "$vexp" check "$tmp/syntax.toml"
  expect_out "syntax.toml:1:"
  no_crash
  ;;
checkpoint_loads_in_python)
  "$vexp" run data/tiny.toml --out "$tmp/run" --set run.epochs=1 >/dev/null 2>&1 || fail "run failed"
  $PY - "$tmp/run/checkpoints/epoch_0001.pt" <<'PY' || fail "torch.load cannot read the checkpoint"
import sys, torch
# weights_only=True: PyTorch 2.6 made it torch.load's default; vexp's files must pass it
c = torch.load(sys.argv[1], weights_only=True)
assert c["format"] == "vexp-checkpoint-1"
m = c["model"]
assert "features.conv1.weight" in m and "head.fc.weight" in m, list(m)[:5]
assert "features.layer1.0.bn1.running_mean" in m
assert m["head.fc.weight"].shape == (4, 64), m["head.fc.weight"].shape
PY
  ;;
compare_errors)
  expect_rc 1 -- "$vexp" compare "$tmp/nope"
  expect_out "not a finished run directory"
  mkdir -p "$tmp/bad"; echo "{oops" > "$tmp/bad/summary.json"
  expect_rc 1 -- "$vexp" compare "$tmp/bad"
  expect_out "is not valid JSON"
  ;;
compare_repeated_names)
  # Rows whose run names repeat carry the shortest tail of their directory that
  # tells them apart; unique names stay bare.
  for d in a/tsm_motion b/tsm_motion c/tsn_run runs/one runs/two; do
    mkdir -p "$tmp/$d"
    case $d in a/*|b/*) n=tsm_motion ;; c/*) n=tsn_motion ;; *) n=tsm ;; esac
    printf '{"name": "%s", "top1": 0.5, "top5": 1.0, "params": 10}\n' "$n" > "$tmp/$d/summary.json"
  done
  (cd "$tmp" && "$vexp" compare a/tsm_motion/ "$tmp/b/tsm_motion" c/tsn_run runs/one ./runs/two) > "$tmp/out" 2>&1 \
    || { cat "$tmp/out"; fail "compare failed"; }
  expect_out "tsm_motion (a/tsm_motion) "; expect_out "tsm_motion (b/tsm_motion) "
  expect_out "tsm (one) "; expect_out "tsm (two) "
  grep -q '^tsn_motion ' "$tmp/out" || { cat "$tmp/out"; fail "a unique name got a suffix"; }
  # The comparison report names the same runs the same way (rundir::run_labels).
  (cd "$tmp" && "$vexp" report a/tsm_motion/ "$tmp/b/tsm_motion" runs/one ./runs/two --out "$tmp/cmp.html") \
    > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "report failed"; }
  for l in "tsm_motion (a/tsm_motion)" "tsm_motion (b/tsm_motion)" "tsm (one)" "tsm (two)"; do
    grep -qF "$l" "$tmp/cmp.html" || fail "the comparison report does not name a run '$l' as vexp compare does"
  done
  ;;
docs_links)
  # No doc links a file outside the repository or one that does not exist.
  $PY "$here/docs_links.py" "$src" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "bad links in the docs"; }
  expect_out "every relative one is a file of the repository"
  # The checker fails on each kind of bad link (a repository of its own in $tmp).
  mkdir -p "$tmp/repo/docs" "$tmp/repo/plugins/x" "$tmp/outside"; touch "$tmp/outside/f.md" "$tmp/repo/docs/ok.md"
  printf '# r\n[ok](docs/ok.md#a) [web](https://x.org/a) [here](#top)\n```\n[code](../nowhere.md)\n```\n' > "$tmp/repo/README.md"
  printf '[out](../../outside/f.md)\n[gone](missing.md)\n[two\nlines](../../outside/f.md)\n[abs]: /etc/passwd\n`[span](../x.md)`\n' \
    > "$tmp/repo/docs/a.md"
  printf '![img](../../docs/nothere.png)\n' > "$tmp/repo/plugins/x/README.md"
  expect_rc 1 -- $PY "$here/docs_links.py" "$tmp/repo"
  expect_out "docs/a.md:1: links '../../outside/f.md', which is outside the repository"
  expect_out "docs/a.md:2: links 'missing.md', which does not exist"
  expect_out "docs/a.md:4: links '../../outside/f.md', which is outside the repository"
  expect_out "docs/a.md:5: links '/etc/passwd', an absolute path"
  expect_out "plugins/x/README.md:1: links '../../docs/nothere.png', which does not exist"
  ! grep -q '^README.md:' "$tmp/out" || { cat "$tmp/out"; fail "a good link or one in code was reported"; }
  expect_no_out "x.md'"; expect_no_out "nowhere.md"
  ;;
plugin_path)
  # A folder of broken libraries on VEXP_PLUGIN_PATH: warnings, not a crash.
  VEXP_PLUGIN_PATH="$build/tests/fixtures" "$vexp" plugins >"$tmp/out" 2>&1 || fail "plugins failed"
  expect_out "warning:"; expect_out "built for vexp plugin ABI 99"; expect_out "dataset greeter"
  no_crash
  # A recipe naming a missing plugin folder is an error at the path that names it.
  printf 'extends = "%s"\n[plugins]\npaths = ["no/such/dir"]\n' "$src/recipes/quickstart/tsm_motion.toml" > "$tmp/p.toml"
  expect_rc 2 -- "$vexp" check "$tmp/p.toml"
  expect_out "p.toml:3:10: error: plugin folder '$tmp/no/such/dir' does not exist"
  # vexp's own plugin folder may be named; a folder of its own (the fixtures) only
  # when allowed: refused at the path, loaded with --plugin-path.
  export XDG_CONFIG_HOME="$tmp/config"
  printf 'extends = "%s"\n[plugins]\npaths = ["%s", "%s"]\n' "$src/recipes/quickstart/tsm_motion.toml" \
    "$build/lib/vexp/plugins" "$build/tests/fixtures" > "$tmp/p.toml"
  expect_rc 2 -- "$vexp" check "$tmp/p.toml"
  expect_out "p.toml:3:"; expect_out "is not trusted, so nothing was loaded from it"
  expect_no_out "plugins' is not trusted"
  expect_no_out "built for vexp plugin ABI"   # nothing was loaded from the fixtures
  expect_rc 0 -- "$vexp" check "$tmp/p.toml" --plugin-path "$build/tests/fixtures"
  expect_out "warning:"; expect_out "built for vexp plugin ABI"; expect_out "p.toml: ok"
  ;;
sdk_example)
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install failed"
  [ -x "$tmp/prefix/bin/vexp" ] || fail "vexp not installed"
  ls "$tmp/prefix/lib/vexp/plugins/temporal_shift.so" >/dev/null || fail "plugins not installed"
  cmake -S "$src/examples/plugin" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "configuring the example against the SDK failed"; }
  cmake --build "$tmp/ex" -j2 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "building the example failed"; }
  so=$(find "$tmp/ex" -name 'temporal_smooth.so' | head -1)
  [ -n "$so" ] || fail "temporal_smooth.so not built"
  # The SDK exposes libtorch and nothing else: the package asks for no other
  # dependency and the example's compile read no header of one.
  grep -E 'find_dependency\((spdlog|tomlplusplus|nlohmann_json|CLI11)' "$tmp/prefix/lib/cmake/vexp/vexpConfig.cmake" &&
    fail "the installed package asks for a dependency the SDK does not expose"
  deps=$(find "$tmp/ex" -name '*.o.d' | head -1)
  [ -n "$deps" ] || fail "no dependency file for the example's object"
  grep -qE 'spdlog|toml\+\+|nlohmann|CLI/' "$deps" && fail "the example's compile read a header the SDK should not expose: $(grep -E 'spdlog|toml|nlohmann|CLI/' "$deps" | head -3)"
  grep -q 'vexp/registrar.hpp' "$deps" || fail "the example's dependency file does not list vexp/registrar.hpp: $deps"
  cat > "$tmp/smooth.toml" <<TOML
extends = "$src/recipes/quickstart/tsm_motion.toml"
[plugins]
paths = ["$(dirname "$so")"]
[[model.rewrite]]
at = "features/layer*/block*/residual_in"
insert = { op = "temporal_smooth" }
TOML
  # The recipe alone cannot make vexp load the folder; --plugin-path, or trusting it once, can.
  export XDG_CONFIG_HOME="$tmp/config"
  expect_rc 2 -- "$tmp/prefix/bin/vexp" check "$tmp/smooth.toml"
  expect_out "smooth.toml:3:10: error: plugin folder"; expect_out "vexp trust $(dirname "$so")"
  expect_rc 0 -- "$tmp/prefix/bin/vexp" check --plugin-path "$(dirname "$so")" "$tmp/smooth.toml"
  expect_out "8 inserted operators"
  # docs/writing-a-plugin.md shows what `vexp plugins --path` prints for the example: keep it current.
  "$tmp/prefix/bin/vexp" plugins --path "$(dirname "$so")" >"$tmp/plugins.txt" 2>&1 || fail "vexp plugins --path failed"
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    grep -qF "# $line" "$src/docs/writing-a-plugin.md" ||
      fail "docs/writing-a-plugin.md does not show this line of 'vexp plugins --path' for the example: $line"
  done < <(grep -A3 '^op temporal_smooth' "$tmp/plugins.txt" | tail -n +2)
  [ "$n" -eq 3 ] || fail "expected 3 lines after 'op temporal_smooth' in: $(cat "$tmp/plugins.txt")"
  expect_rc 0 -- "$tmp/prefix/bin/vexp" trust "$(dirname "$so")"
  expect_rc 0 -- "$tmp/prefix/bin/vexp" graph "$tmp/smooth.toml"
  expect_out "+= temporal_smooth("
  expect_rc 0 -- "$tmp/prefix/bin/vexp" run "$tmp/smooth.toml" --out "$tmp/run" \
    --set data.params.train_clips=32 --set data.params.val_clips=8 --set dist.batch_per_gpu=8 \
    --set run.epochs=1 --set data.params.size=16 --set run.threads=1
  expect_out "top-1"
  ;;
sdk_build_tree)
  # find_package(vexp) from the build folder, nothing installed (build/vexpConfig.cmake,
  # build/vexpTargets.cmake): the example configured with CMAKE_PREFIX_PATH, and with
  # vexp_DIR, pointing at the build folder, built, and loaded by vexp plugins --path.
  [ -f "$build/vexpConfig.cmake" ] && [ -f "$build/vexpTargets.cmake" ] ||
    fail "the build folder has no vexpConfig.cmake and vexpTargets.cmake"
  # Like the installed package, it asks for libtorch and nothing else.
  grep -E 'find_dependency\((spdlog|tomlplusplus|nlohmann_json|CLI11)' "$build/vexpConfig.cmake" &&
    fail "the build folder's package asks for a dependency the SDK does not expose"
  grep -q 'find_dependency(Torch' "$build/vexpConfig.cmake" || fail "the build folder's package does not ask for Torch"
  cmake -S "$src/examples/plugin" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$build" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "configuring the example against the build folder failed"; }
  # The example says which package it found: this build's, with this build's plugin folder.
  expect_out "-- vexp 0.1.0 from $build; its plugin folder: $build/lib/vexp/plugins"
  # (without a build type: vexp_add_plugin still optimises the plugin, and the C++
  # standard comes with vexp::sdk, the example's CMakeLists.txt names neither)
  cmake -S "$src/examples/plugin" -B "$tmp/ex_dir" -Dvexp_DIR="$build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "configuring the example with -Dvexp_DIR=<build folder> failed"; }
  expect_out "-- vexp 0.1.0 from $build; its plugin folder: $build/lib/vexp/plugins"
  $PY - "$tmp/ex_dir/compile_commands.json" <<'PY' || fail "the example without a build type is not an optimised C++17+ build"
import json, re, subprocess, sys
(c,) = json.load(open(sys.argv[1]))
cmd = c["command"]
assert " -O2" in cmd and "-DNDEBUG" in cmd, cmd
# vexp::sdk's compile feature: a -std flag of C++17 or later, or none where the
# compiler's own default already is (g++ 12: gnu++17)
std = re.findall(r"-std=\S+", cmd)
if std:
    assert re.fullmatch(r"-std=(gnu|c)\+\+(17|20|23|2a|2b)", std[-1]), cmd
else:
    macros = subprocess.run(cmd.split()[0].split() + ["-dM", "-E", "-x", "c++", "/dev/null"], capture_output=True,
                            text=True, check=True).stdout
    (v,) = re.findall(r"#define __cplusplus (\d+)L", macros)
    assert int(v) >= 201703, (v, cmd)
PY
  cmake --build "$tmp/ex" -j2 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "building the example failed"; }
  so="$tmp/ex/temporal_smooth.so"
  [ -f "$so" ] || fail "temporal_smooth.so not built"
  # It links this build's SDK library, where it lies (no copy, no install).
  ldd "$so" > "$tmp/ldd" 2>&1 || fail "ldd $so failed"
  grep -qF "$build/lib/libvexp_sdk.so" "$tmp/ldd" || fail "the example does not load the build's libvexp_sdk.so: $(cat "$tmp/ldd")"
  expect_rc 0 -- "$vexp" plugins --path "$tmp/ex"
  expect_out "op temporal_smooth  ["; expect_out "temporal_smooth.so 0.1.0]"
  expect_out "- weight (float, default 0.5, range [0.0, 1.0])"
  expect_no_out "warning:"
  cat > "$tmp/smooth.toml" <<TOML
extends = "$src/recipes/quickstart/tsm_motion.toml"
[plugins]
paths = ["$tmp/ex"]
[[model.rewrite]]
at = "features/layer*/block*/residual_in"
insert = { op = "temporal_smooth" }
TOML
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/ex" "$tmp/smooth.toml"
  expect_out "8 inserted operators"
  ;;
modern_recipe)
  # recipes/kinetics400/tsm_r50_8f_modern.toml: the paper's model with every training
  # part a plugin (docs/recipes.md, "A modern recipe"). Checked and planned without
  # the data, its groups printed, and two steps of it trained on synthetic clips of a
  # small shape (AdamW, label smoothing over mixup / cutmix, the ema hook's recipe
  # accepted).
  m=$src/recipes/kinetics400/tsm_r50_8f_modern.toml
  expect_rc 2 -- "$vexp" check "$m"            # without the data: vexp run would refuse
  expect_out "data root 'data/kinetics400' does not exist"
  expect_rc 0 -- "$vexp" check --no-data "$m"
  no_crash
  expect_rc 0 -- "$vexp" run "$m" --dry-run
  expect_out "8 GPUs on 1 rank(s)"
  expect_out "optimizer:         adamw, 2 parameter groups"
  expect_out "loss:              label_smoothing"
  expect_out "batch transforms:  mixup_cutmix"
  expect_out "train clips:       multiscale_crop, flip, rand_augment, normalize"
  expect_out "test clips:        test_crops, normalize"
  expect_out "hooks:             ema"
  expect_rc 0 -- "$vexp" run "$src/recipes/kinetics400/tsm_r50_8f.toml" --dry-run
  expect_out "loss:              cross_entropy (the default)"
  expect_out "train clips:       the dataset's own pipeline"
  expect_out "hooks:             none"
  expect_rc 0 -- "$vexp" check --no-data "$m" --print
  for k in 'type = "adamw"' 'weight_decay = 0.05' 'type = "label_smoothing"' 'type = "mixup_cutmix"' \
           'type = "rand_augment"' 'type = "test_crops"' 'type = "ema"' 'decay = 0.9998'; do expect_out "$k"; done
  ! grep -q 'momentum' "$tmp/out" || fail "SGD's momentum is left in the modern recipe"
  expect_rc 0 -- "$vexp" info "$m" --param-groups
  expect_out "no_decay"
  expect_rc 0 -- "$vexp" bench train "$m" --synthetic --steps 2 --warmup 0 --set run.threads=1 \
    --set data.params.frames=2 --set data.params.input_size=32 --set dist.batch_per_gpu=2 --json
  no_crash
  $PY - "$tmp/out" <<'PY' || fail "bench train of the modern recipe"
import json, sys
r = json.loads(open(sys.argv[1]).read()[open(sys.argv[1]).read().index("{"):])
assert r["phases"]["optimizer"]["median_ms"] > 0, r
print("modern recipe: %.1f clips/s on the synthetic small shape" % r["clips_per_s"])
PY
  ;;
sdk_learnable_example)
  # The guide's operator with learnable weights (examples/learnable_op): built against
  # the build folder, listed as the guide shows it, its recipe checked and trained.
  cmake -S "$src/examples/learnable_op" -B "$tmp/mix" -DCMAKE_PREFIX_PATH="$build" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "configuring examples/learnable_op against the build folder failed"; }
  expect_out "-- vexp 0.1.0 from $build; its plugin folder: $build/lib/vexp/plugins"
  cmake --build "$tmp/mix" -j2 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "building examples/learnable_op failed"; }
  [ -f "$tmp/mix/temporal_mix.so" ] || fail "temporal_mix.so not built"
  # docs/writing-a-plugin.md shows what `vexp plugins --path` prints for it: keep it current.
  "$vexp" plugins --path "$tmp/mix" >"$tmp/plugins.txt" 2>&1 || fail "vexp plugins --path failed"
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    grep -qF "# $line" "$src/docs/writing-a-plugin.md" ||
      fail "docs/writing-a-plugin.md does not show this line of 'vexp plugins --path' for temporal_mix: $line"
  done < <(grep -A7 '^op temporal_mix' "$tmp/plugins.txt" | tail -n +2)
  [ "$n" -eq 7 ] || fail "expected 7 lines after 'op temporal_mix' in: $(cat "$tmp/plugins.txt")"
  # The example's recipe as shipped, but for its two relative paths.
  mkdir -p "$tmp/r"
  sed -e "s#\"\.\./\.\./build-mix\"#\"$tmp/mix\"#" -e "s#\"\.\./\.\./recipes/#\"$src/recipes/#" \
    "$src/examples/learnable_op/tsn_mix.toml" > "$tmp/r/tsn_mix.toml"
  grep -qF "\"$tmp/mix\"" "$tmp/r/tsn_mix.toml" && grep -qF "\"$src/recipes/" "$tmp/r/tsn_mix.toml" ||
    fail "examples/learnable_op/tsn_mix.toml no longer names ../../build-mix and ../../recipes/: update this test"
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/mix" "$tmp/r/tsn_mix.toml"
  expect_out "8 inserted operators"
  # Trained twice (2 epochs of 6 steps, ~5 s each): the same seed gives the same weights
  # bit for bit, the op's random starting taps included.
  for d in a b; do
    expect_rc 0 -- "$vexp" run --plugin-path "$tmp/mix" "$tmp/r/tsn_mix.toml" --out "$tmp/$d" \
      --set run.epochs=2 --set run.log_every=1 --set run.progress=none
    expect_out "top-1"
  done
  # init = "shift" (the default) without noise starts as the tiny TSM recipe: the same
  # first loss up to rounding (out = x + 1 * (y - x)), then its taps move.
  cat > "$tmp/r/shift.toml" <<TOML
extends = "$here/data/tiny.toml"
unset = ["model.rewrite"]
[plugins]
paths = ["$tmp/mix"]
[[model.rewrite]]
at = "features/layer*/block*/residual_in"
insert = { op = "temporal_mix" }
TOML
  expect_rc 0 -- "$vexp" run --plugin-path "$tmp/mix" "$tmp/r/shift.toml" --out "$tmp/shift" \
    --set run.epochs=1 --set run.log_every=1 --set run.progress=none
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/tsm" --set run.epochs=1 --set run.log_every=1 --set run.progress=none
  $PY - "$tmp" <<'PY' || fail "temporal_mix's parameters"
import json, sys, torch
t = sys.argv[1]
def model(run, epoch):
    return torch.load(f"{t}/{run}/checkpoints/epoch_{epoch:04d}.pt", weights_only=True)["model"]
def losses(run):
    rows = (json.loads(l) for l in open(f"{t}/{run}/metrics.jsonl"))
    return [r["loss"] for r in rows if r["type"] == "step"]
# Shape-dependent parameters, named as a state dict names them: [C, 3] taps and a [C] gate
# at each residual_in, C the channels entering the block's residual branch.
points = [f"features.layer{s}.{b}.residual_in" for s in (1, 2, 3, 4) for b in (0, 1)]
channels = [8, 8, 8, 16, 16, 32, 32, 64]
a1, a2, b2, s1 = model("a", 1), model("a", 2), model("b", 2), model("shift", 1)
mix = sorted(k for k in a2 if ".residual_in." in k)
assert mix == sorted(f"{p}.{n}" for p in points for n in ("gate", "weight")), mix
for p, c in zip(points, channels):
    assert a2[p + ".weight"].shape == (c, 3) and a2[p + ".gate"].shape == (c,), (p, a2[p + ".weight"].shape)
# The same recipe and seed: the same weights, bit for bit.
for k in a2:
    assert torch.equal(a2[k], b2[k]), ("two runs of one recipe differ", k)
# Trained: every tap and gate tensor moved during the second epoch.
for k in mix:
    assert not torch.equal(a1[k], a2[k]), ("not updated by training", k)
# init = "shift": TSM's taps (channels [0, C/8) from t+1, [C/8, C/4) from t-1, the rest t)
# and gates at 1, and training moved all of them.
for p, c in zip(points, channels):
    w0 = torch.zeros(c, 3); w0[:, 1] = 1; f = c // 8
    w0[:2 * f, 1] = 0; w0[:f, 2] = 1; w0[f:2 * f, 0] = 1
    w, g = s1[p + ".weight"], s1[p + ".gate"]
    assert not torch.equal(w, w0) and not torch.equal(g, torch.ones(c)), ("shift: not updated", p)
    assert (w - w0).abs().max() < 0.5 and (g - 1).abs().max() < 0.5, ("shift: far from its start", p, w, g)
ls, lt = losses("shift"), losses("tsm")
assert len(ls) == len(lt) == 6, (len(ls), len(lt))
assert abs(ls[0] - lt[0]) <= 1e-4 * lt[0], ("init = shift does not start as TSM", ls[0], lt[0])
PY
  # A bad value is refused before anything is built, at the recipe's line and column:
  # the schema's limits (one_of, a list element's range) and the shape hook's rules.
  printf 'extends = "%s"\n\n[[model.rewrite]]\nat = "features/layer*/block*/residual_in"\ninsert = { op = "temporal_mix", kernel = 4 }\n' \
    "$src/recipes/quickstart/tsn_motion.toml" > "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/mix" "$tmp/bad.toml"
  expect_out "bad.toml:5:33: error: 'kernel' in the insert of rewrite 'features/layer*/block*/residual_in' (temporal_mix): must be one of 1, 3, 5, 7, got 4"
  sed -i 's/kernel = 4/init = "taps", taps = [0.25, 1.5, 0.25]/' "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/mix" "$tmp/bad.toml"
  expect_out "bad.toml:5:48: error: 'taps' in the insert of rewrite 'features/layer*/block*/residual_in' (temporal_mix): element 1: must be in [-1, 1], got 1.5"
  sed -i 's/taps = \[0.25, 1.5, 0.25\]/taps = [0.5, 0.5]/' "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/mix" "$tmp/bad.toml"
  expect_out "bad.toml:3:1: error: rewrite at 'features/layer1/block0/residual_in' (temporal_mix): init = \"taps\" needs one value per tap in taps (kernel = 3), got 2"
  # ... and vexp run refuses it the same way, writing nothing.
  expect_rc 2 -- "$vexp" run --plugin-path "$tmp/mix" "$tmp/bad.toml" --out "$tmp/bad"
  expect_out "bad.toml:3:1: error: rewrite at 'features/layer1/block0/residual_in' (temporal_mix)"
  [ ! -e "$tmp/bad" ] || fail "an invalid temporal_mix value created a run directory"
  no_crash
  ;;
sdk_optimizer_example)
  # The guide's optimizer (examples/optimizer: Lion), built against the build folder and
  # listed as the guide shows it; its recipe checked and trained; every update of a run
  # checked against Lion's rule from the run's checkpoints; a stopped, and an interrupted,
  # run resumed equal to the uninterrupted one bit for bit; its parameter errors at
  # their recipe line and column, naming the optimizer.
  example_build optimizer "$tmp/lion"
  [ -f "$tmp/lion/lion.so" ] || fail "lion.so not built"
  example_listed "$tmp/lion" "optimizer lion" 2
  example_recipe optimizer tsm_lion.toml build-lion "$tmp/lion"
  lion() { "$vexp" run --plugin-path "$tmp/lion" "$tmp/r/tsm_lion.toml" --set run.log_every=1 --set run.progress=none "$@"; }
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/lion" "$tmp/r/tsm_lion.toml"
  expect_out "tsm_lion.toml: ok"
  expect_rc 0 -- lion --dry-run
  expect_out "optimizer:         lion, 2 parameter groups"
  # One step per epoch (8 clips, batch 8): a checkpoint after every step, with the
  # weights and Lion's momentum (exp_avg/<parameter>).
  expect_rc 0 -- lion --out "$tmp/steps" --set data.params.train_clips=8 --set run.epochs=4
  expect_out "top-1"
  $PY - "$tmp/steps" <<'PY' || fail "lion's updates do not follow Lion's rule"
import json, sys, torch
d = sys.argv[1]
b1, b2, wd = 0.9, 0.99, 0.01   # the recipe's betas and weight_decay (biases and BatchNorm: none)
ck = [torch.load(f"{d}/checkpoints/epoch_{e:04d}.pt", weights_only=True) for e in range(1, 5)]
lrs = {r["global_step"]: r["lr"] for r in map(json.loads, open(d + "/metrics.jsonl")) if r["type"] == "step"}
names = [k[len("exp_avg/"):] for k in ck[0]["optimizer"]]
assert names and set(ck[0]["optimizer"]) == {"exp_avg/" + n for n in names}, sorted(ck[0]["optimizer"])[:5]
trainable = {k for k, v in ck[0]["model"].items() if v.is_floating_point() and "running_" not in k}
assert set(names) == trainable, ("momentum for every trainable tensor", set(names) ^ trainable)
moved = total = bad = other = 0
for step in (2, 3, 4):   # from the checkpoint after step - 1 to the one after step
    a, b, lr = ck[step - 2], ck[step - 1], lrs[step]
    for n in names:
        w0, w1 = a["model"][n].double(), b["model"][n].double()
        m0, m1 = a["optimizer"]["exp_avg/" + n].double(), b["optimizer"]["exp_avg/" + n].double()
        g = (m1 - b2 * m0) / (1 - b2)          # the step's gradient, from m1 = b2 m0 + (1 - b2) g
        c = b1 * m0 + (1 - b1) * g             # Lion's interpolation, with the other beta
        decay = wd if w0.dim() > 1 else 0.0
        ref = w0 * (1 - lr * decay) - lr * torch.sign(c)
        err = (w1 - ref).abs()
        # Float32 rounding, and a sign that rounding may flip where c is within it of 0.
        ok = (err <= 1e-6 * (w0.abs() + lr)) | (c.abs() <= 1e-5 * (m0.abs() + g.abs()) + 1e-12)
        bad += int((~ok).sum())
        total += w0.numel()
        moved += int(((w1 - w0 * (1 - lr * decay)).abs() > 0.5 * lr).sum())
        # The sign of the new momentum (b2 in the update) is another rule: it must disagree.
        other += int(((w1 - (w0 * (1 - lr * decay) - lr * torch.sign(m1))).abs() > 0.5 * lr).sum())
assert bad == 0, f"{bad} of {total} elements differ from Lion's update"
assert moved > 0.99 * total, (moved, total)   # sign: every element moves by lr
assert other > 0.001 * total, other           # the check tells b1 from b2
print(f"lion: {total} updates (3 steps) follow Lion's rule; {other} would differ with sign(m_t)")
PY
  # 2 epochs of 6 steps; the same stopped after the first and resumed, and interrupted
  # in the middle of the second and resumed: the same weights, momentum and losses.
  expect_rc 0 -- lion --out "$tmp/full" --set run.epochs=2
  expect_rc 0 -- lion --out "$tmp/stopped" --set run.epochs=2 --stop-after 1
  expect_rc 0 -- lion --out "$tmp/stopped" --set run.epochs=2 --resume
  expect_out "resuming"
  VEXP_TEST_FAULT=sigint@step=8 lion --out "$tmp/int" --set run.epochs=2 >"$tmp/out" 2>&1
  [ $? -eq 130 ] || { cat "$tmp/out"; fail "the interrupted run did not exit 130"; }
  expect_rc 0 -- lion --out "$tmp/int" --set run.epochs=2 --resume
  expect_out "resuming"
  for r in stopped int; do
    $PY - "$tmp/full" "$tmp/$r" <<'PY' || fail "the resumed lion run ($r) differs from the uninterrupted one"
import json, sys, torch
a, b = sys.argv[1], sys.argv[2]
ca, cb = (torch.load(d + "/checkpoints/epoch_0002.pt", weights_only=True) for d in (a, b))
for part in ("model", "optimizer"):
    assert ca[part] and set(ca[part]) == set(cb[part]), part
    for k in ca[part]:
        assert torch.equal(ca[part][k], cb[part][k]), (part, k)
def losses(d): return [(j["global_step"], j["loss"]) for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
assert losses(a) == losses(b) and len(losses(a)) == 12, (losses(a), losses(b))
sa, sb = (json.load(open(d + "/summary.json")) for d in (a, b))
assert (sa["top1"], sa["val_loss"]) == (sb["top1"], sb["val_loss"]), (sa, sb)
PY
  done
  # Refused at the recipe's line and column, naming the optimizer: a key of another
  # optimizer, an element out of the schema's range, an unknown key; and a betas of
  # the wrong length, which only the plugin checks: check and run make the optimizer
  # when they open the recipe, so it is refused at [optim] before any run folder.
  printf 'extends = "%s"\nunset = ["optim.momentum"]\n\n[optim]\ntype = "lion"\nlr = 0.001\nnesterov = true\n' \
    "$src/recipes/quickstart/tsm_motion.toml" >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/lion" "$tmp/bad.toml"
  expect_out "bad.toml:7:1: error: 'nesterov' in [optim] is a parameter of optimizer 'sgd', not of 'lion' (optim.type at $tmp/bad.toml:5:1); 'lion' takes betas"
  sed -i 's/^nesterov = true$/betas = [0.9, 1.0]/' "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/lion" "$tmp/bad.toml"
  expect_out "bad.toml:7:1: error: 'betas' in [optim]: element 1: must be in [0, 1), got 1.0"
  sed -i 's/^betas = \[0.9, 1.0\]$/beta = [0.9, 0.99]/' "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/lion" "$tmp/bad.toml"
  expect_out "bad.toml:7:1: error: unknown key 'beta' in [optim] (did you mean 'betas'?)"
  expect_rc 2 -- "$vexp" run --plugin-path "$tmp/lion" "$tmp/bad.toml" --out "$tmp/bad"
  [ ! -e "$tmp/bad" ] || fail "an invalid lion recipe created a run directory"
  sed -i 's/^beta = \[0.9, 0.99\]$/betas = [0.9]/' "$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/lion" "$tmp/bad.toml"
  expect_out "bad.toml:4:1: error: optimizer 'lion' (from lion.so): betas: expected two numbers [beta1, beta2], got 1 ([optim] at $tmp/bad.toml:4:1)"
  expect_rc 2 -- "$vexp" run --plugin-path "$tmp/lion" "$tmp/bad.toml" --out "$tmp/bad1" --set run.epochs=1 \
    --set data.params.train_clips=8 --set data.params.val_clips=8 --set data.params.size=16
  expect_out "bad.toml:4:1: error: optimizer 'lion' (from lion.so): betas: expected two numbers [beta1, beta2], got 1"
  [ ! -e "$tmp/bad1" ] || fail "a lion recipe the plugin refuses created a run directory"
  no_crash
  ;;
sdk_transform_example)
  # The guide's clip transform (examples/transform: cutout), built against the build
  # folder and listed as the guide shows it; its recipe (a training pipeline of shipped
  # transforms and cutout) checked and trained twice alike; cutout changes the clips
  # (p = 0.5 trains otherwise than p = 0, which trains as the list without it, bit for
  # bit); its parameter errors at their recipe line.
  example_build transform "$tmp/cut"
  [ -f "$tmp/cut/cutout.so" ] || fail "cutout.so not built"
  example_listed "$tmp/cut" "transform cutout" 5
  example_recipe transform tsm_cutout.toml build-cutout "$tmp/cut"
  rcp=$tmp/r/tsm_cutout.toml
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/cut" "$rcp"
  expect_out "tsm_cutout.toml: ok"
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/cut" "$rcp" --print
  expect_out 'type = "cutout"'; expect_out "ratio = [0.3, 3.3]"   # the defaults filled in
  # p = 0: one draw and no rectangle; the list without cutout.
  sed 's/^p = 0.5$/p = 0.0/' "$rcp" >"$tmp/r/p0.toml"
  grep -q '^p = 0.0$' "$tmp/r/p0.toml" || fail "tsm_cutout.toml no longer sets p = 0.5: update this test"
  head -n $(($(line_of "$rcp" 'type = "cutout"') - 2)) "$rcp" >"$tmp/r/none.toml"   # the last table, dropped
  ! grep -q 'type = "cutout"' "$tmp/r/none.toml" && grep -q '"normalize"' "$tmp/r/none.toml" || fail "could not drop cutout from the recipe"
  for r in a b p0 none; do
    f=$rcp; [ "$r" = p0 ] && f=$tmp/r/p0.toml; [ "$r" = none ] && f=$tmp/r/none.toml
    expect_rc 0 -- "$vexp" run --plugin-path "$tmp/cut" "$f" --out "$tmp/$r" --set run.log_every=1 --set run.progress=none
    expect_out "top-1"
  done
  $PY - "$tmp" <<'PY' || fail "cutout's runs"
import json, sys, torch
t = sys.argv[1]
def model(r): return torch.load(f"{t}/{r}/checkpoints/epoch_0001.pt", weights_only=True)["model"]
def losses(r): return [j["loss"] for j in map(json.loads, open(f"{t}/{r}/metrics.jsonl")) if j["type"] == "step"]
def same(x, y): return set(x) == set(y) and all(torch.equal(x[k], y[k]) for k in x)
a, b, p0, none = (model(r) for r in ("a", "b", "p0", "none"))
assert same(a, b), "two runs of one recipe differ: cutout is not a function of the clip's Rng"
assert same(p0, none) and losses("p0") == losses("none"), "p = 0 trains otherwise than the list without cutout"
assert not same(a, none), "cutout with p = 0.5 changed nothing"
la, ln = losses("a"), losses("none")
assert la[0] != ln[0], ("the first batch's loss is the same with and without cutout", la[0])
print("first losses: cutout", la[0], "without", ln[0])
PY
  # Its cost beside the dataset's own pipeline, on the same clips.
  expect_rc 0 -- "$vexp" bench data --plugin-path "$tmp/cut" "$rcp" --split train --pipelines --clips 16
  expect_out "plugins: the recipe's data.train_transforms"; expect_out "plugins / built-in time per clip"
  # Refused at the parameter's line: the schema's range, and what the plugin checks
  # when the recipe is opened (scale in order); vexp run the same, writing nothing.
  sed 's/^scale = \[0.02, 0.25\]$/scale = [0.25, 0.02]/' "$rcp" >"$tmp/bad.toml"
  at=$(line_of "$tmp/bad.toml" 'scale = [0.25, 0.02]')
  [ -n "$at" ] || fail "tsm_cutout.toml no longer sets scale = [0.02, 0.25]: update this test"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/cut" "$tmp/bad.toml"
  expect_out "bad.toml:$at:1: error: data.train_transforms[2] (cutout): scale: expected [min, max] with 0 < min <= max <= 1 (fractions of the frame's area), got [0.25, 0.02]"
  expect_rc 2 -- "$vexp" run --plugin-path "$tmp/cut" "$tmp/bad.toml" --out "$tmp/bad"
  expect_out "bad.toml:$at:1: error: data.train_transforms[2] (cutout): scale:"
  [ ! -e "$tmp/bad" ] || fail "an invalid cutout parameter created a run directory"
  sed 's/^p = 0.5$/p = 1.5/' "$rcp" >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/cut" "$tmp/bad.toml"
  expect_out "bad.toml:$(line_of "$tmp/bad.toml" 'p = 1.5'):1: error: 'p' in data.train_transforms[2] (transform 'cutout'): must be in [0, 1], got 1.5"
  no_crash
  ;;
sdk_objective_example)
  # The guide's library of a loss and a hook (examples/objective: focal, best_weights),
  # built against the build folder and listed as the guide shows it; its recipe checked
  # and trained: focal with gamma = 0 starts as cross-entropy and gamma = 2 below it;
  # the best weights are the checkpoint of the best evaluation, a resumed run keeps
  # them; a batch transform making soft targets is refused with focal, and bad
  # parameters at their line.
  example_build objective "$tmp/obj"
  [ -f "$tmp/obj/objective.so" ] || fail "objective.so not built"
  example_listed "$tmp/obj" "loss focal" 2
  example_listed "$tmp/obj" "hook best_weights" 3
  example_recipe objective tsm_focal.toml build-objective "$tmp/obj"
  rcp=$tmp/r/tsm_focal.toml
  obj() { "$vexp" run --plugin-path "$tmp/obj" "$@" --set run.log_every=1; }
  expect_rc 0 -- "$vexp" check --plugin-path "$tmp/obj" "$rcp"
  expect_out "tsm_focal.toml: ok"
  expect_rc 0 -- obj "$rcp" --out "$tmp/full"
  expect_out "top-1"; expect_out "info epoch 3/3: best_epoch "
  expect_rc 0 -- obj "$rcp" --out "$tmp/g0" --set loss.gamma=0.0 --set run.epochs=1
  expect_rc 0 -- obj "$rcp" --out "$tmp/ce" --set 'loss={ type = "cross_entropy" }' --set run.epochs=1
  expect_rc 0 -- obj "$rcp" --out "$tmp/stopped" --stop-after 1
  expect_rc 0 -- obj "$rcp" --out "$tmp/stopped" --resume
  expect_out "resuming"
  $PY - "$tmp" <<'PY' || fail "focal and best_weights"
import json, sys, torch
t = sys.argv[1]
def records(r, kind): return [j for j in map(json.loads, open(f"{t}/{r}/metrics.jsonl")) if j["type"] == kind]
focal, g0, ce = (records(r, "step")[0]["loss"] for r in ("full", "g0", "ce"))
# gamma = 0 is cross-entropy: the same first batch, the same loss up to rounding.
assert abs(g0 - ce) <= 1e-6 * ce, ("focal with gamma = 0 is not cross-entropy", g0, ce)
# gamma = 2: each clip's cross-entropy times (1 - p)^2, p about 1/4 at the start.
assert 0.4 * ce < focal < 0.75 * ce, ("focal with gamma = 2", focal, ce)
# best_weights: after every evaluation the lowest val_loss so far and its epoch; the
# weights written beside the last checkpoint are that epoch's checkpoint's, all of them.
ev = records("full", "eval")
assert len(ev) == 3, ev
for i, r in enumerate(ev):
    losses = [e["val_loss"] for e in ev[:i + 1]]
    assert r["best_val_loss"] == min(losses) and r["best_epoch"] == 1 + losses.index(min(losses)), r
s = json.load(open(f"{t}/full/summary.json"))
assert s["hook_weights"] == {"best": "checkpoints/epoch_0003.best.pt"}, s
assert s["best_epoch"] == ev[-1]["best_epoch"], s
best = torch.load(f"{t}/full/checkpoints/epoch_0003.best.pt", weights_only=True)
ck = torch.load(f"{t}/full/checkpoints/epoch_{int(s['best_epoch']):04d}.pt", weights_only=True)["model"]
assert set(best) == set(ck) and all(torch.equal(best[k], ck[k]) for k in ck), "the best weights are not that epoch's"
# Resumed after epoch 1: the same records, weights and best weights as the uninterrupted run.
keys = ("epoch", "global_step", "top1", "top5", "val_loss", "best_val_loss", "best_epoch")
def figures(r): return [tuple(e[k] for k in keys) for e in records(r, "eval")]
assert figures("stopped") == figures("full"), (figures("stopped"), figures("full"))
rb = torch.load(f"{t}/stopped/checkpoints/epoch_0003.best.pt", weights_only=True)
assert set(rb) == set(best) and all(torch.equal(rb[k], best[k]) for k in best), "the resumed run's best weights differ"
print("first losses: focal", focal, "gamma 0", g0, "cross-entropy", ce, "; best epoch", s["best_epoch"])
PY
  # vexp predict loads the best weights (all of them) and predicts as that epoch's checkpoint.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 8 --val-clips 8
  video="$tmp/m/$(head -1 "$tmp/m/val_list.txt" | cut -d' ' -f1)"
  best=$($PY -c "import json, sys; print(int(json.load(open(sys.argv[1]))['best_epoch']))" "$tmp/full/summary.json")
  for w in epoch_0003.best "epoch_000$best"; do
    expect_rc 0 -- "$vexp" predict --plugin-path "$tmp/obj" "$rcp" --weights "$tmp/full/checkpoints/$w.pt" --input "$video" \
      --logits "$tmp/$w.json"
    expect_out "0 missing; 0 unexpected"; expect_out "clip 0:"
  done
  cmp -s <($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['logits'])" "$tmp/epoch_0003.best.json") \
    <($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['logits'])" "$tmp/epoch_000$best.json") ||
    fail "the best weights do not predict as epoch $best's checkpoint"
  # focal takes labels only: with mixup (soft targets) it is refused before training,
  # at the batch transform; bad parameters at their line.
  { cat "$rcp"; printf '\n[[data.batch_transforms]]\ntype = "mixup"\n'; } >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/obj" "$tmp/bad.toml"
  expect_out "bad.toml:$(line_of "$tmp/bad.toml" '[[data.batch_transforms]]'):1: error: batch transform 'mixup' makes soft targets [N, classes] and loss 'focal' ($tmp/bad.toml:$(line_of "$tmp/bad.toml" '[loss]'):"
  expect_out "takes class labels only"
  sed 's/^gamma = 2.0$/gamma = -1.0/' "$rcp" >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/obj" "$tmp/bad.toml"
  expect_out "bad.toml:$(line_of "$tmp/bad.toml" 'gamma = -1.0'):1: error: 'gamma' in [loss] (loss 'focal'): must be >= 0, got -1.0"
  sed 's/^metric = "val_loss"$/metric = "top3"/' "$rcp" >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" check --plugin-path "$tmp/obj" "$tmp/bad.toml"
  expect_out "bad.toml:$(line_of "$tmp/bad.toml" 'metric = "top3"'):1: error: 'metric' in hooks[0] (hook 'best_weights'): must be one of \"top1\", \"top5\", \"val_loss\", got \"top3\""
  no_crash
  ;;
run_precision)
  # bf16 autocast on the CPU: the same first losses as fp32 (same weights and
  # data), and the tiny run still learns.
  for p in fp32 bf16; do
    VEXP_TEST_EPOCHS=8 "$vexp" run data/tiny.toml --out "$tmp/$p" --set run.precision=$p --set run.log_every=1 \
      --set run.progress=none >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "run with precision $p"; }
  done
  $PY - "$tmp/fp32" "$tmp/bf16" <<'PY' || fail "bf16 run"
import json, sys
def steps(d):
    return [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if json.loads(l)["type"] == "step"]
f, b = steps(sys.argv[1]), steps(sys.argv[2])
s = json.load(open(sys.argv[2] + "/summary.json"))
assert s["precision"] == "bf16" and s["device"] == "cpu" and s["skipped_steps"] == 0, s
assert json.load(open(sys.argv[1] + "/summary.json"))["precision"] == "fp32"
assert len(f) == len(b) == 48, (len(f), len(b))
for x, y in zip(f[:3], b[:3]):
    assert abs(x - y) <= 0.02 * x, (f[:3], b[:3])   # bf16 rounding only
assert any(x != y for x, y in zip(f, b)), "bf16 gave the fp32 losses exactly: autocast is not in effect"
first, last = sum(b[:6]) / 6, sum(b[-6:]) / 6
assert last < 0.85 * first, ("bf16 did not learn", first, last)
PY
  # The bf16 checkpoint resumes and loads like any other.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --set run.precision=bf16 --stop-after 1
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --set run.precision=bf16 --resume
  expect_out "top-1"
  ;;
run_memory_format)
  # [run] memory_format: auto (the default) trains channels-last, contiguous
  # NCHW; the same weights and data give the same losses up to float rounding,
  # and the checkpoints hold plain contiguous tensors either way.
  for f in auto contiguous; do
    "$vexp" run data/tiny.toml --out "$tmp/$f" --set run.memory_format=$f --set run.log_every=1 \
      --set run.progress=none >"$tmp/out_$f" 2>&1 || { cat "$tmp/out_$f" >&2; fail "run with memory_format $f"; }
  done
  grep -q ", channels_last, global batch" "$tmp/out_auto" || fail "auto did not train channels-last: $(cat "$tmp/out_auto")"
  grep -q ", contiguous, global batch" "$tmp/out_contiguous" || fail "contiguous run did not say so"
  $PY - "$tmp/auto" "$tmp/contiguous" <<'PY' || fail "channels-last run"
import json, sys, torch
def steps(d):
    return [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if json.loads(l)["type"] == "step"]
a, c = steps(sys.argv[1]), steps(sys.argv[2])
assert json.load(open(sys.argv[1] + "/summary.json"))["memory_format"] == "channels_last"
assert json.load(open(sys.argv[2] + "/summary.json"))["memory_format"] == "contiguous"
assert len(a) == len(c) == 12, (len(a), len(c))
for x, y in zip(a[:4], c[:4]):
    assert abs(x - y) <= 1e-4 * abs(y), (a[:4], c[:4])   # float rounding only
m = torch.load(sys.argv[1] + "/checkpoints/epoch_0002.pt", weights_only=True)["model"]
w = m["features.conv1.weight"]
assert w.dim() == 4 and w.is_contiguous(), w.stride()
PY
  # A channels-last run stops and resumes from its checkpoint (momentum buffers
  # back in their parameters' layout).
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --stop-after 1
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/r" --resume
  expect_out "top-1"
  # A bad value names the recipe line and column, and nothing is written.
  printf 'extends = "%s/data/tiny.toml"\n\n[run]\nmemory_format = "nhwc"\n' "$here" >"$tmp/bad.toml"
  expect_rc 2 -- "$vexp" run "$tmp/bad.toml" --out "$tmp/bad"
  expect_out "bad.toml:4:1: error: 'memory_format' in [run]"
  [ ! -e "$tmp/bad" ] || fail "an invalid memory_format created a run directory"
  no_crash
  ;;
run_device_errors)
  # CUDA asked for where there is none: one line naming the recipe line and key,
  # exit 1, nothing written. (On a CUDA machine the check is skipped.)
  if $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "SKIP [$name]: a CUDA device is visible"; exit 0
  fi
  printf 'extends = "%s"\n[run]\ndevice = "cuda"\n' "$here/data/tiny.toml" >"$tmp/gpu.toml"
  expect_rc 1 -- "$vexp" run "$tmp/gpu.toml" --out "$tmp/r"
  no_crash; expect_out "gpu.toml:3:1: [run] device = \"cuda\": "
  [ "$(grep -c . "$tmp/out")" = 1 ] || { cat "$tmp/out" >&2; fail "more than one line"; }
  [ ! -e "$tmp/r" ] || fail "a run directory was created"
  expect_rc 1 -- "$vexp" run data/tiny.toml --out "$tmp/r" --set run.device=cuda
  expect_out "--set run.device=cuda: [run] device = \"cuda\""
  expect_rc 1 -- "$vexp" bench train "$tmp/gpu.toml" --synthetic
  expect_out "gpu.toml:3:1: [run] device"
  expect_rc 1 -- "$vexp" bench train data/tiny.toml --synthetic --device cuda
  expect_out "--device = \"cuda\""
  # fp16 needs CUDA; a device name the schema does not know is a recipe error.
  expect_rc 1 -- "$vexp" run data/tiny.toml --out "$tmp/r" --set run.precision=fp16
  expect_out "[run] precision = \"fp16\" needs a CUDA device"
  expect_rc 2 -- "$vexp" check data/tiny.toml --set run.device=gpu
  expect_out "'device' in [run]: must be one of \"cpu\", \"cuda\", \"auto\""
  # auto falls back to the CPU.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/auto" --set run.device=auto --set run.epochs=1
  grep -q '"device": "cpu"' "$tmp/auto/summary.json" || fail "auto did not train on the CPU"
  ;;
bench_allreduce)
  expect_rc 0 -- "$vexp" bench allreduce --mb 1 --reps 3
  no_crash; expect_out "allreduce local, 1 rank(s), 1.0 MiB float on cpu"; expect_out "busbw"
  expect_out "exact reduction (dist.reduction = \"exact\") of the same bytes as 160 tensors:"
  "$vexp" bench allreduce --mb 0.5 --reps 2 --tensors 7 --json >"$tmp/a.json" || fail "bench allreduce --json"
  $PY -c "import json; r=json.load(open('$tmp/a.json')); assert r['ranks']==1 and r['backend']=='local' and r['algbw_gb_per_s']>0 and abs(r['mb']-0.5)<1e-9 and r['exact']['tensors']==7 and r['exact']['median_ms']>0 and r['exact']['ratio_to_float'] is None, r" || fail "bench allreduce json"
  expect_rc 1 -- "$vexp" bench allreduce --backend nosuch
  expect_out "--backend nosuch"
  expect_rc 2 -- "$vexp" bench allreduce --param oops
  expect_out "expected KEY=VALUE"
  if command -v mpirun >/dev/null; then
    expect_rc 0 -- mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      "$vexp" bench allreduce --backend mpi --mb 1 --reps 3
    expect_out "allreduce mpi, 2 rank(s)"; expect_out "x the float allreduce (int64 on the wire"
  fi
  ;;
private_home)
  # tests/support/setup.sh: a test never reads the user's per-user state. A made-up
  # user whose trusted-plugin list names a folder, and whose VEXP_PLUGIN_PATH is set,
  # starts a test script: the script sees a private HOME, no VEXP_PLUGIN_PATH and no
  # trusted folder.
  fake=$tmp/user
  mkdir -p "$fake/.config" "$tmp/trusted"
  HOME=$fake XDG_CONFIG_HOME=$fake/.config "$vexp" trust "$tmp/trusted" >"$tmp/plant" 2>&1 || { cat "$tmp/plant"; fail "cannot trust a folder for the made-up user"; }
  HOME=$fake XDG_CONFIG_HOME=$fake/.config "$vexp" trust --list | grep -qxF "$tmp/trusted" || fail "the made-up user's list lacks $tmp/trusted"
  HOME=$fake XDG_CONFIG_HOME=$fake/.config VEXP_PLUGIN_PATH=$tmp/trusted \
    expect_rc 0 -- bash "$here/cli_tests.sh" home_probe "$vexp" "$src" "$build"
  expect_out "home: private"; expect_out "plugin path: unset"; expect_no_out "$tmp/trusted"
  ;;
home_probe)  # started by private_home
  case "$HOME:$XDG_CONFIG_HOME" in "$tmp"/*:"$tmp"/*) echo "home: private" ;; *) echo "home: $HOME, config: ${XDG_CONFIG_HOME:-}" ;; esac
  echo "plugin path: ${VEXP_PLUGIN_PATH-unset}"
  "$vexp" trust --list
  ;;
*) fail "unknown test" ;;
esac
echo "PASS [$name]"
