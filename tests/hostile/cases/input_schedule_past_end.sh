# Shortening run.epochs left warmup and milestones after the run's end without a word
# (the dry run printed "cosine over steps 150273..30055"); --dry-run planned with the
# declared data.train_size although the data held 16 clips. One warning each, at the
# value, in check, run and the dry run; the dry run plans with the real count.
source "$(dirname "$0")/../lib.sh"
for cmd in "check" "run --dry-run"; do
  expect_rc 0 -- "$vexp" $cmd tiny.toml --set run.epochs=1 --set schedule.warmup_epochs=5
  expect_out "--set schedule.warmup_epochs=5: warning: schedule.warmup_epochs = 5 reaches the run's end (run.epochs = 1)"
  expect_rc 0 -- "$vexp" $cmd tiny.toml --set run.epochs=2 --set schedule.type=step --set 'schedule.milestones=[1,2,30]'
  expect_out "warning: schedule.milestones: epoch 2 is at or after the run's end (run.epochs = 2)"
  expect_out "warning: schedule.milestones: epoch 30 is at or after the run's end"
  expect_no_out "epoch 1 is at"
done
expect_rc 0 -- "$vexp" check tiny.toml --set run.epochs=3 --set schedule.warmup_epochs=1
expect_no_out "warning"
# The dry run plans with the 48 clips the synthetic data holds, not the declared 240000.
expect_rc 0 -- "$vexp" run tiny.toml --dry-run --set data.train_size=240000
expect_out "planning with the 48 training clips the data holds, not the declared data.train_size = 240000"
expect_out "training clips:    48 per epoch"
expect_rc 0 -- "$vexp" run tiny.toml --dry-run --set data.train_size=48
expect_no_out "planning with"
no_crash
exit 0
