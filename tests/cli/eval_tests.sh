#!/usr/bin/env bash
# End-to-end tests of `vexp eval` on the quickstart's motion clips written as videos
# (the kinetics dataset, as Kinetics-400 would be read).
# Usage: eval_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
CHECK_CRASH_EVERY_RUN=1  # every run here is also checked for crashes
source "$src/tests/support/setup.sh" eval
R=$here/data/tiny_video.toml

# The tiny motion videos ($1 validation clips) and a model trained on them for an epoch ($tmp/run).
setup_run() {
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 16 --val-clips "$1"
  export VEXP_MOTION_DATA="$tmp/motion"
  expect_rc 0 -- "$vexp" run "$R" --out "$tmp/run"
}

# same_evals A B: the two eval folders hold the same figures, per-class counts, confusion
# matrix and failures, and the same logits bit for bit (logits.pt).
same_evals() {
  $PY - "$1" "$2" <<'PY' || fail "the evaluations in $1 and $2 differ"
import json, sys, torch
a, b = (json.load(open(d + "/eval.json")) for d in sys.argv[1:3])
for k in ("videos", "evaluated", "failed", "top1", "top5", "mean_class_accuracy", "top1_all", "top5_all",
          "mean_class_accuracy_all", "correct_top1", "correct_top5", "per_class", "confusion", "failures", "protocol"):
    assert a[k] == b[k], (k, a[k], b[k])
la, lb = (torch.load(d + "/logits.pt") for d in sys.argv[1:3])
assert set(la) == {"logits", "labels", "evaluated", "predicted"}, set(la)
for k in la:  # bit for bit; a failed video's row is NaN in both
    same = torch.equal(la[k], lb[k]) if not la[k].is_floating_point() else \
        torch.allclose(la[k], lb[k], rtol=0, atol=0, equal_nan=True)
    assert same, k
print("same:", a["summary"], "| ranks", a["ranks"], "and", b["ranks"])
PY
}

case "$name" in
ranks)
  # 1 rank and 2 ranks (--nproc 2: mpirun): every video evaluated once, the same figures and
  # the same per-video logits bit for bit. 9 views per video with 4 per forward pass (pieces
  # of 4, 4, 1); then 2 videos a chunk (--batch 18) over 11 videos (6 chunks: 3 and 3 ranks' shares
  # of unequal size).
  setup_run 11
  S=(--set data.params.test_clips=3 --set data.params.test_crops=3 --logits)
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" "${S[@]}" --batch 4 --out "$tmp/one"
  expect_out "over 11 of 11 videos (every video decoded)"
  expect_out "tsn-3x3, 9 views per video"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" "${S[@]}" --batch 4 --out "$tmp/two" --nproc 2
  expect_out "starting 2 local ranks"; expect_out "on 2 ranks"
  same_evals "$tmp/one" "$tmp/two"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" "${S[@]}" --batch 18 --out "$tmp/one18"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" "${S[@]}" --batch 18 --out "$tmp/two18" --nproc 2
  same_evals "$tmp/one18" "$tmp/two18"
  $PY - "$tmp/one/eval.json" "$tmp/two/eval.json" "$tmp/one/logits.pt" <<'PY' || fail "eval.json"
import json, sys, torch
one, two = (json.load(open(f)) for f in sys.argv[1:3])
assert one["ranks"] == 1 and two["ranks"] == 2, (one["ranks"], two["ranks"])
assert one["videos"] == 11 and one["evaluated"] == 11 and one["failed"] == 0
assert one["protocol"]["views"] == 9 and one["protocol"]["test_clips"] == 3 and one["protocol"]["test_crops"] == 3
assert sum(c["videos"] for c in one["per_class"]) == 11
assert sum(map(sum, one["confusion"])) == 11
assert len(one["weights"]["sha256"]) == 64 and one["weights"]["path"].endswith(".pt")
l = torch.load(sys.argv[3])
assert l["logits"].shape == (11, 4) and torch.isfinite(l["logits"]).all()
assert one["top1"] == (l["predicted"] == l["labels"]).double().mean().item()
PY
  # The default folder: RUN_DIR/eval-PROTOCOL; its provenance like a run's.
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run"
  [ -f "$tmp/run/eval-tsn-1x1/eval.json" ] || fail "no $tmp/run/eval-tsn-1x1/eval.json"
  [ -f "$tmp/run/eval-tsn-1x1/provenance.jsonl" ] || fail "no provenance.jsonl in the eval folder"
  grep -q '"outcome": *"finished"' "$tmp/run/eval-tsn-1x1/provenance.jsonl" || fail "provenance not finished"
  grep -q '"eval"' "$tmp/run/eval-tsn-1x1/provenance.jsonl" || fail "provenance lacks the command line"
  # Weights given as a file: eval/RECIPE-PROTOCOL under the working directory.
  ckpt=$(ls "$tmp/run/checkpoints/"*.pt | tail -1)
  (cd "$tmp" && "$vexp" eval "$R" --weights "$ckpt" --set data.params.test_full_res=true) > "$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "eval with a checkpoint file"; }
  [ -f "$tmp/eval/tiny_video-tsn-1x1-fullres/eval.json" ] || { cat "$tmp/out"; fail "no eval/tiny_video-tsn-1x1-fullres"; }
  ;;
bad_video)
  # A missing and a broken video are counted and named (stderr and eval.json), left out of
  # the denominator and never replaced by another video; the figures counting them as
  # wrong stand beside; 2 ranks agree with 1.
  setup_run 12
  list="$tmp/motion/val_list.txt"
  gone=$(sed -n 3p "$list" | cut -d' ' -f1); broken=$(sed -n 8p "$list" | cut -d' ' -f1)
  rm "$tmp/motion/$gone"
  head -c 300 "$tmp/motion/$broken" > "$tmp/cut" && mv "$tmp/cut" "$tmp/motion/$broken"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" --logits --out "$tmp/one"
  expect_out "2 of 12 videos failed to decode"
  expect_out "$gone"; expect_out "$broken"
  expect_out "over 10 of 12 videos; 2 failed to decode and are left out (counted as wrong: top-1"
  expect_no_out "replaced by another sample"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" --logits --out "$tmp/two" --nproc 2
  expect_out "2 of 12 videos failed to decode"
  same_evals "$tmp/one" "$tmp/two"
  $PY - "$tmp/one/eval.json" "$gone" "$broken" <<'PY' || fail "eval.json of the failed videos"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["videos"] == 12 and e["evaluated"] == 10 and e["failed"] == 2, e
items = [f["item"] for f in e["failures"]]
assert [f["index"] for f in e["failures"]] == [2, 7], e["failures"]
assert items[0].endswith(sys.argv[2]) and items[1].endswith(sys.argv[3]), items
assert all(f["error"] for f in e["failures"]) and all(f["label"] >= 0 for f in e["failures"])
assert abs(e["top1_all"] - e["top1"] * 10 / 12) < 1e-12, (e["top1"], e["top1_all"])
assert sum(c["videos"] for c in e["per_class"]) == 12 and sum(c["evaluated"] for c in e["per_class"]) == 10
assert "10 evaluated videos of the 12 listed" in e["denominator"], e["denominator"]
PY
  ;;
refuse)
  # An earlier eval.json is replaced only with --force; a run folder is no eval folder;
  # an output never replaces an input.
  setup_run 4
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run"
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run"
  expect_out "eval-tsn-1x1/eval.json' exists (an earlier evaluation): give --force to replace it"
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run" --nproc 2
  expect_out "give --force"; expect_no_out "starting 2 local ranks"
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" --force
  [ "$(grep -c '"invocation"' "$tmp/run/eval-tsn-1x1/provenance.jsonl")" = 2 ] || fail "the second invocation is not recorded"
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run" --out "$tmp/run"
  expect_out "is a run folder"
  touch "$tmp/afile"
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run" --out "$tmp/afile"
  expect_out "is not a folder"
  ;;
errors)
  # One clear line naming what is wrong, and a non-zero exit.
  setup_run 4
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run" --set data.params.test_crop=3
  expect_out "--set"; expect_out "test_crop"; expect_out "did you mean 'test_crops'"
  expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run" --set data.params.test_crops=4
  expect_out "test_crops"
  expect_rc 1 -- "$vexp" eval "$R" --weights "$tmp/nothere.pt"
  expect_out "nothere.pt"
  printf 'not a checkpoint' > "$tmp/garbage.pt"
  expect_rc 1 -- "$vexp" eval "$R" --weights "$tmp/garbage.pt"
  expect_out "garbage.pt"
  mkdir "$tmp/empty"
  expect_rc 1 -- "$vexp" eval "$R" --weights "$tmp/empty"
  expect_out "no checkpoint"
  expect_rc 2 -- "$vexp" eval "$R"
  expect_out "--weights is required"
  VEXP_MOTION_DATA="$tmp/nodata" expect_rc 2 -- "$vexp" eval "$R" --weights "$tmp/run"
  expect_out "nodata"
  # srun's 2 tasks with the recipe's local backend: one line from the first, none from the second.
  expect_rc 2 -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 "$vexp" eval "$R" --weights "$tmp/run"
  expect_out "dist.backend = \"local\" evaluates in one process, but Slurm (srun) started 2 tasks"
  [ "$(wc -l <"$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }
  expect_rc 2 -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 "$vexp" eval "$R" --weights "$tmp/run"
  [ ! -s "$tmp/out" ] || { cat "$tmp/out"; fail "the second task printed"; }
  [ ! -e "$tmp/run/eval-tsn-1x1" ] || fail "a refused eval wrote its folder"
  ;;
report)
  # vexp report shows an eval folder, and a run folder's evaluations.
  setup_run 8
  expect_rc 0 -- "$vexp" eval "$R" --weights "$tmp/run" --set data.params.test_crops=3
  top1=$($PY -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["top1"])' "$tmp/run/eval-tsn-1x3/eval.json")
  expect_rc 0 -- "$vexp" report "$tmp/run/eval-tsn-1x3"
  expect_out "eval report"
  f="$tmp/run/eval-tsn-1x3/report.html"
  for want in "eval tsn-1x3 of tiny_video" "Per-class accuracy" "Confusion" "Failed videos" "Provenance" "$top1" \
              "test_crops"; do
    grep -qF -- "$want" "$f" || fail "the eval report lacks: $want"
  done
  expect_rc 0 -- "$vexp" report "$tmp/run"
  for want in "Evaluations (vexp eval)" "eval-tsn-1x3" "$top1"; do
    grep -qF -- "$want" "$tmp/run/report.html" || fail "the run report lacks: $want"
  done
  ;;
*) fail "unknown test $name" ;;
esac
