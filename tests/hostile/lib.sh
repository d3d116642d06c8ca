# Sourced first by every hostile case: cases/NAME.sh VEXP SOURCE_DIR BUILD_DIR.
# Gives: $name $vexp $src $build, and what tests/support/setup.sh gives every shell
# test ($tmp removed on exit, a private $HOME, VEXP_PLUGIN_PATH unset, $PY, the
# expect_* helpers); the case runs in $tmp.
name=$(basename "$0" .sh)
vexp=$1 src=$2 build=$3
source "$src/tests/support/setup.sh" hostile
cd "$tmp"
# A small valid recipe to build attacks on: $tmp/tiny.toml (synthetic data, seconds to run).
sed "s|^extends = .*|extends = \"$src/recipes/quickstart/tsm_motion.toml\"|" "$src/tests/cli/data/tiny.toml" >"$tmp/tiny.toml"
