# A pickle of a million nested lists overflowed the stack in the recursive destructor
# of vexp's own pickle values. It is refused at the nesting limit, in one line.
source "$(dirname "$0")/../lib.sh"
$PY - <<'PY' || fail "python could not write the file"
import zipfile, torch
torch.save({"a": torch.zeros(2)}, "base.pt")
src = zipfile.ZipFile("base.pt")
n = 10**6
with zipfile.ZipFile("deep.pt", "w", zipfile.ZIP_STORED) as z:
    for m in src.namelist():
        z.writestr(m, b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"." if m.endswith("data.pkl") else src.read(m))
with open("deep_legacy.pt", "wb") as f:
    f.write(b"\x80\x02" + b"(" * n + b".")
PY
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
why="nests containers deeper than the 256 levels allowed"
expect_rc 1 -- "$vexp" export deep.pt --to out.pth
expect_out "'deep.pt' is not a readable checkpoint: pickle opcode APPEND at byte "
expect_out "$why"
no_crash
expect_rc 1 -- "$vexp" predict tiny.toml --weights deep.pt --input clip.pt
expect_out "$why"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "expected one line, got: $(cat "$tmp/out")"
no_crash
expect_rc 1 -- "$vexp" run tiny.toml --out run --resume-from deep.pt
expect_out "$why"
no_crash
expect_rc 1 -- "$vexp" predict tiny.toml --weights deep_legacy.pt --input clip.pt
expect_out "pickle opcode MARK at byte 258 of the magic number pickle opens more than the 256 MARKs allowed at once"
no_crash
echo "PASS [$name]"
