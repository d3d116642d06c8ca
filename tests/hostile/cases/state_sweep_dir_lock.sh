# One sweep per sweep directory (issue #27 item 11): a second `vexp sweep` on a
# directory in use is refused, naming the holder, and touches none of its trials.
source "$(dirname "$0")/../lib.sh"
cat >sweep.toml <<'TOML'
[sweep]
base = "tiny.toml"
[sweep.set]
"run.epochs" = 400
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
TOML
"$vexp" sweep sweep.toml --out sw --no-report >first.log 2>&1 & first=$!
trap 'kill "$first" 2>/dev/null; wait "$first" 2>/dev/null; rm -rf "$tmp"' EXIT
until grep -q "trial 001 started" first.log; do
  kill -0 "$first" 2>/dev/null || fail "the first sweep ended early: $(cat first.log)"
  sleep 0.2
done
# (timeout: unlocked, the second sweep would run the trials again for minutes)
expect_rc 1 -- timeout 120 "$vexp" sweep sweep.toml --out sw --no-report
expect_out "'sw' is in use by vexp sweep (pid $first on "
ls sw/trials | grep -q attempt && fail "the refused sweep moved a trial aside: $(ls sw/trials)"
# The trial's own `vexp run` holds the trial's folder.
until [ -s sw/trials/001/.vexp.lock ] && grep -q "resuming\|run '" sw/trials/001/log.txt; do
  kill -0 "$first" 2>/dev/null || fail "the first sweep ended early: $(cat first.log)"
  sleep 0.2
done
expect_rc 1 -- timeout 120 "$vexp" run tiny.toml --out sw/trials/001 --resume
expect_out "is in use by vexp run (pid "
# Readers do not need the lock.
expect_rc 0 -- "$vexp" results sw
kill -INT "$first"; wait "$first"
no_crash
exit 0
