# One process per run directory (issue #27 item 11): a second `vexp run --resume`
# on a directory being trained is refused, naming the holder's pid; a sweep
# directory is not a run directory and a run directory is not a sweep directory.
source "$(dirname "$0")/../lib.sh"
export VEXP_TEST_EPOCHS=400
expect_rc 0 -- "$vexp" run tiny.toml --out r --stop-after 1
"$vexp" run tiny.toml --out r --resume >first.log 2>&1 & first=$!
trap 'kill "$first" 2>/dev/null; wait "$first" 2>/dev/null; rm -rf "$tmp"' EXIT
# The first run holds the lock once it has said it resumes.
until grep -q "resuming" first.log; do
  kill -0 "$first" 2>/dev/null || fail "the first run ended early: $(cat first.log)"
  sleep 0.2
done
# (timeout: unlocked, the second run would train the same directory for minutes)
expect_rc 1 -- timeout 120 "$vexp" run tiny.toml --out r --resume
expect_out "'r' is in use by vexp run (pid $first on "
[ "$(grep -c . "$tmp/out")" = 1 ] || fail "more than one line: $(cat "$tmp/out")"
expect_rc 1 -- timeout 120 "$vexp" run tiny.toml --out r
expect_out "pid $first"
# Readers do not need the lock.
expect_rc 0 -- "$vexp" report r --out r.html
# A sweep onto a run directory: refused before anything is written there.
one_trial_sweep sweep.toml run_dir_lock
expect_rc 1 -- "$vexp" sweep sweep.toml --out r --no-report
expect_out "'r' is a run directory (it holds resolved.toml), not a sweep directory"
[ ! -e r/sweep.db ] && [ ! -e r/trials ] || fail "the refused sweep wrote into the run directory"
kill -INT "$first"; wait "$first"
# Stopped, the directory is free again.
expect_rc 0 -- "$vexp" run tiny.toml --out r --resume --stop-after 1
# A run onto a sweep directory.
mkdir sw && : >sw/sweep.db
expect_rc 1 -- "$vexp" run tiny.toml --out sw
expect_out "'sw' is a sweep directory (it holds sweep.db), not a run directory"
[ ! -e sw/resolved.toml ] || fail "the refused run wrote into the sweep directory"
no_crash
exit 0
