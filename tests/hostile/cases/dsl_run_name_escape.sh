# run.name "../../x" or "/abs" used to put the run directory outside runs/. A run name
# is one folder name: anything else is an error at the value, exit 2, nothing written.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
for rn in '../../escaped' "$tmp/abs" 'a/b' '..' '.'; do
  sed "s|^name = .*|name = \"$rn\"|" ../tiny.toml >named.toml
  line=$(grep -n '^name = ' named.toml | cut -d: -f1)
  expect_rc 2 -- "$vexp" check named.toml
  expect_out "named.toml:$line:1: error: run.name \"$rn\""
  expect_out "a run name is one folder name under runs/"
  expect_rc 2 -- "$vexp" run named.toml
  expect_out "named.toml:$line:1: error: run.name \"$rn\""
  no_crash
done
for rn in ../x /abs/x; do
  for cmd in check run; do
    expect_rc 2 -- "$vexp" $cmd ../tiny.toml --set run.name=$rn
    expect_out "--set run.name=$rn: error: run.name \"$rn\" contains '/'"
  done
done
[ ! -e "$tmp/escaped" ] && [ ! -e "$tmp/abs" ] && [ ! -e "$tmp/x" ] && [ ! -e runs ] ||
  fail "a refused run name created a directory"
# A sweep's name is the folder runs/sweeps/<name>: the same rule, at its value.
printf '[sweep]\nname = "../../escaped_sweep"\nbase = "%s"\n[[sweep.axis]]\nkey = "optim.lr"\ngrid = [0.01, 0.02]\n' \
  "$tmp/tiny.toml" >sw.toml
expect_rc 2 -- "$vexp" sweep sw.toml --dry-run
expect_out "sw.toml:2:1: error: [sweep] name \"../../escaped_sweep\" contains '/'"
expect_out "a sweep name is one folder name under runs/sweeps/"
expect_rc 2 -- "$vexp" sweep sw.toml
[ ! -e "$tmp/escaped_sweep" ] && [ ! -e runs ] || fail "a refused sweep name created a directory"
# No run.name (the quickstart base sets one: unset it): the recipe file's stem is
# the name, as before.
{ echo 'unset = ["run.name"]'; sed '/^name = /d' ../tiny.toml; } >stem_named.toml
expect_rc 0 -- "$vexp" check stem_named.toml
expect_rc 0 -- "$vexp" run stem_named.toml --set run.epochs=1
[ -f runs/stem_named/summary.json ] || fail "the default name did not give runs/stem_named"
exit 0
