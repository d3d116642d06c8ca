# A number too large for its type said "expected int, got string" after --set, and
# toml++'s "not representable in 64 bits" in a file. Both now say "out of range".
source "$(dirname "$0")/../lib.sh"
expect_rc 2 -- "$vexp" check tiny.toml --set run.epochs=99999999999999999999
expect_out "--set run.epochs=99999999999999999999: error: 'epochs' in [run]: 99999999999999999999 is out of range for a 64-bit integer"
expect_rc 2 -- "$vexp" run tiny.toml --set run.seed=-99999999999999999999
expect_out "-99999999999999999999 is out of range for a 64-bit integer"
expect_rc 2 -- "$vexp" check tiny.toml --set optim.lr=1e999
expect_out "'lr' in [optim]: 1e999 is out of range for a double"
# In the file: at the literal.
sed 's|^epochs = .*|epochs = 99999999999999999999|' tiny.toml >big.toml
line=$(grep -n '^epochs = ' big.toml | cut -d: -f1)
expect_rc 2 -- "$vexp" check big.toml
expect_out "big.toml:$line:10: error: 99999999999999999999 is out of range for a 64-bit integer"
no_crash
exit 0
