# The ways to allow a plugin folder a recipe names: `vexp trust DIR` once (stored
# per user, canonical path as a JSON string, --list / --remove), --plugin-path DIR on the command
# (passed on to a sweep's trials and to `run --nproc` ranks), VEXP_PLUGIN_PATH.
# Allowed, the folder is loaded (the marker library's constructor runs) and the
# recipe works as before.
source "$(dirname "$0")/../lib.sh"
so="$build/tests/fixtures/marker/fixture_marker.so"
[ -f "$so" ] || fail "fixture not built: $so"
mkdir -p evil
cp "$so" evil/
export VEXP_TEST_MARKER="$tmp/marker"
loaded() {  # $1: what was run
  [ -s "$VEXP_TEST_MARKER" ] || fail "$1 did not load the allowed folder"
  rm -f "$VEXP_TEST_MARKER"
}
printf 'extends = "tiny.toml"\n\n[plugins]\npaths = ["evil"]\n' >direct.toml
trustfile="$XDG_CONFIG_HOME/vexp/trusted-plugin-dirs"

# --plugin-path: this command only.
expect_rc 0 -- "$vexp" check direct.toml --plugin-path evil
expect_out "direct.toml: ok"; loaded "check --plugin-path"
expect_rc 0 -- "$vexp" run direct.toml --dry-run --plugin-path "$tmp/evil"
loaded "run --dry-run --plugin-path"
expect_rc 2 -- "$vexp" check direct.toml
expect_out "is not trusted"
[ ! -e "$VEXP_TEST_MARKER" ] || fail "--plugin-path leaked into a later command"
expect_rc 2 -- "$vexp" check direct.toml --plugin-path "$tmp/nope"
expect_out "nope"

# VEXP_PLUGIN_PATH.
expect_rc 0 -- env VEXP_PLUGIN_PATH="$tmp/evil" "$vexp" info direct.toml
loaded "VEXP_PLUGIN_PATH"

# vexp trust: once, for this user; stored canonical (through a symlink, with ..).
ln -s evil link
expect_rc 0 -- "$vexp" trust ./link/../link
expect_out "trusted: $tmp/evil"
[ "$(grep -v '^#' "$trustfile")" = "\"$tmp/evil\"" ] || fail "trust file: $(cat "$trustfile")"
ls -a "$(dirname "$trustfile")" | grep -q '\.tmp$' && fail "a temporary file was left next to the trust file"
expect_rc 0 -- "$vexp" trust evil   # again: no duplicate
[ "$(grep -vc '^#' "$trustfile")" = 1 ] || fail "trusting twice added a duplicate"
for cmd in check info graph; do
  expect_rc 0 -- "$vexp" "$cmd" direct.toml
  loaded "vexp $cmd (trusted)"
done
expect_rc 0 -- "$vexp" run direct.toml --dry-run
loaded "run --dry-run (trusted)"
expect_rc 0 -- "$vexp" check tiny.toml --set 'plugins.paths=["link"]'
loaded "--set naming a trusted folder through a symlink"
expect_rc 0 -- "$vexp" trust --list
expect_out "$tmp/evil"
expect_rc 2 -- "$vexp" trust no/such/dir
expect_out "no/such/dir"
expect_rc 0 -- "$vexp" trust --remove evil
expect_rc 0 -- "$vexp" trust --list
expect_no_out "$tmp/evil"
expect_rc 2 -- "$vexp" check direct.toml
expect_out "is not trusted"
[ ! -e "$VEXP_TEST_MARKER" ] || fail "a removed folder was still loaded"
expect_rc 1 -- "$vexp" trust --remove evil
expect_out "is not a trusted plugin folder"

# A sweep passes --plugin-path on to its trials (each trial is a `vexp run`).
cat >sweep.toml <<'TOML'
[sweep]
base = "direct.toml"
[sweep.set]
"run.epochs" = 1
"data.params.train_clips" = 16
"data.params.val_clips" = 8
[[sweep.axis]]
key = "optim.lr"
grid = [0.05]
TOML
expect_rc 2 -- "$vexp" sweep sweep.toml --dry-run
expect_out "direct.toml:4:10: error: plugin folder"
expect_rc 0 -- "$vexp" sweep sweep.toml --dry-run --plugin-path evil
expect_out "1 trials, every recipe valid"; loaded "sweep --dry-run --plugin-path"
expect_rc 0 -- "$vexp" sweep sweep.toml --plugin-path evil --out "$tmp/sw" --no-report
grep -q -- "--plugin-path $tmp/evil" "$tmp/sw/trials/001/log.txt" || fail "the trial was not given --plugin-path: $(cat "$tmp"/sw/trials/*/log.txt)"
[ -f "$tmp/sw/trials/001/summary.json" ] || fail "the trial did not finish: $(cat "$tmp"/sw/trials/*/log.txt)"
loaded "the sweep's trial"

# run --nproc passes it on to the ranks (a stand-in mpirun records its arguments).
mkdir -p fakebin
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s/mpirun.args"\n' "$tmp" >fakebin/mpirun
chmod +x fakebin/mpirun
expect_rc 0 -- env PATH="$tmp/fakebin:$PATH" "$vexp" run direct.toml --nproc 2 --plugin-path evil --out "$tmp/r"
grep -qx -- "--plugin-path" mpirun.args && grep -qx -- "$tmp/evil" mpirun.args ||
  fail "run --nproc did not pass --plugin-path to the ranks: $(cat mpirun.args)"
exit 0
