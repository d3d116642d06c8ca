# A 1-epoch sweep lost two of its four PNGs (issue #36 item 7.5): each trial's training
# loss and validation metric are one point, the loss panel's y range was written as
# [1.47941:1.47941] (hi + 1e-9 printed with 6 digits) and gnuplot stopped at "Can't
# plot with an empty y range!", so curves.png, throughput.png and linear_scaling.png
# were never drawn and `vexp report --png` exited 1. Now every range spans something
# and a one-point curve is drawn as a point: all four PNGs, from `vexp report --png`
# and from the sweep's own report.
source "$(dirname "$0")/../lib.sh"
command -v gnuplot >/dev/null || { echo "gnuplot is not installed"; exit 77; }
one_trial_sweep sw.toml one
is_png() { head -c 8 "$1" 2>/dev/null | od -An -c | grep -q "P   N   G"; }
expect_rc 0 -- "$vexp" sweep sw.toml --out s
expect_out "plots: 4 PNG files in s/report"
expect_no_out "gnuplot failed"
for p in heatmap curves throughput linear_scaling; do is_png "s/report/$p.png" || fail "the sweep drew no $p.png"; done
expect_rc 0 -- "$vexp" report s --png png
expect_no_out "gnuplot failed"
for p in heatmap curves throughput linear_scaling; do is_png "png/$p.png" || fail "vexp report --png drew no $p.png"; done
grep -q "empty y range" png/gnuplot.log && { cat png/gnuplot.log; fail "gnuplot found an empty y range"; }
no_crash
exit 0
