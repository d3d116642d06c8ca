# 200,000 unknown tables: validation was quadratic (10,000 took 0.4 s, 200,000 did not
# finish in 60 s). Now linear: every error is counted, the first 100 are shown and
# one note counts the rest. The timeout catches a return of quadratic behaviour.
source "$(dirname "$0")/../lib.sh"
cp tiny.toml many.toml
$PY - <<'PY' >>many.toml
import sys
sys.stdout.write("".join(f"\n[unknown_{i}]\nx = {i}\n" for i in range(200000)))
PY
expect_rc 2 -- timeout 60 "$vexp" check many.toml
expect_out "error: unknown section 'unknown_0'"
expect_out "note: ... and 199900 more errors (not shown)"
expect_out "many.toml: 200000 errors"
expect_no_out "unknown section 'unknown_100'"   # the 101st is counted, not shown
lines=$(wc -l <"$tmp/out")
[ "$lines" -le 110 ] || fail "$lines lines of output for 200000 errors"
no_crash
# 100,000 [[model.node]] tables with an unknown op: node lookups and the topological
# order were quadratic too (20,000 nodes took 5 s).
printf '[data]\ndataset = "synthetic_motion"\n\n[model]\noutput = "n0"\n' >nodes.toml
$PY - <<'PY' >>nodes.toml
import sys
sys.stdout.write("".join(f'\n[[model.node]]\nid = "n{i}"\nop = "no_such_op"\nin = "clip"\n' for i in range(100000)))
PY
expect_rc 2 -- timeout 60 "$vexp" check nodes.toml
expect_out "nodes.toml: 100000 errors"
expect_out "more errors"
no_crash
exit 0
