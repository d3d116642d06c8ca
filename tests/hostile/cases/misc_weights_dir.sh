# `vexp predict --weights DIR`: a run directory means its latest checkpoint (as
# `vexp export RUN` does); a directory without one is said to be that, not a
# missing file.
source "$(dirname "$0")/../lib.sh"
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
mkdir empty
expect_rc 1 -- "$vexp" predict tiny.toml --weights empty --input clip.pt
expect_out "--weights 'empty' is a directory with no checkpoint"
expect_no_out "no such file"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "expected one line, got: $(cat "$tmp/out")"
expect_rc 1 -- "$vexp" predict tiny.toml --weights nowhere --input clip.pt
expect_out "--weights 'nowhere': no such file or directory"
VEXP_TEST_EPOCHS=2 "$vexp" run tiny.toml --out run >/dev/null 2>&1 || fail "the tiny run failed"
expect_rc 0 -- "$vexp" predict tiny.toml --weights run --input clip.pt --logits dir.json
expect_out "using its latest checkpoint 'run/checkpoints/epoch_0002.pt'"
expect_out "clip 0:"
expect_rc 0 -- "$vexp" predict tiny.toml --weights run/checkpoints --input clip.pt
expect_out "epoch_0002.pt"
# the same logits as naming the checkpoint itself
expect_rc 0 -- "$vexp" predict tiny.toml --weights run/checkpoints/epoch_0002.pt --input clip.pt --logits file.json
cmp -s dir.json file.json || fail "--weights RUN gave other logits than its latest checkpoint"
expect_rc 1 -- "$vexp" export empty --to out.pth
expect_out "'empty' is a directory with no checkpoint"
no_crash
