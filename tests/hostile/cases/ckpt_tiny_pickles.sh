# A torch.save zip whose data.pkl is two opcodes on an empty stack (REDUCE, TUPLE3)
# crashed libtorch's unpickler (SIGSEGV) in export, predict --weights and
# run --resume-from. Each is now refused in one line that names the opcode and byte.
source "$(dirname "$0")/../lib.sh"
$PY - <<'PY' || fail "python could not write the files"
import zipfile, torch
torch.save({"a": torch.zeros(2)}, "base.pt")
src = zipfile.ZipFile("base.pt")
for name, pkl in [("reduce.pt", b"\x80\x02R."), ("tuple3.pt", b"\x80\x02\x87.")]:
    with zipfile.ZipFile(name, "w", zipfile.ZIP_STORED) as z:
        for n in src.namelist():
            z.writestr(n, pkl if n.endswith("data.pkl") else src.read(n))
PY
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
one_line() { [ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "expected one line, got: $(cat "$tmp/out")"; }
for f in reduce.pt tuple3.pt; do
  case $f in
    reduce.pt) why="pickle opcode REDUCE at byte 2 of 'base/data.pkl' needs 2 values on the stack, found 0" ;;
    tuple3.pt) why="pickle opcode TUPLE3 at byte 2 of 'base/data.pkl' needs 3 values on the stack, found 0" ;;
  esac
  expect_rc 1 -- "$vexp" export "$f" --to out.pth
  expect_out "'$f' is not a readable checkpoint: $why"
  one_line; no_crash
  expect_rc 1 -- "$vexp" export "$f" --to out.pth --recipe tiny.toml
  expect_out "'$f' is not a readable torch.save file: $why"
  one_line; no_crash
  [ -e out.pth ] && fail "export wrote out.pth"
  expect_rc 1 -- "$vexp" predict tiny.toml --weights "$f" --input clip.pt
  expect_out "$why"
  one_line; no_crash
  expect_rc 1 -- "$vexp" run tiny.toml --out "run_$f" --resume-from "$f"
  expect_out "'$f' is not a readable checkpoint: $why"
  no_crash
done
echo "PASS [$name]"
