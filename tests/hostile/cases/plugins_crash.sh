# A plugin that dies of a fatal signal — in its constructor (inside dlopen), in
# register_all, in its factory, in a node's forward, by abort() — must not kill
# vexp silently (exit 139, nothing printed): one line naming the library and what
# it was doing, exit code 4. A fatal signal outside plugin code keeps the default.
source "$(dirname "$0")/../lib.sh"
ulimit -c 0   # the default-action case below must not leave a core file
fx="$build/tests/fixtures"
for f in crash_ctor crash_register crash_op; do
  [ -f "$fx/$f/fixture_$f.so" ] || fail "fixture not built: $fx/$f/fixture_$f.so"
done
one_line() {  # $1: text the single line must hold
  expect_out "$1"
  [ "$(grep -c '^vexp: fatal: ' "$tmp/out")" = 1 ] || { cat "$tmp/out" >&2; fail "expected exactly one 'vexp: fatal:' line"; }
  no_crash
}

# In its constructor, while dlopen runs it.
expect_rc 4 -- "$vexp" plugins --path "$fx/crash_ctor"
one_line "vexp: fatal: SIGSEGV in plugin library '$fx/crash_ctor/fixture_crash_ctor.so' while loading it (dlopen, its constructors)"
expect_rc 4 -- env VEXP_PLUGIN_PATH="$fx/crash_ctor" "$vexp" check tiny.toml
one_line "in plugin library '$fx/crash_ctor/fixture_crash_ctor.so' while loading it"

# In register_all.
expect_rc 4 -- "$vexp" check tiny.toml --plugin-path "$fx/crash_register"
one_line "vexp: fatal: SIGSEGV in plugin library '$fx/crash_register/fixture_crash_register.so' while registering its plugins (register_all)"

# An operator node: the factory, and the forward (vexp info runs one forward pass).
cat >crash.toml <<'TOML'
extends = "tiny.toml"
unset = ["model.rewrite"]

[[model.node]]
id = "frames"
op = "fold_time"
in = "clip"

[[model.node]]
id = "features"
op = "resnet"
in = "frames"
depth = 18
width = 0.125
in_channels = 1
stem = "cifar"

[[model.node]]
id = "boom"
op = "crash"
in = "features"
at = "${CRASH_AT:-forward}"

[[model.node]]
id = "head"
op = "classifier"
in = "boom"

[[model.node]]
id = "logits"
op = "segment_consensus"
in = "head"
TOML
lib="$fx/crash_op/fixture_crash_op.so"
expect_rc 0 -- env CRASH_AT=never "$vexp" info crash.toml --plugin-path "$fx/crash_op"
expect_rc 4 -- env CRASH_AT=factory "$vexp" info crash.toml --plugin-path "$fx/crash_op"
one_line "vexp: fatal: SIGSEGV in plugin library '$lib' while creating op 'crash' (its factory)"
expect_rc 4 -- "$vexp" info crash.toml --plugin-path "$fx/crash_op"
one_line "vexp: fatal: SIGSEGV in plugin library '$lib' while running op 'crash' of node 'boom'"
expect_rc 4 -- "$vexp" run crash.toml --plugin-path "$fx/crash_op" --out "$tmp/run"
one_line "vexp: fatal: SIGSEGV in plugin library '$lib' while running op 'crash' of node 'boom'"
expect_rc 4 -- env CRASH_AT=abort "$vexp" info crash.toml --plugin-path "$fx/crash_op"
one_line "vexp: fatal: SIGABRT in plugin library '$lib' while running op 'crash' of node 'boom'"

# Inserted into a backbone: the fault is in the operator's library, called by resnet.so.
printf 'extends = "tiny.toml"\n[[model.rewrite]]\nat = "features/layer1/block0/residual_in"\ninsert = { op = "crash" }\n' >inserted.toml
expect_rc 4 -- "$vexp" info inserted.toml --plugin-path "$fx/crash_op"
one_line "vexp: fatal: SIGSEGV in plugin library '$lib' while running backbone 'resnet' of node 'features'"

# A fatal signal that is not a plugin's: the default action, as before. (Under make
# sanitize, ASan's own SIGSEGV handler is switched off for this run: it would begin a
# report of the signal sent from outside before the default action.)
if asan_build; then export ASAN_OPTIONS="${ASAN_OPTIONS:-}:handle_segv=0"; fi
"$vexp" run tiny.toml --out "$tmp/long" --set run.epochs=50 >"$tmp/out" 2>&1 &
pid=$!
sleep 2
kill -SEGV "$pid"
wait "$pid" 2>/dev/null; rc=$?   # (the shell reports the default action on stderr)
[ "$rc" = 139 ] || { cat "$tmp/out" >&2; fail "kill -SEGV from outside: exit $rc, expected the default 139"; }
expect_no_out "vexp: fatal:"
exit 0
