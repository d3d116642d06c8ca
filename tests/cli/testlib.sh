# Shared helpers of the end-to-end test scripts, sourced by tests/support/setup.sh
# (which every script sources first; it sets $tmp).
# expect_rc CODE -- cmd...: runs cmd, stdout+stderr to $tmp/out, checks the exit code
# (and, when CHECK_CRASH_EVERY_RUN=1, that the run did not crash).
fail() { echo "FAIL [$name]: $*" >&2; exit 1; }
expect_rc() {
  local want=$1; shift; [ "$1" = "--" ] && shift
  "$@" >"$tmp/out" 2>&1; local rc=$?
  [ "$rc" -eq "$want" ] || { cat "$tmp/out" >&2; fail "'$*' exited $rc, expected $want"; }
  [ "${CHECK_CRASH_EVERY_RUN:-0}" = 1 ] && no_crash
  return 0
}
expect_out() { grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out" >&2; fail "output lacks: $1"; }; }
expect_no_out() { ! grep -qF -- "$1" "$tmp/out" || { cat "$tmp/out" >&2; fail "output has: $1"; }; }
no_crash() {  # never an abort, terminate or core dump
  for bad in "terminate called" "Aborted" "core dumped" "Segmentation fault"; do expect_no_out "$bad"; done
}
