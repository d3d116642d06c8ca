# Outputs written onto the inputs they are made from: `vexp export RUN --to` its newest
# checkpoint (or resolved.toml), `vexp predict --logits` onto the checkpoint it reads,
# the recipe or the input clip, `vexp plan R --tune R` (R became `extends = "R"`, a
# cycle). Each silently destroyed what it read; each is refused with one line naming
# both paths, and the input is left as it was.
source "$(dirname "$0")/../lib.sh"
VEXP_TEST_EPOCHS=1 "$vexp" run tiny.toml --out run >/dev/null 2>&1 || fail "the tiny run failed"
ck=run/checkpoints/epoch_0001.pt
[ -f "$ck" ] || fail "no checkpoint $ck"
sum() { md5sum "$1" | cut -d' ' -f1; }
before=$(sum "$ck") recipe_before=$(sum run/resolved.toml)
expect_rc 2 -- "$vexp" export run --to "$ck"
expect_out "--to '$ck' is the checkpoint '$ck' that this command reads; write it elsewhere"
ln "$ck" hardlink.pt
expect_rc 2 -- "$vexp" export run --to hardlink.pt   # a hard link is the same file
expect_out "--to 'hardlink.pt' is the checkpoint"
expect_rc 2 -- "$vexp" export run --to run/resolved.toml
expect_out "--to 'run/resolved.toml' is the recipe 'run/resolved.toml'"
[ "$(sum "$ck")" = "$before" ] || fail "export replaced the checkpoint"
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
clip_before=$(sum clip.pt)
expect_rc 2 -- "$vexp" predict tiny.toml --weights "$ck" --input clip.pt --logits "$ck"
expect_out "--logits '$ck' is the checkpoint"
ln -s clip.pt link.pt
expect_rc 2 -- "$vexp" predict tiny.toml --weights "$ck" --input clip.pt --logits link.pt   # a symlink too
expect_out "--logits 'link.pt' is the input 'clip.pt'"
cp tiny.toml recipe.json   # (a recipe named so that --logits accepts the name)
cp recipe.json recipe_before.json
expect_rc 2 -- "$vexp" predict recipe.json --weights "$ck" --input clip.pt --logits recipe.json
expect_out "--logits 'recipe.json' is the recipe 'recipe.json'"
cmp -s recipe.json recipe_before.json || fail "predict replaced the recipe"
[ "$(sum "$ck")" = "$before" ] || fail "predict replaced the checkpoint"
[ "$(sum clip.pt)" = "$clip_before" ] || fail "predict replaced the input clip"
[ "$(sum run/resolved.toml)" = "$recipe_before" ] || fail "predict replaced the recipe"
# plan --tune onto its own recipe
cp tiny.toml plan.toml
plan_before=$(sum plan.toml)
expect_rc 2 -- "$vexp" plan plan.toml --cluster "$src/tests/cli/data/plan_cluster.toml" --tune plan.toml
expect_out "--tune 'plan.toml' is the recipe 'plan.toml' that this command reads"
[ "$(sum plan.toml)" = "$plan_before" ] || fail "plan --tune replaced its recipe"
no_crash
exit 0
