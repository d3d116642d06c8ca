# Six 100-value axes (10^12 trials) and [sweep.random] count = 10^9 were expanded in
# memory before anything was checked (killed at 24 GB; std::bad_alloc under a memory
# limit). The trials are now counted first, overflow-safe: one line naming the file
# and the count, under a 1 GB address-space limit and within seconds.
source "$(dirname "$0")/../lib.sh"
$PY - <<'PYEOF'
vals = ",".join(str(i + 1) for i in range(100))
s = '[sweep]\nbase = "tiny.toml"\n'
for k in ["run.seed", "data.params.train_clips", "data.params.val_clips", "run.log_every", "run.eval_every",
          "optim.momentum"]:
    s += '[[sweep.axis]]\nkey = "%s"\ngrid = [%s]\n' % (k, vals)
open("big.toml", "w").write(s)
# 100^10 = 10^20: the product overflows 64 bits.
s = '[sweep]\nbase = "tiny.toml"\n'
for i in range(10):
    s += '[[sweep.axis]]\nkey = "data.params.k%d"\ngrid = [%s]\n' % (i, vals)
open("huge.toml", "w").write(s)
open("rand.toml", "w").write('[sweep]\nbase = "tiny.toml"\n[sweep.random]\ncount = 1000000000\n'
                             '[[sweep.axis]]\nkey = "optim.lr"\nrandom = {min = 0.01, max = 0.1}\n')
PYEOF
run_limited() { (limit_memory 3000000; timeout 60 "$@"); }
expect_rc 2 -- run_limited "$vexp" sweep --dry-run big.toml
expect_out "big.toml: 1000000000000 trials"
expect_out "a sweep may have at most 100000"
[ "$(grep -c . "$tmp/out")" -eq 1 ] || fail "more than one line"
expect_rc 2 -- run_limited "$vexp" sweep --dry-run huge.toml
expect_out "huge.toml: more than 2^63 trials"
expect_rc 2 -- run_limited "$vexp" sweep --dry-run rand.toml
expect_out "rand.toml: 1000000000 trials"
expect_rc 2 -- run_limited "$vexp" sweep rand.toml
expect_out "rand.toml: 1000000000 trials"
[ ! -e runs ] || fail "a refused sweep wrote runs/"
no_crash
exit 0
