# A PyTorch state dict (torch.save, what torchvision's model.state_dict() gives)
# where a vexp checkpoint is expected: said to be a state dict, with what to do
# with it, instead of "truncated or corrupt?".
source "$(dirname "$0")/../lib.sh"
$PY -c '
import torch
m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4))
torch.save(m.state_dict(), "w.pth")                                           # zip format
torch.save(m.state_dict(), "legacy.pth", _use_new_zipfile_serialization=False) # legacy format
' || fail "python could not write the state dicts"
# vexp export of a state dict: without a recipe the file is named for what it is; with
# one it is converted, and a state dict of another model says so in one line
for f in w.pth legacy.pth; do
  expect_rc 1 -- "$vexp" export "$f" --to out.pth
  expect_out "'$f' is a torch.save state dict (7 tensors, e.g. '0.weight'), not a vexp checkpoint"
  expect_out "--weights $f"
  expect_out "pretrained = \"$f\""
  expect_out "give the model's --recipe"
  expect_no_out "truncated or corrupt"
  [ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "expected one line, got: $(cat "$tmp/out")"
  [ -e out.pth ] && fail "export wrote out.pth"
  expect_rc 1 -- "$vexp" export "$f" --to out.pth --recipe tiny.toml
  expect_out "'$f' holds none of the model's tensors: its 7 tensors (e.g. '0.weight') match no name of the model"
  [ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "expected one line, got: $(cat "$tmp/out")"
  [ -e out.pth ] && fail "export wrote out.pth"
done
# --resume of a run whose checkpoint is a state dict
mkdir -p run/checkpoints
cp w.pth run/checkpoints/epoch_0001.pt
expect_rc 1 -- "$vexp" run tiny.toml --out run --resume
expect_out "epoch_0001.pt' is a torch.save state dict"
expect_no_out "truncated or corrupt"
# a truncated vexp checkpoint says where it is cut; an empty one is empty
VEXP_TEST_EPOCHS=1 "$vexp" run tiny.toml --out good >/dev/null 2>&1 || fail "the tiny run failed"
head -c 300 good/checkpoints/epoch_0001.pt >cut.pt
expect_rc 1 -- "$vexp" export cut.pt --to out.pth --recipe tiny.toml
expect_out "'cut.pt' is not a readable torch.save file: it has no zip end-of-directory record (truncated, or not a zip archive?)"
expect_rc 1 -- "$vexp" export cut.pt --to out.pth
expect_out "'cut.pt' is not a readable checkpoint: it has no zip end-of-directory record (truncated, or not a zip archive?)"
: >empty.pt
expect_rc 1 -- "$vexp" export empty.pt --to out.pth --recipe tiny.toml
expect_out "'empty.pt' is empty"
no_crash
