#!/usr/bin/env bash
# The optimizer plugins from the command line: [optim] type and its own keys, the
# parameter groups by glob, exact resume with adamw. Usage: optim_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$src/tests/support/setup.sh" optim

cd "$here"
# The tiny quickstart with adamw: the shipped recipe's momentum is sgd's, unset here.
cat >"$tmp/adamw.toml" <<EOF
extends = "$here/data/tiny.toml"
unset = ["optim.momentum"]

[run]
name = "tiny_adamw"
checkpoint_every = 1

[optim]
type = "adamw"
lr = 0.003
weight_decay = 0.05
betas = [0.9, 0.99]
EOF
# The same with two parameter groups (tables at lines 9 and 14, the head's glob at 16:10).
groups_recipe() {  # groups_recipe FILE GLOB
  cat >"$1" <<EOF
extends = "$tmp/adamw.toml"

[run]
name = "tiny_groups"

[optim]
lr = 0.003

[[optim.groups]]
name = "no_decay"
match = ["*.bias", "*bn*", "*.downsample.1.*"]
weight_decay = 0.0

[[optim.groups]]
name = "head"
match = ["$2"]
lr_mult = 10.0
EOF
}

case "$name" in
plugins)
  # vexp plugins lists each optimizer with its parameters; docs/plugins.md has them.
  expect_rc 0 -- "$vexp" plugins
  for p in "optimizer sgd" "optimizer adamw" "optimizer lamb" "momentum (float, default 0.9" \
           "betas (float[], default [0.9, 0.999]" "trust_clip (bool, default false)"; do expect_out "$p"; done
  "$vexp" plugins --json >"$tmp/p.json" || fail "plugins --json failed"
  $PY - "$tmp/p.json" <<'PY' || fail "optimizers missing from plugins --json"
import json, sys
j = json.load(open(sys.argv[1]))
items = j["plugins"] if isinstance(j, dict) else j
opt = {p["name"]: p for p in items if p["kind"] == "optimizer"}
assert set(opt) == {"sgd", "adamw", "lamb"}, opt.keys()
assert [q["name"] for q in opt["sgd"]["params"]] == ["lars", "lars_eta", "momentum", "nesterov"], opt["sgd"]
PY
  grep -q '^## optimizer `adamw`' "$src/docs/plugins.md" || fail "docs/plugins.md lacks adamw"
  ;;
recipe_errors)
  # An unknown optimizer: at the recipe's type, with the closest and the known ones.
  sed 's/type = "adamw"/type = "adamv"/' "$tmp/adamw.toml" >"$tmp/unknown.toml"
  expect_rc 2 -- "$vexp" check "$tmp/unknown.toml"
  expect_out "$tmp/unknown.toml:9:1: error: unknown optimizer plugin 'adamv' (did you mean 'adamw'?); known: adamw, lamb, sgd"
  expect_rc 2 -- "$vexp" run "$tmp/unknown.toml" --out "$tmp/never"
  [ ! -e "$tmp/never" ] || fail "an invalid recipe created a run directory"
  # A key of another optimizer: at its line, naming the optimizer that takes it.
  { cat "$tmp/adamw.toml"; echo "nesterov = true"; } >"$tmp/misplaced.toml"
  expect_rc 2 -- "$vexp" check "$tmp/misplaced.toml"
  expect_out "$tmp/misplaced.toml:13:1: error: 'nesterov' in [optim] is a parameter of optimizer 'sgd', not of 'adamw' (optim.type at $tmp/misplaced.toml:9:1); 'adamw' takes betas, eps, amsgrad"
  expect_out "1 error"
  # Inherited from the base: the message says to unset it.
  { echo "extends = \"$here/data/tiny.toml\""; echo "[optim]"; echo "type = \"lamb\""; } >"$tmp/inherits.toml"
  expect_rc 2 -- "$vexp" check "$tmp/inherits.toml"
  expect_out "tsm_motion.toml"
  expect_out "error: 'momentum' in [optim] is a parameter of optimizer 'sgd', not of 'lamb'"
  expect_out "(inherited through extends: add \"optim.momentum\" to unset)"
  # --set of the type alone keeps the recipe's momentum (an error); the whole table replaces it.
  expect_rc 2 -- "$vexp" check data/tiny.toml --set optim.type=adamw
  expect_out "'momentum' in [optim] is a parameter of optimizer 'sgd', not of 'adamw'"
  expect_rc 0 -- "$vexp" check data/tiny.toml --set 'optim={ type = "adamw", lr = 0.001, weight_decay = 0.05 }' --print
  expect_out 'type = "adamw"'; expect_out "eps = 1e-08"; expect_no_out "momentum"
  # Out of range and unknown keys of the optimizer, at the value.
  expect_rc 2 -- "$vexp" check "$tmp/adamw.toml" --set 'optim.betas=[0.9, 1.0]' --set optim.amsgrd=true
  expect_out "'betas' in [optim]: element 1: must be in [0, 1), got 1.0"
  expect_out "unknown key 'amsgrd' in [optim] (did you mean 'amsgrad'?)"
  # betas takes two numbers: the optimizer says so when it is made, which check, the
  # dry run and run do when they open the recipe: at [optim], before any run folder.
  for cmd in check "run --dry-run" "run --out $tmp/b"; do
    expect_rc 2 -- "$vexp" $cmd "$tmp/adamw.toml" --set 'optim.betas=[0.9]'
    expect_out "$tmp/adamw.toml:8:1: error: optimizer 'adamw' (from optimizers.so): 'betas' in [optim] ($tmp/adamw.toml:8:1): expected two numbers [beta1, beta2], got 1"
    no_crash
  done
  [ ! -e "$tmp/b" ] || fail "a recipe the optimizer refuses created a run directory"
  ;;
groups)
  # Groups by glob: check is ok, info and --dry-run print the groups and their counts.
  groups_recipe "$tmp/g.toml" "head.*"
  expect_rc 0 -- "$vexp" check "$tmp/g.toml"
  expect_rc 0 -- "$vexp" info "$tmp/g.toml"
  expect_out "optimizer          adamw, 3 parameter groups"
  expect_out "no_decay  optim.groups[0] at $tmp/g.toml:9:1"
  $PY - "$tmp/out" <<'PY' || fail "bad group table"
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s+(no_decay|head|decay)\s+(optim\.groups\[\d\] at \S+|default rule: [^0-9]+?)\s+(\d+)\s+([\d,]+)\s+(\S+)\s+(\S+)$", line)
    if m:
        rows[m.group(1)] = (int(m.group(3)), m.group(5), m.group(6))
# ResNet-18 of the quickstart: 20 BatchNorms (17 named bn, 3 downsample.1: 40 tensors)
# and the classifier's bias; head.fc.weight is the head's; 20 convolutions decay.
assert rows == {"no_decay": (41, "1", "0"), "head": (1, "10", "0.05"), "decay": (20, "1", "0.05")}, rows
PY
  expect_rc 0 -- "$vexp" info "$tmp/g.toml" --param-groups
  expect_out "  head  head.fc.weight [4, 64]"
  expect_out "  no_decay  head.fc.bias [4]"
  expect_rc 0 -- "$vexp" info "$tmp/g.toml" --json
  $PY - "$tmp/out" <<'PY' || fail "bad info --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["optimizer"] == "adamw"
g = {x["name"]: x for x in j["param_groups"]}
assert g["head"]["tensors"] == 1 and g["head"]["lr_mult"] == 10 and g["head"]["recipe"], g
assert g["decay"]["rule"] == "default rule: weight decay" and not g["decay"]["recipe"], g
assert sum(x["elements"] for x in j["param_groups"]) == j["params"], j
PY
  expect_rc 0 -- "$vexp" run "$tmp/g.toml" --dry-run
  expect_out "optimizer:         adamw, 3 parameter groups"
  expect_out "head      optim.groups[1] at $tmp/g.toml:14:1"
  # The default rule alone (the quickstart): decay and no_decay, as before.
  expect_rc 0 -- "$vexp" run data/tiny.toml --dry-run
  expect_out "optimizer:         sgd, 2 parameter groups"
  expect_out "no_decay  default rule: optim.no_decay_bn_bias (biases, BatchNorm)"
  # A glob that matches nothing: an error at the glob, from check, info, --dry-run
  # and run (before the run directory is made).
  groups_recipe "$tmp/bad.toml" "fc.*"
  for cmd in check info "run --dry-run" "run --out $tmp/never"; do
    # shellcheck disable=SC2086
    expect_rc 2 -- "$vexp" $cmd "$tmp/bad.toml"
    expect_out "$tmp/bad.toml:16:10"
    expect_out "optim.groups[1] ('head'): 'fc.*' matches no trainable parameter of the model; parameter names are dotted paths under the node ids, such as features.conv1.weight"
  done
  [ ! -e "$tmp/never" ] || fail "a recipe with a glob matching nothing created a run directory"
  expect_rc 2 -- "$vexp" check "$tmp/bad.toml"
  expect_out "$tmp/bad.toml:16:10: error: optim.groups[1] ('head'): 'fc.*' matches no trainable parameter"
  expect_out "$tmp/bad.toml: 1 error"
  # A glob whose every match an earlier group took: a warning, at the glob.
  groups_recipe "$tmp/shadow.toml" "*.bias"
  expect_rc 0 -- "$vexp" check "$tmp/shadow.toml"
  expect_out "$tmp/shadow.toml:16:10: warning: optim.groups[1] ('head'): '*.bias' matches only parameters that an earlier group takes"
  # It trains: the groups reach the optimizer.
  expect_rc 0 -- "$vexp" run "$tmp/g.toml" --out "$tmp/run" --set run.epochs=1
  expect_out "top-1"
  no_crash
  ;;
resume_adamw)
  # AdamW's moments and step counts are in every checkpoint: a run stopped after its
  # first epoch, and one interrupted in the middle of its second, end bit for bit as
  # the uninterrupted run (parameters, BatchNorm buffers, optimizer state, metrics).
  expect_rc 0 -- "$vexp" run "$tmp/adamw.toml" --out "$tmp/full"
  expect_out "top-1"
  expect_rc 0 -- "$vexp" run "$tmp/adamw.toml" --out "$tmp/stopped" --stop-after 1
  expect_rc 0 -- "$vexp" run "$tmp/adamw.toml" --out "$tmp/stopped" --resume
  expect_out "resuming"
  VEXP_TEST_FAULT=sigint@step=8 "$vexp" run "$tmp/adamw.toml" --out "$tmp/int" >"$tmp/out" 2>&1
  [ $? -eq 130 ] || { cat "$tmp/out"; fail "the interrupted run did not exit 130"; }
  expect_rc 0 -- "$vexp" run "$tmp/adamw.toml" --out "$tmp/int" --resume
  expect_out "resuming"
  for d in stopped int; do
    $PY - "$tmp/full" "$tmp/$d" <<'PY' || fail "the resumed adamw run ($d) differs from the uninterrupted one"
import glob, json, sys, torch
a, b = sys.argv[1], sys.argv[2]
def last(d): return torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
ca, cb = last(a), last(b)
for part in ("model", "optimizer"):
    assert set(ca[part]) == set(cb[part]) and ca[part], part
    for k in ca[part]:
        assert torch.equal(ca[part][k], cb[part][k]), (part, k)
opt = ca["optimizer"]
assert any(k.startswith("exp_avg/") for k in opt) and any(k.startswith("exp_avg_sq/") for k in opt), sorted(opt)[:4]
steps = {int(v) for k, v in opt.items() if k.startswith("step/")}
assert steps == {12}, steps   # 2 epochs of 6 steps, every parameter stepped each time
def losses(d): return [(j["global_step"], j["loss"]) for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
assert losses(a) == losses(b), (losses(a), losses(b))
sa, sb = (json.load(open(d + "/summary.json")) for d in (a, b))
assert (sa["top1"], sa["val_loss"]) == (sb["top1"], sb["val_loss"]), (sa, sb)
print(b, "== uninterrupted:", len(ca["model"]), "model and", len(opt), "optimizer tensors")
PY
  done
  # A checkpoint of an SGD run does not resume an AdamW run (another recipe).
  expect_rc 0 -- "$vexp" run data/tiny.toml --out "$tmp/sgd" --set run.epochs=1
  expect_rc 1 -- "$vexp" run "$tmp/adamw.toml" --out "$tmp/x" --resume-from "$tmp/sgd/checkpoints/epoch_0001.pt"
  expect_out "the recipe changed since the run started"
  no_crash
  ;;
*)
  fail "unknown test '$name'"
  ;;
esac
