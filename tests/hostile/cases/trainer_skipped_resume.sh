# skipped_samples counts distinct bad files: 3 bad files drawn in each of 3 epochs
# are 3 (not 9 skip events), and a run stopped after one epoch and resumed reports
# what the uninterrupted run reports.
source "$(dirname "$0")/../lib.sh"
"$vexp" data make-synthetic --out "$tmp/m" --classes 4 --size 16 --train-clips 13 --val-clips 8 >/dev/null 2>&1 \
  || fail "make-synthetic"
first=$(head -1 "$tmp/m/train_list.txt" | cut -d' ' -f1)
head -c 600 "$tmp/m/$first" >"$tmp/m/truncated.mp4"
echo "not a video" >"$tmp/m/garbage.mp4"
# 13 good + 3 bad = 16 items = 2 batches of 8: every item is drawn every epoch.
{ cat "$tmp/m/train_list.txt"; echo "missing.mp4 16 0"; echo "truncated.mp4 16 1"; echo "garbage.mp4 16 2"; } >"$tmp/m/faulty.txt"
export VEXP_MOTION_DATA="$tmp/m"
S=(--set data.params.train_list=faulty.txt --set data.params.max_bad_fraction=0.2 --set run.epochs=3)
expect_rc 0 -- "$vexp" run "$src/tests/cli/data/tiny_video.toml" "${S[@]}" --out "$tmp/full"
no_crash
expect_rc 0 -- "$vexp" run "$src/tests/cli/data/tiny_video.toml" "${S[@]}" --out "$tmp/split" --stop-after 1
expect_rc 0 -- "$vexp" run "$src/tests/cli/data/tiny_video.toml" "${S[@]}" --out "$tmp/split" --resume
expect_out "resuming"
$PY - "$tmp/full" "$tmp/split" <<'PY' || fail "skipped_samples is not the number of distinct bad files"
import json, sys
a, b = (json.load(open(d + "/summary.json")) for d in sys.argv[1:3])
assert a["skipped_samples"] == 3, a
assert b["skipped_samples"] == 3, b
PY
echo "PASS [$name]"
