#!/usr/bin/env bash
# The clip transform plugins end to end (plugins/transforms/clip, [[data.train_transforms]],
# [[data.test_transforms]]). Usage: transforms_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
source "$src/tests/support/setup.sh" transforms
cd "$tmp"

# tiny.toml (synthetic motion, gray clips) with lists after `extends`.
recipe() {  # FILE LINES...: a recipe extending the tiny one
  local f=$1; shift
  { echo "extends = \"$src/tests/cli/data/tiny.toml\""
    printf '%s\n' "$@"; } >"$f"
}
# line_of FILE TEXT: the line number of the first line holding TEXT
line_of() { grep -nF -- "$2" "$1" | head -1 | cut -d: -f1; }

case "$name" in
plugins)
  # vexp plugins lists every transform with its parameters.
  expect_rc 0 -- "$vexp" plugins
  for t in multiscale_crop random_resized_crop flip test_crops color_jitter grayscale rand_augment normalize; do
    expect_out "transform $t"
  done
  expect_out "num_ops (int, default 2"; expect_out "scales (float[], default [1.0, 0.875, 0.75, 0.66]"
  expect_out "interpolation (string, default \"nearest\", one of \"nearest\"|\"bilinear\")"
  ;;
errors)
  # Bad parameters at file:line:col: the schema's (range, choice, unknown key, unknown
  # transform) and those only the plugin can judge (at the parameter), the order of the
  # stages, views in a training list, mean/std against the clip's channels.
  recipe r1.toml '[[data.train_transforms]]' 'type = "flip"' 'p = 1.5'
  expect_rc 2 -- "$vexp" check r1.toml
  expect_out "r1.toml:$(line_of r1.toml 'p = 1.5'):1: error:"; expect_out "1.5"
  recipe r2.toml '[[data.train_transforms]]' 'type = "random_resized_crop"' 'scale = [0.9, 0.1]'
  expect_rc 2 -- "$vexp" check r2.toml
  expect_out "r2.toml:$(line_of r2.toml 'scale =' ):1: error: data.train_transforms[0] (random_resized_crop): scale: expected [min, max] with 0 < min <= max <= 1"
  recipe r3.toml '[[data.train_transforms]]' 'type = "flip"' '[[data.train_transforms]]' 'type = "rand_augment"' 'magnitude = 40'
  expect_rc 2 -- "$vexp" check r3.toml
  expect_out "r3.toml:$(line_of r3.toml 'magnitude = 40'):1: error: data.train_transforms[1] (rand_augment): magnitude: must be below num_magnitude_bins (31), got 40"
  recipe r3b.toml '[[data.train_transforms]]' 'type = "rand_augment"' 'ops = ["rotate", "twirl"]'
  expect_rc 2 -- "$vexp" check r3b.toml
  expect_out "r3b.toml:$(line_of r3b.toml 'ops = '):1: error: 'ops' in data.train_transforms[0] (transform 'rand_augment'): element 1: must be one of"
  expect_out 'got "twirl"'
  recipe r4.toml '[[data.train_transforms]]' 'type = "color_jitter"' 'brightness = 0.4' \
                 '[[data.train_transforms]]' 'type = "random_resized_crop"'
  expect_rc 2 -- "$vexp" check r4.toml
  expect_out "r4.toml:$(grep -n 'data.train_transforms' r4.toml | sed -n 2p | cut -d: -f1):1: error: data.train_transforms[1] (random_resized_crop) chooses the geometry, which is decided before decoding, but follows the pixel transform data.train_transforms[0] (color_jitter)"
  recipe r5.toml '[[data.train_transforms]]' 'type = "test_crops"' 'crops = 3'
  expect_rc 2 -- "$vexp" check r5.toml
  expect_out "error: data.train_transforms[0] (test_crops): makes 3 test views of a clip; training takes one clip per sample"
  recipe r6.toml '[[data.test_transforms]]' 'type = "normalize"'
  expect_rc 2 -- "$vexp" check r6.toml
  expect_out "error: data.test_transforms[0] (normalize): mean: 3 values for clips of 1 channel (give 1 or 1)"
  recipe r7.toml '[[data.train_transforms]]' 'type = "twirl"'
  expect_rc 2 -- "$vexp" check r7.toml
  expect_out "r7.toml:$(line_of r7.toml 'type = "twirl"'):"; expect_out "twirl"
  recipe r8.toml '[[data.train_transforms]]' 'type = "flip"' 'q = 1'
  expect_rc 2 -- "$vexp" check r8.toml
  expect_out "r8.toml:$(line_of r8.toml 'q = 1'):1: error:"
  # An empty list: the dataset's own pipeline, said.
  recipe r9.toml '[data]' 'train_transforms = []'
  expect_rc 0 -- "$vexp" check r9.toml
  expect_out "r9.toml:$(line_of r9.toml 'train_transforms = []'):1: warning: data.train_transforms is empty: the dataset's own pipeline runs"
  # vexp run refuses the same, before anything starts.
  expect_rc 2 -- "$vexp" run r2.toml --out "$tmp/run2"
  expect_out "r2.toml:$(line_of r2.toml 'scale =' ):1: error: data.train_transforms[0] (random_resized_crop): scale:"
  [ ! -e "$tmp/run2" ] || fail "a refused run made its folder"
  no_crash
  ;;
kinetics_views)
  # The kinetics dataset: test_crops and a test list disagreeing on the crops are
  # refused at the list (check and run); a test list of 10 crops evaluates 10 views.
  "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 8 --val-clips 8 >/dev/null 2>&1 ||
    fail "make-synthetic"
  export VEXP_MOTION_DATA="$tmp/m"
  { echo "extends = \"$src/tests/cli/data/tiny_video.toml\""
    echo '[data.params]'; echo 'test_crops = 3'
    echo '[[data.test_transforms]]'; echo 'type = "test_crops"'; echo 'crops = 10'
    echo '[[data.test_transforms]]'; echo 'type = "normalize"'; echo 'mean = [0.5]'; echo 'std = [0.25]'; } >k.toml
  expect_rc 2 -- "$vexp" check k.toml
  expect_out "k.toml:$(grep -n 'data.test_transforms' k.toml | head -1 | cut -d: -f1):1: data.test_transforms: dataset 'kinetics': test_crops = 3 but data.test_transforms make 10 views of each clip"
  expect_rc 2 -- "$vexp" run k.toml --out "$tmp/k"
  expect_out "test_crops = 3 but data.test_transforms make 10 views of each clip"
  sed -i 's/^test_crops = 3$/test_crops = 1/' k.toml
  { echo '[[data.train_transforms]]'; echo 'type = "random_resized_crop"'; echo 'scale = [0.3, 1.0]'
    echo '[[data.train_transforms]]'; echo 'type = "rand_augment"'
    echo '[[data.train_transforms]]'; echo 'type = "normalize"'; echo 'mean = [0.5]'; echo 'std = [0.25]'; } >>k.toml
  expect_rc 0 -- "$vexp" run k.toml --out "$tmp/k" --set run.epochs=1
  no_crash; expect_out "top-1"
  expect_out "flip = false has no effect with data.train_transforms"
  grep -q 'type = "rand_augment"' "$tmp/k/resolved.toml" || fail "resolved.toml lacks the train list"
  grep -q 'num_magnitude_bins = 31' "$tmp/k/resolved.toml" || fail "resolved.toml lacks the defaults of the list"
  # predict runs the recipe's test list: a list equal to the built-in test pipeline
  # gives its logits bit for bit; 10 crops (5 mirrored) give others.
  video="$tmp/m/$(head -1 "$tmp/m/val_list.txt" | cut -d' ' -f1)"
  expect_rc 0 -- "$vexp" predict k.toml --weights "$tmp/k" --input "$video" --logits "$tmp/ten.json"
  expect_out "clip 0:"
  sed -e 's/^crops = 10$/crops = 1/' -e 's/^type = "test_crops"$/type = "test_crops"\nscale_size = 16/' k.toml >k1.toml
  expect_rc 0 -- "$vexp" predict k1.toml --weights "$tmp/k" --input "$video" --logits "$tmp/one.json"
  expect_rc 0 -- "$vexp" predict "$src/tests/cli/data/tiny_video.toml" --weights "$tmp/k" --input "$video" --logits "$tmp/builtin.json"
  $PY - "$tmp/one.json" "$tmp/builtin.json" "$tmp/ten.json" <<'PY' || fail "predict does not run the recipe's test list"
import json, sys
one, builtin, ten = (json.load(open(f))["logits"] for f in sys.argv[1:4])
assert one == builtin, (one, builtin)
assert one != ten, (one, ten)
PY
  ;;
bench_pipelines)
  # vexp bench data --pipelines: the built-in pipeline and the plugins' on the same clips,
  # the ratio printed; with no list the plugins are the built-in pipeline as plugins and
  # give the same clips bit for bit (kinetics videos: train and val; synthetic motion).
  "$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 8 --val-clips 8 >/dev/null 2>&1 ||
    fail "make-synthetic"
  export VEXP_MOTION_DATA="$tmp/m"
  for split in train val; do
    expect_rc 0 -- "$vexp" bench data "$src/tests/cli/data/tiny_video.toml" --split $split --pipelines --threads 1,2
    no_crash
    expect_out "built-in: "; expect_out "plugins: the built-in pipeline as transform plugins (the same clips, bit for bit)"
    expect_out "threads 1: built-in"; expect_out "threads 2: built-in"; expect_out "plugins / built-in time per clip"
  done
  "$vexp" bench data "$src/tests/cli/data/tiny_video.toml" --split train --pipelines --json >"$tmp/b.json" ||
    fail "bench --pipelines --json"
  $PY - "$tmp/b.json" <<'PY' || fail "bench --pipelines json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["identical_clips"] == 8 and r["builtin"] == "multiscale_crop, normalize", r
x = r["results"][0]
assert x["clips"] == 16 and x["builtin_clips_per_s"] > 0 and x["plugins_clips_per_s"] > 0 and x["time_ratio"] > 0, x
PY
  recipe s.toml '[[data.train_transforms]]' 'type = "random_resized_crop"' '[[data.train_transforms]]' 'type = "rand_augment"' \
                '[[data.train_transforms]]' 'type = "normalize"' 'mean = [0.5]' 'std = [0.25]'
  expect_rc 0 -- "$vexp" bench data s.toml --split train --pipelines --clips 16
  expect_out "plugins: the recipe's data.train_transforms"; expect_out "plugins / built-in time per clip"
  expect_no_out "bit for bit"
  ;;
*)
  fail "unknown test"
  ;;
esac
exit 0
