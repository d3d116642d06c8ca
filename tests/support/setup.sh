# The one setup of every shell end-to-end test (tests/cli, tests/dist, tests/slurm,
# tests/hostile). A script sets $name (the test) and $src (the source tree), then
#   source "$src/tests/support/setup.sh" KIND
# and gets:
#   set -uo pipefail;
#   $tmp: a private folder ${TMPDIR:-/tmp}/vexp_KIND_NAME_XXXX, removed on exit (kept
#         with VEXP_TEST_KEEP=1), after
#         the script's own `cleanup` function when it defines one (to stop what it
#         started in the background);
#   a private $HOME and $XDG_CONFIG_HOME inside $tmp: the user's per-user state (the
#         trusted plugin folders of `vexp trust`, anything under ~/.config) is never
#         read nor written, and no test sees another's;
#   VEXP_PLUGIN_PATH unset: only the build's plugin folder and what a test names;
#   $PY: /usr/bin/python3 (the Python with torch and numpy);
#   fail / expect_rc / expect_out / expect_no_out / no_crash (tests/cli/testlib.sh);
#   limit_memory KB: bounds the memory of what the (sub)shell runs next; asan_build
#         (below).
set -uo pipefail
: "${name:?set name before sourcing setup.sh}" "${src:?set src before sourcing setup.sh}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vexp_${1:?setup.sh KIND}_${name}_XXXX") || { echo "setup.sh: cannot make a temporary folder" >&2; exit 1; }
_vexp_test_exit() {
  if declare -F cleanup >/dev/null; then cleanup; fi
  # VEXP_TEST_KEEP=1 keeps the folder (run directories, logs) for a look after a failure.
  if [ "${VEXP_TEST_KEEP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap _vexp_test_exit EXIT
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config"
mkdir -p "$HOME"
unset VEXP_PLUGIN_PATH
PY=/usr/bin/python3
source "$src/tests/cli/testlib.sh"

# asan_build: whether $vexp was built with AddressSanitizer (make sanitize). (ldd's
# whole output first: `ldd | grep -q` under pipefail fails when grep stops reading
# early and ldd gets SIGPIPE.)
asan_build() { [[ "$(ldd "${vexp:-/nonexistent}" 2>/dev/null)" == *libasan.* ]]; }

# limit_memory KB, in a subshell before the command it bounds: `ulimit -v KB`; for a
# vexp built with AddressSanitizer, which reserves terabytes of address space at start
# and so cannot run under `ulimit -v`, ASan's own limits of the same size (one
# allocation, or the resident set, past KB ends the process).
limit_memory() {
  if asan_build; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:max_allocation_size_mb=$(($1 / 1024)):hard_rss_limit_mb=$(($1 / 1024))"
  else
    ulimit -v "$1"
  fi
}
