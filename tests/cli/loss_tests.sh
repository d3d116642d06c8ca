#!/usr/bin/env bash
# Loss plugins ([loss]) and batch transforms ([[data.batch_transforms]]) through the
# CLI. Usage: loss_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" loss
cd "$here"

tiny=$here/data/tiny.toml
# recipe FILE LINES...: a recipe extending data/tiny.toml with the given lines.
recipe() {
  local f=$1; shift
  { printf 'extends = "%s"\n' "$tiny"; printf '%s\n' "$@"; } >"$f"
}
# line_of FILE TEXT: the first line number of TEXT in FILE.
line_of() { grep -nF -- "$2" "$1" | head -1 | cut -d: -f1; }
# checkpoints_equal A B: whether the last checkpoints of two run folders hold the same
# tensors, bit for bit (model, optimizer), and the runs logged the same losses.
checkpoints_equal() {
  $PY - "$1" "$2" <<'PY'
import glob, json, sys, torch
a, b = sys.argv[1], sys.argv[2]
def last(d): return torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
ca, cb = last(a), last(b)
n = 0
for part in ("model", "optimizer"):
    assert set(ca[part]) == set(cb[part]) and ca[part], part
    for k, u in ca[part].items():
        v = cb[part][k]
        pairs = [(u[j], v[j]) for j in u] if isinstance(u, dict) else [(u, v)]
        for x, y in pairs:
            if isinstance(x, torch.Tensor):
                assert torch.equal(x, y), (part, k)
                n += 1
def losses(d):
    return [(j["global_step"], j["loss"]) for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
assert losses(a) == losses(b) and losses(a), (losses(a), losses(b))
print(n, "tensors and", len(losses(a)), "logged losses identical")
PY
}
same_checkpoint() { checkpoints_equal "$1" "$2" || fail "runs $1 and $2 differ"; }

case "$name" in
plugins)
  # vexp plugins lists every loss and batch transform with its parameters.
  expect_rc 0 -- "$vexp" plugins
  for p in "loss cross_entropy" "loss label_smoothing" "loss soft_target_cross_entropy" \
           "batch_transform mixup" "batch_transform cutmix" "batch_transform mixup_cutmix"; do expect_out "$p"; done
  expect_out "smoothing (float, default 0.1, range [0.0, 1.0))"
  expect_out "alpha (float, default 1.0, > 0.0)"
  expect_out "pairing (string, default \"reverse\", one of \"reverse\"|\"shuffle\")"
  expect_out "switch_prob (float, default 0.5, range [0.0, 1.0])"
  ;;
errors)
  # A misspelt loss, a parameter out of range, a misspelt batch transform: the recipe's
  # file:line:col, exit 2, nothing run.
  recipe "$tmp/a.toml" '[loss]' 'type = "label_smothing"'
  expect_rc 2 -- "$vexp" check "$tmp/a.toml"
  expect_out "$tmp/a.toml:$(line_of "$tmp/a.toml" 'type =')"; expect_out "label_smoothing"
  expect_rc 2 -- "$vexp" run "$tmp/a.toml" --out "$tmp/r"
  [ ! -e "$tmp/r" ] || fail "a refused run created its folder"
  recipe "$tmp/b.toml" '[loss]' 'type = "label_smoothing"' 'smoothing = 1.0'
  expect_rc 2 -- "$vexp" check "$tmp/b.toml"
  expect_out "$tmp/b.toml:$(line_of "$tmp/b.toml" 'smoothing ='):"; expect_out "smoothing"
  recipe "$tmp/c.toml" '[[data.batch_transforms]]' 'type = "mixupp"'
  expect_rc 2 -- "$vexp" check "$tmp/c.toml"
  expect_out "$tmp/c.toml:$(line_of "$tmp/c.toml" 'type ='):"; expect_out "mixup"
  recipe "$tmp/d.toml" '[[data.batch_transforms]]' 'type = "cutmix"' 'alpha = 0'
  expect_rc 2 -- "$vexp" check "$tmp/d.toml"
  expect_out "$tmp/d.toml:$(line_of "$tmp/d.toml" 'alpha'):"
  no_crash
  ;;
soft_target_refusal)
  # A loss that takes labels only (the fixture, soft_targets() false) behind a batch
  # transform: refused before training at the batch transform's entry, naming the loss's line.
  fx=$build/tests/fixtures/hard_loss
  [ -e "$fx/fixture_hard_loss.so" ] || fail "the fixture $fx/fixture_hard_loss.so is not built"
  recipe "$tmp/h.toml" '[loss]' 'type = "hard_labels_only"' '' '[[data.batch_transforms]]' 'type = "mixup"'
  at="$tmp/h.toml:$(line_of "$tmp/h.toml" '[[data.batch_transforms]]'):"
  for cmd in check "run --out $tmp/r"; do
    expect_rc 2 -- "$vexp" $cmd "$tmp/h.toml" --plugin-path "$fx"
    expect_out "$at"
    expect_out "error: batch transform 'mixup' makes soft targets [N, classes] and loss 'hard_labels_only' ($tmp/h.toml:$(line_of "$tmp/h.toml" '[loss]'):"
    expect_out "takes class labels only"
    [ "$(grep -c "error:" "$tmp/out")" = 1 ] || fail "not one error line"
    [ ! -e "$tmp/r" ] || fail "a refused run created its folder"
  done
  # The same loss without a batch transform trains; a soft-target loss with one too.
  recipe "$tmp/ok.toml" '[loss]' 'type = "hard_labels_only"'
  expect_rc 0 -- "$vexp" check "$tmp/ok.toml" --plugin-path "$fx"
  recipe "$tmp/ok2.toml" '[loss]' 'type = "soft_target_cross_entropy"' '' '[[data.batch_transforms]]' 'type = "mixup"'
  expect_rc 0 -- "$vexp" check "$tmp/ok2.toml"
  no_crash
  ;;
default_is_cross_entropy)
  # No [loss] and [loss] type = "cross_entropy" train bit for bit alike; label smoothing does not.
  recipe "$tmp/ce.toml" '[loss]' 'type = "cross_entropy"'
  recipe "$tmp/ls.toml" '[loss]' 'type = "label_smoothing"' 'smoothing = 0.1'
  expect_rc 0 -- "$vexp" run "$tiny" --out "$tmp/plain" --set run.epochs=1 --set run.log_every=1
  expect_rc 0 -- "$vexp" run "$tmp/ce.toml" --out "$tmp/ce" --set run.epochs=1 --set run.log_every=1
  same_checkpoint "$tmp/plain" "$tmp/ce"
  expect_rc 0 -- "$vexp" run "$tmp/ls.toml" --out "$tmp/ls" --set run.epochs=1 --set run.log_every=1
  ! checkpoints_equal "$tmp/plain" "$tmp/ls" 2>/dev/null || fail "label smoothing trained as cross-entropy"
  grep -q 'type = "label_smoothing"' "$tmp/ls/resolved.toml" || fail "resolved.toml lacks the loss"
  ;;
mixup_resume)
  # Mixup, cutmix and label smoothing: a run stopped after its first epoch and resumed
  # ends bit-identical to the uninterrupted one (the draws are keyed by seed, step, GPU).
  recipe "$tmp/m.toml" '[loss]' 'type = "label_smoothing"' '' \
    '[[data.batch_transforms]]' 'type = "mixup"' 'alpha = 0.4' 'prob = 0.8' '' \
    '[[data.batch_transforms]]' 'type = "cutmix"' 'pairing = "shuffle"' '' '[run]' 'log_every = 1'
  expect_rc 0 -- "$vexp" run "$tmp/m.toml" --out "$tmp/full"
  no_crash; expect_out "top-1"
  grep -q 'type = "mixup"' "$tmp/full/resolved.toml" && grep -q 'type = "cutmix"' "$tmp/full/resolved.toml" ||
    fail "resolved.toml lacks the batch transforms"
  expect_rc 0 -- "$vexp" run "$tmp/m.toml" --out "$tmp/part" --stop-after 1
  expect_rc 0 -- "$vexp" run "$tmp/m.toml" --out "$tmp/part" --resume
  expect_out "resuming"
  same_checkpoint "$tmp/full" "$tmp/part"
  # The mixing changes training: not the run without it.
  recipe "$tmp/nomix.toml" '[loss]' 'type = "label_smoothing"' '' '[run]' 'log_every = 1'
  expect_rc 0 -- "$vexp" run "$tmp/nomix.toml" --out "$tmp/nomix"
  ! checkpoints_equal "$tmp/full" "$tmp/nomix" 2>/dev/null || fail "the batch transforms changed nothing"
  # vexp bench train times the same step, mixing included.
  expect_rc 0 -- "$vexp" bench train "$tmp/m.toml" --steps 2 --warmup 1
  no_crash; expect_out "clips/s"
  ;;
*)
  fail "unknown test"
  ;;
esac
exit 0
