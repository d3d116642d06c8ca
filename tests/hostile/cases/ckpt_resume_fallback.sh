# --resume when the newest checkpoint is a hostile pickle (it crashed libtorch's
# unpickler, and so never fell back): one warning naming the reason, the file kept
# aside, the run continued from the newest older checkpoint that loads. When none
# loads: one error, nothing started.
source "$(dirname "$0")/../lib.sh"
expect_rc 0 -- "$vexp" run tiny.toml --out run --set run.epochs=3 --stop-after 2
$PY - <<'PY' || fail "python could not write the file"
import zipfile, shutil
src = zipfile.ZipFile("run/checkpoints/epoch_0002.pt")
with zipfile.ZipFile("evil.pt", "w", zipfile.ZIP_STORED) as z:
    for n in src.namelist():
        z.writestr(n, b"\x80\x02\x87." if n.endswith("data.pkl") else src.read(n))
PY
prefix=$($PY -c 'import zipfile; print(zipfile.ZipFile("evil.pt").namelist()[0].split("/")[0])')
cp evil.pt run/checkpoints/epoch_0002.pt
expect_rc 0 -- "$vexp" run tiny.toml --out run --set run.epochs=3 --resume
no_crash
expect_out "checkpoint 'run/checkpoints/epoch_0002.pt' does not load ('run/checkpoints/epoch_0002.pt' is not a readable checkpoint: pickle opcode TUPLE3 at byte 2 of '$prefix/data.pkl' needs 3 values on the stack, found 0)"
expect_out "kept as 'run/checkpoints/epoch_0002.pt.corrupt'"
expect_out "resuming 'run' from epoch_0001.pt"
[ "$(grep -c 'does not load' "$tmp/out")" -eq 1 ] || fail "expected one warning"
grep -q '"epochs": 3' run/summary.json || fail "the run did not finish"
cmp -s evil.pt run/checkpoints/epoch_0002.pt.corrupt || fail "the hostile checkpoint was not kept as it was"
# every checkpoint hostile: refused, nothing trained
expect_rc 0 -- "$vexp" run tiny.toml --out run2 --set run.epochs=3 --stop-after 1
cp evil.pt run2/checkpoints/epoch_0001.pt
printf '\x80\x02R.' >run2/checkpoints/epoch_0000_step_000003.pt
expect_rc 1 -- "$vexp" run tiny.toml --out run2 --set run.epochs=3 --resume
expect_out "cannot resume 'run2': none of its 2 checkpoint(s) loads"
no_crash
echo "PASS [$name]"
