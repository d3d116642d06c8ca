#!/usr/bin/env bash
# Training hooks through the CLI ([[hooks]], the ema hook): its metrics, TensorBoard
# scalars, weights files that `vexp predict` loads, summary and provenance; resume
# equal to the uninterrupted run; the recipe's refusals at file:line:col.
# Usage: hooks_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" hooks

cd "$here"
# recipe FILE TEXT: data/tiny.toml (the quickstart in seconds) and TEXT after it.
recipe() { printf 'extends = "%s"\n%s' "$here/data/tiny.toml" "$2" > "$1"; }
EMA='[[hooks]]
type = "ema"
decay = 0.9
warmup = true
'
case "$name" in
ema_run)
  expect_rc 0 -- "$vexp" plugins
  expect_out "hook ema"; expect_out "decay (float, default 0.9998"; expect_out "buffers (string, default \"average\""
  recipe "$tmp/ema.toml" "$EMA"
  expect_rc 0 -- "$vexp" check "$tmp/ema.toml" --print
  expect_out "[[hooks]]"; expect_out 'type = "ema"'; expect_out "every = 1"   # defaults filled in
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/run"
  no_crash; expect_out "ema_top1"
  for f in epoch_0001.pt epoch_0001.ema.pt epoch_0002.pt epoch_0002.ema.pt; do
    [ -f "$tmp/run/checkpoints/$f" ] || fail "no checkpoints/$f"
  done
  $PY - "$tmp/run" <<'PY' || fail "bad ema records, summary or provenance"
import glob, hashlib, json, os, sys, torch
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/metrics.jsonl")]
evals = [r for r in recs if r["type"] == "eval"]
assert len(evals) == 2 and all({"ema_top1", "ema_top5", "ema_loss"} <= set(r) for r in evals), evals
assert not any("ema_top1" in r for r in recs if r["type"] == "step")
s = json.load(open(d + "/summary.json"))
assert s["ema_top1"] == evals[-1]["ema_top1"] and s["ema_loss"] == evals[-1]["ema_loss"], s
assert s["hook_weights"] == {"ema": "checkpoints/epoch_0002.ema.pt"}, s
p = [json.loads(l) for l in open(d + "/provenance.jsonl")][-1]
f = os.path.join(d, "checkpoints/epoch_0002.ema.pt")
assert p["weights"]["ema"]["path"] == os.path.abspath(f), p["weights"]
assert p["weights"]["ema"]["sha256"] == hashlib.sha256(open(f, "rb").read()).hexdigest()
# A plain torch.load gives a state dict of the model's tensors; the checkpoint keeps the same
# averages as the hook's state.
sd = torch.load(f, weights_only=True)
c = torch.load(d + "/checkpoints/epoch_0002.pt", weights_only=True)
assert list(sd) and set(sd) == set(c["model"]), set(sd) ^ set(c["model"])
assert all(torch.equal(sd[k], c["hooks"]["0.ema/" + k]) for k in sd)
assert any(not torch.equal(sd[k], c["model"][k]) for k in sd if sd[k].is_floating_point())
print("ema top-1", s["ema_top1"], "trained top-1", s["top1"])
PY
  # TensorBoard: the hook's metrics as val/ scalars.
  $PY tfevents_check.py "$tmp/run"/events.out.tfevents.* val/ema_top1 val/ema_top5 val/ema_loss val/top1 >/dev/null ||
    fail "no val/ema_* TensorBoard scalars"
  # vexp predict loads the averaged weights (all of them: it checks), and they predict otherwise.
  expect_rc 0 -- "$vexp" data make-synthetic --out "$tmp/motion" --classes 4 --size 16 --train-clips 8 --val-clips 8
  video="$tmp/motion/$(head -1 "$tmp/motion/val_list.txt" | cut -d' ' -f1)"
  expect_rc 0 -- "$vexp" predict "$tmp/ema.toml" --weights "$tmp/run/checkpoints/epoch_0002.ema.pt" --input "$video" \
    --logits "$tmp/ema.json"
  expect_out "clip 0:"
  expect_rc 0 -- "$vexp" predict "$tmp/ema.toml" --weights "$tmp/run/checkpoints/epoch_0002.pt" --input "$video" \
    --logits "$tmp/trained.json"
  $PY - "$tmp/ema.json" "$tmp/trained.json" <<'PY' || fail "the averaged weights predict as the trained ones"
import json, sys
a, b = (json.load(open(f))["logits"][0] for f in sys.argv[1:3])
assert max(abs(x - y) for x, y in zip(a, b)) > 1e-6, (a, b)
PY
  # vexp export converts them to another project's names, as the trained weights.
  expect_rc 0 -- "$vexp" export "$tmp/run/checkpoints/epoch_0002.ema.pt" --recipe "$tmp/ema.toml" --to "$tmp/ema_tsm.pth" \
    --naming tsm
  expect_out "wrote 122 tensors (tsm names"
  # keep_checkpoints: a checkpoint's side file goes with it.
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/keep" --set run.keep_checkpoints=1
  [ ! -e "$tmp/keep/checkpoints/epoch_0001.ema.pt" ] && [ -f "$tmp/keep/checkpoints/epoch_0002.ema.pt" ] ||
    fail "the pruned checkpoint's ema file stayed (or the kept one's went): $(ls "$tmp/keep/checkpoints")"
  # vexp compare: a column for the averaged weights' top-1 (a run without it shows "-");
  # vexp report: the ema curves beside the trained weights' ones.
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/plain"
  expect_rc 0 -- "$vexp" compare "$tmp/run" "$tmp/plain" --no-provenance
  expect_out "ema_top1"
  ema=$($PY -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["ema_top1"])' "$tmp/run/summary.json")
  grep -E "^tiny \(run\) .* $ema " "$tmp/out" >/dev/null || { cat "$tmp/out"; fail "vexp compare does not show ema_top1 $ema"; }
  grep -E "^tiny \(plain\) .* - " "$tmp/out" >/dev/null || { cat "$tmp/out"; fail "vexp compare does not show '-' for a run without it"; }
  expect_rc 0 -- "$vexp" report "$tmp/run" --out "$tmp/report.html"
  grep -q '"name":"ema_top1"' "$tmp/report.html" && grep -q '"name":"ema_loss"' "$tmp/report.html" ||
    fail "the report has no ema_top1 / ema_loss series"
  ;;
ema_resume)
  # Stopped after epoch 1 and resumed, and interrupted mid-epoch (SIGINT during step 9 of 12)
  # and resumed: the same averages, ema figures and summary as the uninterrupted run.
  recipe "$tmp/ema.toml" "$EMA"
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/full" --set run.epochs=3
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/stop" --set run.epochs=3 --stop-after 1
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/stop" --set run.epochs=3 --resume
  expect_out "resuming"
  VEXP_TEST_FAULT=sigint@step=9 expect_rc 130 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/int" --set run.epochs=3
  [ -f "$tmp/int/checkpoints/epoch_0001_step_000003.ema.pt" ] || fail "no ema weights beside the interruption's checkpoint"
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/int" --set run.epochs=3 --resume
  expect_out "resuming"
  $PY - "$tmp/full" "$tmp/stop" "$tmp/int" <<'PY' || fail "a resumed run's ema differs from the uninterrupted one"
import json, sys, torch
full = sys.argv[1]
def evals(d):
    return [(r["global_step"], r["top1"], r["val_loss"], r["ema_top1"], r["ema_loss"])
            for r in map(json.loads, open(d + "/metrics.jsonl")) if r["type"] == "eval"]
for d in sys.argv[2:]:
    assert evals(d) == evals(full), (d, evals(d), evals(full))
    for f in ("epoch_0003.ema.pt", "epoch_0003.pt"):
        a, b = (torch.load(f"{x}/checkpoints/{f}", weights_only=True) for x in (full, d))
        if "model" in a: a, b = a["model"], b["model"]
        assert all(torch.equal(a[k], b[k]) for k in a), (d, f)
    s, s0 = (json.load(open(x + "/summary.json")) for x in (d, full))
    assert (s["ema_top1"], s["ema_loss"], s["top1"]) == (s0["ema_top1"], s0["ema_loss"], s0["top1"]), (s, s0)
print("resumed runs equal the uninterrupted one:", evals(full)[-1])
PY
  ;;
refused)
  # The recipe's [[hooks]] are checked with the recipe, at file:line:col, by vexp check and vexp run.
  recipe "$tmp/decay.toml" '[[hooks]]
type = "ema"
decay = 1.5
'
  expect_rc 2 -- "$vexp" check "$tmp/decay.toml"
  expect_out "$tmp/decay.toml:4:1: error: 'decay' in hooks[0] (hook 'ema'): must be in [0, 1), got 1.5"
  expect_rc 2 -- "$vexp" run "$tmp/decay.toml" --out "$tmp/r"
  expect_out "$tmp/decay.toml:4:1: error: 'decay' in hooks[0] (hook 'ema'): must be in [0, 1), got 1.5"
  [ ! -e "$tmp/r" ] || fail "a refused run created its directory"
  recipe "$tmp/unknown.toml" '[[hooks]]
type = "emaa"
'
  expect_rc 2 -- "$vexp" run "$tmp/unknown.toml" --out "$tmp/r"
  expect_out "$tmp/unknown.toml:3:1: error: unknown hook plugin 'emaa' (did you mean 'ema'?); known: ema"
  recipe "$tmp/key.toml" '[[hooks]]
type = "ema"
decai = 0.9
'
  expect_rc 2 -- "$vexp" check "$tmp/key.toml"
  expect_out "$tmp/key.toml:4:1: error: unknown key 'decai' in hooks[0] (hook 'ema') (did you mean 'decay'?)"
  recipe "$tmp/name.toml" '[[hooks]]
type = "ema"
name = "my ema"
'
  expect_rc 2 -- "$vexp" check "$tmp/name.toml"
  expect_out "$tmp/name.toml:4:1: error: hooks[0] (hook 'ema'): name = \"my ema\" must be letters, digits and '_'"
  recipe "$tmp/twice.toml" "$EMA$EMA"
  expect_rc 2 -- "$vexp" run "$tmp/twice.toml" --out "$tmp/r"
  expect_out "$tmp/twice.toml:6:1: error: hooks[1] (hook 'ema'): name = \"ema\" is hooks[0]'s already"
  [ ! -e "$tmp/r" ] || fail "a refused run created its directory"
  # Two averages under two names train side by side.
  recipe "$tmp/two.toml" "$EMA"'[[hooks]]
type = "ema"
name = "ema_slow"
decay = 0.99
'
  expect_rc 0 -- "$vexp" run "$tmp/two.toml" --out "$tmp/two" --set run.epochs=1
  expect_out "ema_slow_top1"
  [ -f "$tmp/two/checkpoints/epoch_0001.ema_slow.pt" ] && [ -f "$tmp/two/checkpoints/epoch_0001.ema.pt" ] ||
    fail "not both averages beside the checkpoint"
  # [[hooks]] must be tables with a type.
  recipe "$tmp/notable.toml" 'hooks = ["ema"]
'
  expect_rc 2 -- "$vexp" check "$tmp/notable.toml"
  expect_out "$tmp/notable.toml:2:10: error: hooks[0] must be a table { type = \"<hook plugin>\", ... }, got string \"ema\""
  no_crash
  ;;
*)
  fail "unknown test"
  ;;
esac
exit 0
