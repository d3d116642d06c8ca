# The run folder's lock file planted as a hard link (issue #36 item 3): `.vexp.lock`
# is opened with O_NOFOLLOW, so a symbolic link was refused, but a hard link to the
# run's newest checkpoint, or to a file outside the folder, was opened and truncated
# to write the holder's description: the checkpoint and the victim were destroyed.
# Now the lock file must be a regular file of one name owned by the user; anything
# else is refused in one line and no byte of the linked file changes.
source "$(dirname "$0")/../lib.sh"
export VEXP_TEST_EPOCHS=2
"$vexp" run tiny.toml --out run --stop-after 1 >/dev/null 2>&1 || fail "the tiny run failed"
ck=run/checkpoints/epoch_0001.pt
[ -f "$ck" ] || fail "no checkpoint $ck"
sum() { md5sum "$1" | cut -d' ' -f1; }
before=$(sum "$ck")
rm -f run/.vexp.lock
ln "$ck" run/.vexp.lock
expect_rc 1 -- "$vexp" run tiny.toml --out run --resume
expect_out "its lock file 'run/.vexp.lock' is refused: it has 2 names (a hard link to another file)"
[ "$(grep -c . "$tmp/out")" = 1 ] || fail "more than one line: $(cat "$tmp/out")"
[ "$(sum "$ck")" = "$before" ] || fail "the lock truncated the run's checkpoint"
# A victim outside the folder, through a sweep directory's lock.
printf 'export PATH=/usr/bin\n' >bashrc
mkdir sw && ln bashrc sw/.vexp.lock
cat >sw.toml <<TOML
[sweep]
base = "$tmp/tiny.toml"
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
TOML
expect_rc 1 -- "$vexp" sweep sw.toml --out sw --no-report
expect_out "is refused: it has 2 names"
[ "$(cat bashrc)" = "export PATH=/usr/bin" ] || fail "the sweep's lock rewrote a file outside its folder"
# A lock file that is a FIFO is refused without blocking.
rm run/.vexp.lock && mkfifo run/.vexp.lock
expect_rc 1 -- timeout 60 "$vexp" run tiny.toml --out run --resume
expect_out "it is a FIFO, not a regular file"
# Once the planted file is gone the run goes on.
rm run/.vexp.lock
expect_rc 0 -- "$vexp" run tiny.toml --out run --resume
[ -f run/summary.json ] || fail "the resumed run did not finish"
no_crash
exit 0
