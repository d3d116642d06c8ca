#!/usr/bin/env bash
# End-to-end tests of vexp info / predict / export and `pretrained` nodes.
# Usage: models_tests.sh NAME VEXP SOURCE_DIR BUILD_DIR
name=$1 vexp=$2 src=$3 build=$4
here=$(cd "$(dirname "$0")" && pwd)
CHECK_CRASH_EVERY_RUN=1  # every run here is also checked for crashes
source "$src/tests/support/setup.sh" models
quick=$src/recipes/quickstart/tsm_motion.toml
k400=$src/recipes/kinetics400

case "$name" in
info)
  expect_rc 0 -- "$vexp" info "$quick"
  expect_out "parameters"; expect_out "MACs per clip"; expect_out "activation memory"; expect_out "gradient bytes"
  # The count as every report writes it (base::count_text), not "0.07 GMACs" for a small model.
  grep -qE "^MACs per clip +[0-9,]+ \([0-9.]+ [kMGT]?, mmcv convention\)$" "$tmp/out" || { cat "$tmp/out"; fail "MACs line"; }
  expect_no_out "GMACs"
  expect_rc 0 -- "$vexp" info "$quick" --json
  for k in '"params"' '"flops_per_clip"' '"frames": 8' '"grad_bytes"'; do expect_out "$k"; done
  # TSN is TSM without the shift: same parameters and MACs (the shift has neither).
  p1=$("$vexp" info "$quick" --json | $PY -c 'import json,sys; j=json.load(sys.stdin); print(j["params"], j["flops_per_clip"])')
  p2=$("$vexp" info "$src/recipes/quickstart/tsn_motion.toml" --json | $PY -c 'import json,sys; j=json.load(sys.stdin); print(j["params"], j["flops_per_clip"])')
  [ "$p1" = "$p2" ] || fail "TSM and TSN differ: $p1 vs $p2"
  # The Kinetics recipe's figures come from the kinetics plugin's facts even
  # without the data on this machine (a warning says vexp run would refuse).
  expect_rc 0 -- "$vexp" info "$k400/tsm_r50_8f.toml" --json
  expect_out '"params": 24327632'; expect_out '"flops_per_clip": 32965562368'
  expect_out "vexp run will refuse to start"
  expect_rc 2 -- "$vexp" info "$quick" --input 8x3x224
  expect_out "expected four sizes"
  expect_rc 2 -- "$vexp" info "$quick" --input 8xAx2x2
  ;;
predict_errors)
  $PY - "$tmp" <<'PYEOF'
import sys, torch
d = sys.argv[1]
torch.save(torch.randn(2, 4, 1, 16, 16), d + "/x.pt")
torch.save(torch.randn(3, 3), d + "/bad_rank.pt")
torch.save({"features.conv1.weight": torch.randn(3, 3)}, d + "/bad_shape.pth")
open(d + "/garbage.pth", "w").write("not a checkpoint")
PYEOF
  expect_rc 1 -- "$vexp" predict "$quick" --weights "$tmp/nothere.pth" --input "$tmp/x.pt"
  expect_out "nothere.pth"
  expect_rc 1 -- "$vexp" predict "$quick" --weights "$tmp/garbage.pth" --input "$tmp/x.pt"
  expect_out "garbage.pth"
  expect_rc 1 -- "$vexp" predict "$quick" --weights "$tmp/bad_shape.pth" --input "$tmp/x.pt"
  expect_out "has shape [3, 3] but the model's 'features.conv1.weight' has shape"
  expect_rc 1 -- "$vexp" predict "$quick" --weights "$tmp/bad_shape.pth" --input "$tmp/bad_rank.pt"
  expect_out "bad_rank.pt"
  expect_rc 2 -- "$vexp" predict "$quick" --weights "$tmp/bad_shape.pth" --input "$tmp/x.pt" --logits "$tmp/out.txt"
  expect_rc 1 -- "$vexp" predict "$quick" --weights "$tmp/bad_shape.pth" --input "$tmp/garbage.pth"
  ;;
pretrained)
  # A run's export feeds `pretrained` of a new recipe; a missing file is a recipe error.
  expect_rc 0 -- "$vexp" run "$here/data/tiny.toml" --out "$tmp/run" --set run.epochs=1
  expect_rc 0 -- "$vexp" export "$tmp/run" --to "$tmp/tv.pth"
  expect_out "torchvision names"
  cat "$src/recipes/quickstart/tsm_motion.toml" | sed -e 's|^stem = "cifar"|stem = "cifar"\npretrained = "tv.pth"|' \
    -e 's|^epochs = 4|epochs = 1|' -e 's|^train_clips = 4000|train_clips = 48|' -e 's|^val_clips = 800|val_clips = 16|' \
    -e 's|^size = 32|size = 16|' -e 's|^classes = 8|classes = 4|' -e 's|^frames = 8|frames = 4|' > "$tmp/withpre.toml"
  expect_rc 0 -- "$vexp" run "$tmp/withpre.toml" --out "$tmp/run2" --set dist.batch_per_gpu=8 --set run.threads=1
  expect_out "node 'features': loaded"
  sed -e 's|pretrained = "tv.pth"|pretrained = "missing.pth"|' "$tmp/withpre.toml" > "$tmp/missing.toml"
  expect_rc 2 -- "$vexp" check "$tmp/missing.toml"
  expect_out "missing.toml:"
  expect_out "no such file"
  expect_rc 1 -- "$vexp" export "$tmp/nothing" --to "$tmp/x.pth"
  ;;
*) fail "unknown test" ;;
esac
echo "PASS [$name]"
