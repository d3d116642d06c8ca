# An output never replaces an input, all of them (issue #36 item 4). Round 2 protected
# only the root recipe, the cluster file and the exact checkpoint; these still replaced
# what the command read or what vexp manages: `plan --tune/--plot` onto a recipe's
# `extends` base or a profile the cluster file reads through `from`; `results
# --best-recipe` onto the sweep file or its base recipes; `export --to` and `predict
# --logits` onto an older checkpoint, summary.json or metrics.jsonl of a run folder.
# One rule now: every file the command read (device and inode) and every file vexp
# manages in a run or sweep folder is refused in one line, and the file is unchanged.
source "$(dirname "$0")/../lib.sh"
sum() { md5sum "$1" | cut -d' ' -f1; }
one_line() { [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }; }
unchanged() { [ "$(sum "$1")" = "$2" ] || fail "$1 was replaced"; }

# plan: a recipe that extends a base of ours, a cluster file whose profile comes `from` a file.
cp "$src/recipes/quickstart/tsm_motion.toml" base.toml
sed 's|^extends = .*|extends = "base.toml"|' tiny.toml >child.toml
mkdir c && cp -r "$src/clusters/local.toml" "$src/clusters/local" c/
# (figures for the tiny model, which local.toml's profiles do not describe)
printf '\n[gpu.derive]\ntrain_macs_per_s = 1e11\noptimizer_ms_per_mparam = 1.0\nsource = "test"\n' >>c/local.toml
b=$(sum base.toml) p=$(sum c/local/train_tsm_motion_t1.json)
expect_rc 2 -- "$vexp" plan child.toml --cluster c/local.toml --tune base.toml
expect_out "--tune 'base.toml' is '"; expect_out "base.toml', which this command reads; write it elsewhere"; one_line
expect_rc 2 -- "$vexp" plan child.toml --cluster c/local.toml --tune c/local/train_tsm_motion_t1.json
expect_out "train_tsm_motion_t1.json', which this command reads"; one_line
ln c/local/train_tsm_motion_t1.json profile_link.png   # a hard link: the same file
expect_rc 2 -- "$vexp" plan child.toml --cluster c/local.toml --plot profile_link.png
expect_out "--plot 'profile_link.png' is '"
unchanged base.toml "$b"; unchanged c/local/train_tsm_motion_t1.json "$p"
expect_rc 0 -- "$vexp" plan child.toml --cluster c/local.toml --tune tuned.toml   # a new file: fine

# results --best-recipe onto the sweep file, its base and what the base extends.
cat >sw.toml <<EOF2
[sweep]
base = "child.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
EOF2
"$vexp" sweep sw.toml --out s --no-report >sweep.out 2>&1 || { cat sweep.out; fail "the sweep failed"; }
w=$(sum sw.toml) ch=$(sum child.toml)
expect_rc 2 -- "$vexp" results s --best-recipe sw.toml
expect_out "--best-recipe 'sw.toml' is the sweep file '$tmp/sw.toml' that this command reads"; one_line
expect_rc 2 -- "$vexp" results s --best-recipe child.toml
expect_out "--best-recipe 'child.toml' is the base recipe '$tmp/child.toml'"; one_line
expect_rc 2 -- "$vexp" results s --best-recipe base.toml
expect_out "--best-recipe 'base.toml' is a recipe the base extends"; one_line
expect_rc 2 -- "$vexp" results s --best-recipe s/trials/001/summary.json
expect_out "is summary.json of the run folder '$tmp/s/trials/001', which vexp manages"
expect_rc 2 -- "$vexp" results s --best-recipe s/trials/001/notes.toml
expect_out "is inside the trials of the sweep folder '$tmp/s', which vexp manages"
unchanged sw.toml "$w"; unchanged child.toml "$ch"; unchanged base.toml "$b"
expect_rc 0 -- "$vexp" results s --best-recipe best.toml

# export --to / predict --logits onto the files of a run folder.
VEXP_TEST_EPOCHS=2 "$vexp" run tiny.toml --out run >/dev/null 2>&1 || fail "the tiny run failed"
old=run/checkpoints/epoch_0001.pt
[ -f "$old" ] && [ -f run/checkpoints/epoch_0002.pt ] || fail "the run kept no older checkpoint"
o=$(sum "$old") m=$(sum run/metrics.jsonl) su=$(sum run/summary.json)
expect_rc 2 -- "$vexp" export run --to "$old"
expect_out "--to '$old' is inside checkpoints/ of the run folder '$tmp/run', which vexp manages; write it elsewhere"
expect_rc 2 -- "$vexp" export run --to run/metrics.jsonl
expect_out "--to 'run/metrics.jsonl' is metrics.jsonl of the run folder '$tmp/run', which vexp manages"
expect_rc 2 -- "$vexp" export run --to run/summary.json
expect_out "is summary.json of the run folder"
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
expect_rc 2 -- "$vexp" predict tiny.toml --weights run --input clip.pt --logits run/summary.json
expect_out "--logits 'run/summary.json' is summary.json of the run folder"
expect_rc 2 -- "$vexp" predict tiny.toml --weights run --input clip.pt --logits "$old"
expect_out "is inside checkpoints/ of the run folder"
# The recipe's extends base is read while the model is built: refused before anything is predicted.
cp base.toml base2.json
sed 's|^extends = .*|extends = "base2.json"|' tiny.toml >child2.toml
b2=$(sum base2.json)
expect_rc 2 -- "$vexp" predict child2.toml --weights run --input clip.pt --logits base2.json
expect_out "--logits 'base2.json' is '"; expect_out "base2.json', which this command reads"
unchanged base2.json "$b2"
unchanged "$old" "$o"; unchanged run/metrics.jsonl "$m"; unchanged run/summary.json "$su"; unchanged base.toml "$b"
expect_rc 0 -- "$vexp" export run --to run/exported.pth   # a new name inside the run folder: fine
no_crash
exit 0
