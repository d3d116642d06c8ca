# A derived expression of 50,000 nested parentheses overflowed the parser's stack:
# `vexp sweep --dry-run` died of SIGSEGV. Nesting is bounded (100 levels): one error
# at the value's file:line:col, and a message that does not quote 100 KB.
source "$(dirname "$0")/../lib.sh"
$PY - <<'PYEOF'
n = 50000
open("deep.toml", "w").write('[sweep]\nbase = "tiny.toml"\n[[sweep.axis]]\nkey = "optim.lr"\ngrid = [0.1]\n'
                             '[sweep.derived]\n"optim.weight_decay" = "' + "(" * n + "1" + ")" * n + '"\n'
                             '"optim.momentum" = "' + "-" * n + '0.9"\n')
PYEOF
expect_rc 2 -- timeout 60 "$vexp" sweep --dry-run deep.toml
expect_out "deep.toml:7:"
expect_out "nested more than 100 levels deep"
expect_out "deep.toml:8:"
[ "$(wc -c <"$tmp/out")" -lt 4000 ] || fail "the errors quote the whole expression ($(wc -c <"$tmp/out") bytes)"
no_crash
exit 0
