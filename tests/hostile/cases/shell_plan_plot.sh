# vexp plan --plot titles each panel with the recipe file's name. A name holding a
# newline used to end gnuplot's title command and the next line ran (`!touch`);
# the PNG was written through a pid-named temporary beside it. Now the name is a
# quoted gnuplot string with the newline escaped, gnuplot is started by argv and
# draws in a private folder: nothing runs, the plot is written.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
evil="nl
!touch VICTIM_plan
set output 'VICTIM_out.png'
x'; system('touch VICTIM_q'); 'a\`touch VICTIM_bq\`b.toml"
sed "s|^extends = \"\(.*\)\"|extends = \"$src/recipes/quickstart/\1\"|" "$src/recipes/quickstart/tsm_motion.toml" >"$evil"
expect_rc 0 -- "$vexp" plan "$evil" --cluster "$src/tests/cli/data/plan_cluster.toml" --gpus 1,2 \
  --plot "$tmp/p'; \$(touch VICTIM_png).png"
no_crash
find "$tmp" -name 'VICTIM*' | grep -q . && { find "$tmp" -name 'VICTIM*' >&2; fail "a recipe name ran a command"; }
head -c 8 "$tmp/p'; \$(touch VICTIM_png).png" | od -An -c | grep -q "P   N   G" || fail "no PNG written"
# Nothing left beside it (the temporary is private and gone).
[ "$(ls -A "$tmp" | grep -c '^p.*\.png')" -eq 1 ] || { ls -A "$tmp" >&2; fail "a temporary was left beside the plot"; }
exit 0
