# run.threads of 256 or 1024, inside the documented range, on a machine with a few
# cores (issue #36 item 5): libtorch started that many threads per parallel region
# and the first step never ended on 2 cores, deaf to SIGTERM (the signal only asked
# for a stop after that step). Now the threads are at most the cores this process may
# run on (its CPU affinity), with one warning; and a stop signal before the training
# loop begins (opening the data, the thread pools, the model) ends the process at
# once with exit 130, as there is nothing new to save.
source "$(dirname "$0")/../lib.sh"
taskset -c 0 true 2>/dev/null || { echo "SKIP: taskset cannot bind to CPU 0 here"; exit 77; }
# One core (taskset): 1024 threads asked for, one used.
expect_rc 0 -- timeout 120 taskset -c 0 "$vexp" run tiny.toml --set run.threads=1024 --set run.epochs=1 --out r
expect_out "tiny.toml: [run] threads: 1024 threads asked for, more than the 1 core(s) this process may run on; using 1"
[ "$(grep -c "threads asked for" "$tmp/out")" = 1 ] || fail "not one warning: $(cat "$tmp/out")"
$PY -c "import json,sys; t=json.load(open(sys.argv[1]))['threads']; sys.exit(t != 1)" r/summary.json \
  || fail "summary.json does not record the 1 thread used: $(cat r/summary.json)"
# 0 means every core this process may run on.
expect_rc 0 -- timeout 120 taskset -c 0 "$vexp" run tiny.toml --set run.threads=0 --set run.epochs=1 --out r0
expect_no_out "threads asked for"
$PY -c "import json,sys; t=json.load(open(sys.argv[1]))['threads']; sys.exit(t != 1)" r0/summary.json \
  || fail "run.threads = 0 under taskset -c 0 did not use 1 thread: $(cat r0/summary.json)"
# SIGTERM while starting (a start made 10 minutes long by a test-only fault): exit 130 at once.
VEXP_TEST_FAULT=slow_start@ms=600000 "$vexp" run tiny.toml --out s >"$tmp/out" 2>&1 &
pid=$!
cleanup() { kill -KILL "$pid" 2>/dev/null; }
for _ in $(seq 1 1200); do
  grep -q "info run '" "$tmp/out" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
grep -q "info run '" "$tmp/out" || { cat "$tmp/out"; fail "the run did not get to its start"; }
start=$SECONDS
kill -TERM "$pid"
for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "SIGTERM while starting did not end the run within 30 s"
wait "$pid"; rc=$?
[ "$rc" -eq 130 ] || { cat "$tmp/out"; fail "SIGTERM while starting: exit $rc, expected 130"; }
echo "ended $((SECONDS - start)) s after SIGTERM"
expect_out "vexp: interrupted while starting, before the first step: exiting at once (nothing new to save)"
no_crash
exit 0
