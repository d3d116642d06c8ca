# A recipe someone sent names a plugin folder of theirs: opening it (check, info,
# graph, run --dry-run, sweep --dry-run) must not dlopen anything from it, since a
# library's constructor runs inside dlopen. The folder is named directly, through
# an `extends` base, through --set, through a sweep's base recipe, as a single
# library file, and around a trusted folder with `..` and a symlink: every time
# exit 2 at the array element, a sentence saying how to allow it, and no marker.
source "$(dirname "$0")/../lib.sh"
so="$build/tests/fixtures/marker/fixture_marker.so"
[ -f "$so" ] || fail "fixture not built: $so"
mkdir -p evil good
cp "$so" evil/
ln -s evil link
export VEXP_TEST_MARKER="$tmp/marker"
not_loaded() {  # $1: what was run
  [ ! -e "$VEXP_TEST_MARKER" ] || fail "$1 loaded the untrusted library (its constructor ran)"
}
refused() {  # $1: file:line:col expected in the output
  expect_out "$1: error: plugin folder"
  expect_out "is not trusted, so nothing was loaded from it"
  expect_out "vexp trust $tmp/evil"
  expect_out "--plugin-path $tmp/evil"
  no_crash
}

printf 'extends = "tiny.toml"\n\n[plugins]\npaths = ["evil"]\n' >direct.toml
for cmd in check info graph; do
  expect_rc 2 -- "$vexp" "$cmd" direct.toml
  refused "direct.toml:4:10"; not_loaded "vexp $cmd"
done
expect_rc 2 -- "$vexp" run direct.toml --dry-run
refused "direct.toml:4:10"; not_loaded "vexp run --dry-run"
expect_rc 2 -- "$vexp" run direct.toml --out "$tmp/run"
refused "direct.toml:4:10"; not_loaded "vexp run"
[ ! -e "$tmp/run" ] || fail "a refused run created its run directory"

# Through an extends base: the location is in the base, where the path was written.
mkdir -p sub
printf '# base\nextends = "../tiny.toml"\n[plugins]\npaths = [\n  "../good",\n  "../evil",\n]\n' >sub/base.toml
printf 'extends = "sub/base.toml"\n' >child.toml
"$vexp" trust good >/dev/null || fail "vexp trust good"
expect_rc 2 -- "$vexp" check child.toml
refused "sub/base.toml:6:3"; not_loaded "vexp check (extends)"
expect_no_out "good' is not trusted"   # the trusted one is not refused, and not loaded either: all or nothing

# Through --set (paths given on the command line are relative to the working directory).
expect_rc 2 -- "$vexp" check tiny.toml --set 'plugins.paths=["evil"]'
refused '--set plugins.paths=["evil"]'; not_loaded "vexp check --set"
expect_rc 2 -- "$vexp" info tiny.toml --set "plugins.paths=[\"$tmp/evil\"]"
refused "--set plugins.paths=[\"$tmp/evil\"]"; not_loaded "vexp info --set"

# A single library file, `..` around a trusted folder, a symlink to the folder.
printf 'extends = "tiny.toml"\n[plugins]\npaths = ["evil/fixture_marker.so"]\n' >file.toml
expect_rc 2 -- "$vexp" check file.toml
expect_out "file.toml:3:10: error: plugin folder"; not_loaded "a library file"
printf 'extends = "tiny.toml"\n[plugins]\npaths = ["good/../evil"]\n' >dots.toml
expect_rc 2 -- "$vexp" check dots.toml
refused "dots.toml:3:10"; not_loaded "good/../evil"
printf 'extends = "tiny.toml"\n[plugins]\npaths = ["link"]\n' >link.toml
expect_rc 2 -- "$vexp" check link.toml
refused "link.toml:3:10"; not_loaded "a symlink to the folder"

# A sweep whose base recipe names the folder: refused before any trial starts.
cat >sweep.toml <<'TOML'
[sweep]
base = "direct.toml"
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
TOML
expect_rc 2 -- "$vexp" sweep sweep.toml --dry-run
refused "direct.toml:4:10"; not_loaded "vexp sweep --dry-run"
expect_rc 2 -- "$vexp" sweep sweep.toml --out "$tmp/sw"
refused "direct.toml:4:10"; not_loaded "vexp sweep"
# ... and a sweep that sets the paths itself.
cat >sweep_set.toml <<'TOML'
[sweep]
base = "tiny.toml"
[sweep.set]
"plugins.paths" = ["evil"]
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
TOML
expect_rc 2 -- "$vexp" sweep sweep_set.toml --dry-run
expect_out "is not trusted, so nothing was loaded from it"; not_loaded "vexp sweep [sweep.set]"
exit 0
