# Ctrl-C (SIGINT) on `vexp run` mid-epoch: the step finishes, a checkpoint is written,
# exit 130 with the exact command that continues; that command ends where an
# uninterrupted run ends (losses to 1e-5). A second signal exits at once; SIGTERM
# behaves as SIGINT.
source "$(dirname "$0")/../lib.sh"
S=(--set run.epochs=2 --set run.log_every=1 --set data.params.train_clips=96)  # 12 steps per epoch
# wait_step FILE N PID: until metrics FILE logs global step N (or the process ended)
wait_step() {
  for _ in $(seq 1 2400); do
    grep -q "\"global_step\":$2," "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
expect_rc 0 -- "$vexp" run tiny.toml "${S[@]}" --out "$tmp/full"

"$vexp" run tiny.toml "${S[@]}" --out "$tmp/int" >"$tmp/out" 2>&1 &
pid=$!
wait_step "$tmp/int/metrics.jsonl" 3 $pid || { cat "$tmp/out"; fail "the run did not reach step 3"; }
kill -INT $pid
wait $pid; rc=$?
[ "$rc" -eq 130 ] || { cat "$tmp/out"; fail "interrupted run exited $rc, expected 130"; }
no_crash
expect_out "vexp: interrupted: stopping after the current step and writing a checkpoint"
expect_out "checkpoint written: $tmp/int/checkpoints/epoch_"
grep -q "^vexp: to continue: .* --out $tmp/int --resume\$" "$tmp/out" || { cat "$tmp/out"; fail "no resume command"; }
ckpt=$(ls "$tmp/int/checkpoints/"epoch_*_step_*.pt 2>/dev/null | head -1)
[ -n "$ckpt" ] || fail "no mid-epoch checkpoint"
$PY -c "import torch,sys,json; c=torch.load(sys.argv[1]); m=json.loads(c['meta']); assert m['epoch_step'] > 0, m" "$ckpt" \
  || fail "the checkpoint does not load in Python or records no step"
[ ! -e "$tmp/int/summary.json" ] || fail "an interrupted run wrote a summary"
# The printed command continues the run.
resume=$(sed -n 's/^vexp: to continue: //p' "$tmp/out")
eval "$resume" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "'$resume' failed"; }
expect_out "resuming"; expect_out "top-1"
$PY - "$tmp/full" "$tmp/int" <<'PY' || fail "the resumed run differs from the uninterrupted one"
import json, sys
def lines(d):
    return [json.loads(l) for l in open(d + "/metrics.jsonl")]
a, b = lines(sys.argv[1]), lines(sys.argv[2])
assert [(l["type"], l["global_step"]) for l in a] == [(l["type"], l["global_step"]) for l in b], (a, b)
for x, y in zip(a, b):
    k = "loss" if x["type"] == "step" else "val_loss"
    assert abs(x[k] - y[k]) <= 1e-5, (x, y)
sa, sb = (json.load(open(d + "/summary.json")) for d in sys.argv[1:3])
for k in ("top1", "top5", "steps", "epochs"):
    assert sa[k] == sb[k], (k, sa[k], sb[k])
assert abs(sa["val_loss"] - sb["val_loss"]) <= 1e-5
assert sb["wall_s"] >= sb["train_s"], sb
PY

# A second signal exits at once; SIGTERM is Ctrl-C's twin.
"$vexp" run tiny.toml "${S[@]}" --out "$tmp/twice" >"$tmp/out" 2>&1 &
pid=$!
wait_step "$tmp/twice/metrics.jsonl" 2 $pid || { cat "$tmp/out"; fail "the run did not reach step 2"; }
kill -TERM $pid; kill -INT $pid
wait $pid; rc=$?
[ "$rc" -eq 130 ] || { cat "$tmp/out"; fail "twice-interrupted run exited $rc, expected 130"; }
expect_out "vexp: interrupted"
no_crash
echo "PASS [$name]"
