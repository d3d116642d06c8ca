# `bench allreduce --mb 65536` printed a 28-line c10 backtrace when the tensor did not
# fit; `bench op --device cuda:99` on a CPU build a 42-line dispatcher dump. Now one
# line each, with the limit or the reason.
source "$(dirname "$0")/../lib.sh"
ram_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
if [ "$ram_mb" -lt 131072 ]; then
  expect_rc 2 -- timeout 60 "$vexp" bench allreduce --mb 65536 --reps 1
  expect_out "--mb 65536: a 64.0 GiB tensor is more than half of this machine's"
  expect_out "use --mb"
  [ "$(grep -c . "$tmp/out")" -eq 1 ] || fail "more than one line"
fi
expect_rc 2 -- "$vexp" bench allreduce --mb 100000 --reps 1
expect_no_out "frame #"
if ! "$vexp" --version | grep -q cuda; then
  expect_rc 2 -- timeout 60 "$vexp" bench op temporal_shift --device cuda:99 --shape 2x8x4x4 --frames 2 --reps 1
  expect_out "--device 'cuda:99': this vexp was built without CUDA"
  [ "$(grep -c . "$tmp/out")" -eq 1 ] || fail "more than one line"
  expect_rc 2 -- timeout 60 "$vexp" bench op temporal_shift --device cuda --shape 2x8x4x4 --frames 2 --reps 1
  expect_no_out "Exception raised from"
fi
expect_rc 2 -- "$vexp" bench op temporal_shift --device 'cuda:x' --shape 2x8x4x4 --frames 2 --reps 1
expect_out "expected cpu, cuda, cuda:N or auto"
expect_rc 2 -- "$vexp" bench op temporal_shift --device 'tpu' --shape 2x8x4x4 --frames 2 --reps 1
expect_no_out "frame #"
no_crash
exit 0
