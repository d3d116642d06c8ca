# A 100 KB run name was echoed twice in its error (once in the --set location, once
# in the message), and in full: the error is one cut line now.
source "$(dirname "$0")/../lib.sh"
long=$(head -c 100000 /dev/zero | tr '\0' 'y')
expect_rc 2 -- "$vexp" check tiny.toml --set "run.name=$long"
no_crash
expect_out "run.name"
expect_out "is longer than 255 bytes"
[ "$(wc -c <"$tmp/out")" -lt 2000 ] || fail "the error echoes the name in full ($(wc -c <"$tmp/out") bytes)"
[ "$(grep -o 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy*' "$tmp/out" | wc -l)" -eq 1 ] || fail "the error echoes the name more than once"
sed "s|^name = .*|name = \"$long\"|" tiny.toml >long.toml
expect_rc 2 -- "$vexp" check long.toml
expect_out "is longer than 255 bytes"
[ "$(wc -c <"$tmp/out")" -lt 2000 ] || fail "the recipe error echoes the name in full ($(wc -c <"$tmp/out") bytes)"
exit 0
