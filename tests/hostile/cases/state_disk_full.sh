# A full disk under metrics.jsonl (issue #27 item 13): the failed write is said
# once, naming the file and the reason; the run goes on and summary.json counts the
# lines lost. metrics.jsonl is a file of a full 64 KiB tmpfs bind-mounted in the run
# folder (a symbolic link would be refused: appends never follow one), so checkpoints
# (on the test's own disk) still fit and the run can finish.
source "$(dirname "$0")/../lib.sh"
mkdir full
if ! mount -t tmpfs -o size=64k tmpfs "$tmp/full" 2>/dev/null; then
  echo "SKIP: cannot mount a small tmpfs here (needs root and the right to mount)"
  exit 77
fi
cleanup() { umount "$tmp/r/metrics.jsonl" "$tmp/r2/metrics.jsonl" "$tmp/full" 2>/dev/null; }
: >full/metrics.jsonl; : >full/metrics2.jsonl
dd if=/dev/zero of=full/filler bs=4k 2>/dev/null  # until ENOSPC
mkdir r r2
: >r/metrics.jsonl; : >r2/metrics.jsonl
mount --bind "$tmp/full/metrics.jsonl" r/metrics.jsonl || { echo "SKIP: cannot bind-mount a file here"; exit 77; }
mount --bind "$tmp/full/metrics2.jsonl" r2/metrics.jsonl || { echo "SKIP: cannot bind-mount a file here"; exit 77; }
expect_rc 0 -- env VEXP_TEST_EPOCHS=1 "$vexp" run tiny.toml --out r
expect_out "cannot write 'r/metrics.jsonl': No space left on device; the run goes on"
[ "$(grep -c "cannot write 'r/metrics.jsonl'" "$tmp/out")" = 1 ] || fail "the failed write was not said exactly once: $(cat "$tmp/out")"
expect_out "could not be written"
lost=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get("metrics_lines_lost", 0))' r/summary.json)
[ "$lost" -gt 0 ] || fail "summary.json does not count the lines lost: $(cat r/summary.json)"
[ ! -s full/metrics.jsonl ] || fail "a torn line was left in metrics.jsonl: $(cat full/metrics.jsonl)"
# A run stopped while the disk is full, resumed once there is space again: the
# resumed invocation writes its lines and warns of nothing.
export VEXP_TEST_EPOCHS=2
expect_rc 0 -- "$vexp" run tiny.toml --out r2 --stop-after 1
expect_out "cannot write 'r2/metrics.jsonl': No space left on device"
umount r2/metrics.jsonl   # space again: the run folder's own file
expect_rc 0 -- "$vexp" run tiny.toml --out r2 --resume
expect_no_out "cannot write"
grep -q '"epoch":2,.*"type":"eval"' r2/metrics.jsonl || fail "no metrics written once there was space: $(cat r2/metrics.jsonl)"
no_crash
exit 0
