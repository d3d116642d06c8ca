# --resume past a corrupt newest checkpoint (kept, named), --resume-from, and a
# checkpoint of another model named as such (not "the recipe changed").
source "$(dirname "$0")/../lib.sh"
expect_rc 0 -- "$vexp" run tiny.toml --out "$tmp/run" --set run.epochs=3 --stop-after 2
truncate -s 100 "$tmp/run/checkpoints/epoch_0002.pt"
expect_rc 0 -- "$vexp" run tiny.toml --out "$tmp/run" --set run.epochs=3 --resume
no_crash
expect_out "checkpoint '$tmp/run/checkpoints/epoch_0002.pt' does not load"
expect_out "kept as '$tmp/run/checkpoints/epoch_0002.pt.corrupt'"
expect_out "resuming '$tmp/run' from epoch_0001.pt"
[ "$(stat -c %s "$tmp/run/checkpoints/epoch_0002.pt.corrupt")" -eq 100 ] || fail "the corrupt checkpoint was not kept"
grep -q '"epochs": 3' "$tmp/run/summary.json" || fail "the run did not finish"
# --resume-from: into a new directory, from that run's first checkpoint
expect_rc 0 -- "$vexp" run tiny.toml --out "$tmp/from" --set run.epochs=3 --resume-from "$tmp/run/checkpoints/epoch_0001.pt"
expect_out "resuming '$tmp/from' from epoch_0001.pt (epoch 1, step 6)"
expect_rc 2 -- "$vexp" run tiny.toml --out "$tmp/x" --resume --resume-from "$tmp/run/checkpoints/epoch_0001.pt"
# another model's checkpoint (6 classes: another classifier)
expect_rc 1 -- "$vexp" run tiny.toml --out "$tmp/other" --set data.params.classes=6 --resume-from "$tmp/run/checkpoints/epoch_0001.pt"
expect_out "belongs to another model than this recipe's"
expect_out "in the model, [4, 64] in the checkpoint"
expect_no_out "recipe changed"
# the same model, another recipe
expect_rc 1 -- "$vexp" run tiny.toml --out "$tmp/other2" --set optim.lr=0.05 --resume-from "$tmp/run/checkpoints/epoch_0001.pt"
expect_out "the recipe changed since the run started"
no_crash
echo "PASS [$name]"
