# A 40-epoch run kept 39 checkpoints: run.keep_checkpoints = N keeps the newest N,
# never the one just written (which a resume starts from) nor NAME.corrupt files.
source "$(dirname "$0")/../lib.sh"
K=(--set run.epochs=6 --set run.keep_checkpoints=2)
expect_rc 0 -- "$vexp" run tiny.toml "${K[@]}" --out r --stop-after 4
[ "$(cd r/checkpoints && ls)" = "$(printf 'epoch_0003.pt\nepoch_0004.pt')" ] ||
  { ls -l r/checkpoints; fail "keep_checkpoints = 2 did not keep exactly the newest two"; }
# A resume continues from the newest, and pruning keeps going.
touch r/checkpoints/epoch_0001.pt.corrupt
expect_rc 0 -- "$vexp" run tiny.toml "${K[@]}" --out r --resume
[ "$(cd r/checkpoints && ls)" = "$(printf 'epoch_0001.pt.corrupt\nepoch_0005.pt\nepoch_0006.pt')" ] ||
  { ls -l r/checkpoints; fail "pruning after a resume"; }
# The default keeps every one.
expect_rc 0 -- "$vexp" run tiny.toml --set run.epochs=3 --out all
[ "$(ls all/checkpoints | wc -l)" -eq 3 ] || { ls all/checkpoints; fail "the default deleted checkpoints"; }
expect_rc 2 -- "$vexp" check tiny.toml --set run.keep_checkpoints=-1
expect_out "'keep_checkpoints' in [run]"
no_crash
exit 0
