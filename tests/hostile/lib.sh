# Sourced first by every hostile case: cases/NAME.sh VEXP SOURCE_DIR BUILD_DIR.
# Gives: $name $vexp $src $build $tmp (removed on exit) $PY, a private $HOME
# (so per-user state such as trusted plugin folders never leaks between cases),
# and expect_rc / expect_out / expect_no_out / no_crash / fail from tests/cli/testlib.sh.
set -uo pipefail
name=$(basename "$0" .sh)
vexp=$1 src=$2 build=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vexp_hostile_${name}_XXXX")
trap 'rm -rf "$tmp"' EXIT
PY=/usr/bin/python3
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config"
mkdir -p "$HOME"
unset VEXP_PLUGIN_PATH
source "$src/tests/cli/testlib.sh"
cd "$tmp"
# A small valid recipe to build attacks on: $tmp/tiny.toml (synthetic data, seconds to run).
sed "s|^extends = .*|extends = \"$src/recipes/quickstart/tsm_motion.toml\"|" "$src/tests/cli/data/tiny.toml" >"$tmp/tiny.toml"
