# `vexp sweep` had no --set. It applies to every trial, as if the base recipe had it,
# shows in --dry-run and in the store; a key the sweep itself sets is one clear error.
source "$(dirname "$0")/../lib.sh"
cat >s.toml <<'TOML'
[sweep]
base = "tiny.toml"
[sweep.set]
"run.eval_every" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.1, 0.2]
TOML
expect_rc 0 -- "$vexp" sweep --dry-run --set run.seed=7 s.toml
expect_out "2 trials, every recipe valid"
[ "$(grep -c -- '--set run.seed=7 --set run.eval_every=1 --set optim.lr=' "$tmp/out")" -eq 2 ] ||
  { cat "$tmp/out"; fail "--set is not in every trial"; }
# One KEY=VALUE per --set: the sweep file after it is not taken as a second value.
expect_rc 0 -- "$vexp" sweep --set run.seed=7 --set run.log_every=1 --dry-run s.toml
expect_out "--set run.seed=7 --set run.log_every=1"
# A bad value is located at the --set.
expect_rc 2 -- "$vexp" sweep --dry-run s.toml --set run.epochs=0
expect_out "--set run.epochs=0"
# Keys the sweep sets itself.
expect_rc 2 -- "$vexp" sweep --dry-run s.toml --set optim.lr=0.3
expect_out "s.toml: --set optim.lr: the sweep varies this key (axis at s.toml:5:1)"
expect_rc 2 -- "$vexp" sweep --dry-run s.toml --set run.eval_every=2
expect_out "[sweep.set] sets this key for every trial (at s.toml:4:"
expect_rc 2 -- "$vexp" sweep --dry-run s.toml --set nonsense
expect_out "expected KEY=VALUE"
# Recorded in the store: every trial's overrides (a real run of the 2 tiny trials).
VEXP_TEST_EPOCHS=1 expect_rc 0 -- "$vexp" sweep s.toml --set run.seed=7 --out sw --no-report
$PY - <<'PYEOF' || fail "the store lacks the --set"
import json, sqlite3
rows = sqlite3.connect("sw/sweep.db").execute("SELECT overrides FROM trials").fetchall()
assert len(rows) == 2, rows
for (ov,) in rows:
    assert ["run.seed", "7"] in json.loads(ov), ov
PYEOF
no_crash
exit 0
