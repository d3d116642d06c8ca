# `vexp results DIR --best-recipe FILE` wrote the recipe over whatever FILE was: the
# sweep's store DIR/sweep.db, or a file of a trial (its resolved.toml). Refused with
# one line naming both; a previous best recipe may still be replaced.
source "$(dirname "$0")/../lib.sh"
cat >sw.toml <<EOF
[sweep]
name = "names_best"
base = "$tmp/tiny.toml"
metric = "top1"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
EOF
"$vexp" sweep sw.toml --out s >sweep.out 2>&1 || { cat sweep.out; fail "the sweep failed"; }
db_before=$(md5sum s/sweep.db | cut -d' ' -f1)
expect_rc 2 -- "$vexp" results s --best-recipe s/sweep.db
expect_out "--best-recipe 's/sweep.db' is sweep.db of the sweep folder '$tmp/s', which vexp manages"
[ "$(md5sum s/sweep.db | cut -d' ' -f1)" = "$db_before" ] || fail "the store was replaced"
trial_toml=$(find s -name resolved.toml | head -1)
[ -n "$trial_toml" ] || fail "no trial resolved.toml"
cp "$trial_toml" trial_before.toml
expect_rc 2 -- "$vexp" results s --best-recipe "$trial_toml"
expect_out "--best-recipe '$trial_toml' is resolved.toml of the run folder '$tmp/s/trials/"
cmp -s "$trial_toml" trial_before.toml || fail "a trial's recipe was replaced"
expect_rc 0 -- "$vexp" results s --best-recipe s/best.toml
expect_rc 0 -- "$vexp" results s --best-recipe s/best.toml   # its own earlier output: fine
no_crash
exit 0
