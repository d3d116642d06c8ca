# data.workers = 100000 passed `check` and aborted the run ("terminate called without
# an active exception"), as did `bench data --threads 2000`; run.threads = 100000 hung
# in libtorch's thread-pool creation, deaf to Ctrl-C; `bench data --clips -5` was
# accepted. Now: documented limits (workers <= 256, threads <= 1024), located errors,
# and a thread the system refuses is one line, not an abort.
source "$(dirname "$0")/../lib.sh"
expect_rc 2 -- "$vexp" check tiny.toml --set data.workers=100000
expect_out "--set data.workers=100000: error: 'workers' in [data]"
expect_out "256"
expect_rc 2 -- timeout 60 "$vexp" run tiny.toml --set run.threads=100000 --out r
expect_out "--set run.threads=100000: error: 'threads' in [run]"
expect_out "1024"
[ ! -e r ] || fail "a refused run wrote its directory"
expect_rc 0 -- "$vexp" check tiny.toml --set data.workers=256 --set run.threads=1024
expect_rc 2 -- "$vexp" bench data tiny.toml --threads 1,2000
expect_out "--threads 2000: each thread count must be 1 to 256"
expect_rc 2 -- "$vexp" bench data tiny.toml --clips -5
expect_out "--clips"
# Threads the system refuses (here: too little address space for their stacks)
# are one line naming the setting, whatever the limit that refused them.
(limit_memory 1600000; "$vexp" bench data tiny.toml --threads 256 --clips 4) >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 1 ] || { cat "$tmp/out"; fail "bench data under a memory limit exited $rc"; }
  expect_out "loader threads"
  expect_out "use fewer (data.workers)"
fi
no_crash
exit 0
