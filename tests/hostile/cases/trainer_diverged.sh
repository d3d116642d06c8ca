# A run whose validation loss is NaN, or whose training loss explodes without
# becoming NaN, ends as diverged (exit 3), never as done with a top-1. Faults are
# injected (VEXP_TEST_FAULT, test-only) so this holds whatever BLAS the machine has.
source "$(dirname "$0")/../lib.sh"
VEXP_TEST_FAULT=nan_val@epoch=2 expect_rc 3 -- "$vexp" run tiny.toml --out "$tmp/nanval"
no_crash
expect_out "training diverged: the validation loss became NaN after epoch 2; the last good checkpoint is $tmp/nanval/checkpoints/epoch_0001.pt"
expect_no_out "$tmp/nanval: top-1"
[ ! -e "$tmp/nanval/summary.json" ] || fail "a diverged run wrote a summary"
[ ! -e "$tmp/nanval/checkpoints/epoch_0002.pt" ] || fail "a diverged epoch was checkpointed"
grep -q "\"val_loss\":null" "$tmp/nanval/metrics.jsonl" || fail "the NaN evaluation is not logged"

VEXP_TEST_FAULT=grow_loss@step=4 expect_rc 3 -- "$vexp" run tiny.toml --out "$tmp/grow"
expect_out "training diverged: training loss grew to"
expect_out "more than run.divergence_factor = 1000 times"
[ ! -e "$tmp/grow/summary.json" ] || fail "a diverged run wrote a summary"
# 0 turns the growth check off: the same run finishes.
VEXP_TEST_FAULT=grow_loss@step=4 expect_rc 0 -- "$vexp" run tiny.toml --out "$tmp/grow0" --set run.divergence_factor=0

VEXP_TEST_FAULT=nan_loss@step=2 expect_rc 3 -- "$vexp" run tiny.toml --out "$tmp/nanloss"
expect_out "training diverged: loss became NaN at epoch 1, step 2; no checkpoint was written yet"

# Not for production: an unreadable spec is an error, not ignored.
VEXP_TEST_FAULT=bogus expect_rc 1 -- "$vexp" run tiny.toml --out "$tmp/bogus"
expect_out "VEXP_TEST_FAULT: cannot read 'bogus'"
no_crash
echo "PASS [$name]"
