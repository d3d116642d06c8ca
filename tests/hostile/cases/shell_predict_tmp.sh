# vexp predict wrote its one-line video list to $TMPDIR/vexp_predict_<pid>/predict.txt:
# a folder planted at the next pids with predict.txt linked to a victim file got the
# victim overwritten. It then used a private mkdtemp folder; since plugin ABI 6 it
# writes no list at all (the dataset's file reader reads the video,
# Dataset::file_views). Either way the planted links are never followed.
source "$(dirname "$0")/../lib.sh"
expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
export VEXP_MOTION_DATA="$tmp/motion"
expect_rc 0 -- "$vexp" run "$src/tests/cli/data/tiny_video.toml" --out "$tmp/run" --set run.epochs=1
ckpt=$(ls "$tmp/run/checkpoints/"*.pt | tail -1)
video="$tmp/motion/$(head -1 "$tmp/motion/val_list.txt" | cut -d' ' -f1)"
export TMPDIR="$tmp/shared_tmp"
mkdir -p "$TMPDIR"
echo "precious" >"$tmp/victim"
# One process plants the next 2000 pids' folders (a loop of mkdir/ln would use them up).
$PY - "$TMPDIR" "$tmp/victim" <<'PY' || fail "could not plant the links"
import os, sys
for p in range(os.getpid() + 1, os.getpid() + 2000):
    d = os.path.join(sys.argv[1], "vexp_predict_%d" % p)
    os.mkdir(d)
    os.symlink(sys.argv[2], os.path.join(d, "predict.txt"))
PY
expect_rc 0 -- "$vexp" predict "$src/tests/cli/data/tiny_video.toml" --weights "$ckpt" --input "$video"
no_crash
expect_out "clip 0:"
[ "$(cat "$tmp/victim")" = "precious" ] || fail "predict wrote through a planted link: $(cat "$tmp/victim")"
# Its own folder is gone afterwards.
[ "$(ls "$TMPDIR" | grep -vc '^vexp_predict_[0-9]*$')" -eq 0 ] || { ls "$TMPDIR" >&2; fail "a temporary folder was left"; }
exit 0
