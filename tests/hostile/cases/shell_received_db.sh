# A sweep directory received from someone else: its sweep.db says what the sweep,
# its parameters and its trials' statuses are called, and `vexp report DIR --png`
# draws them. Names that close a gnuplot string, backquotes, newlines that start a
# gnuplot shell line (!cmd), and statuses that break a data file's columns must be
# shown as text: nothing runs, every PNG is drawn, and the terminal gets no raw ESC.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
cat >sw.toml <<EOF
[sweep]
name = "plain"
base = "$tmp/tiny.toml"
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
EOF
expect_rc 0 -- "$vexp" sweep sw.toml --out s --no-report
$PY - s/sweep.db <<'PY' || fail "could not edit sweep.db"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
evil = "x'; system('touch VICTIM_db1'); 'a`touch VICTIM_db2`b\n!touch VICTIM_db3\n\x1b]0;owned\x07\x1b[2J"
db.execute("UPDATE meta SET value=? WHERE key='name'", (evil,))
# The received file need not carry vexp's CHECK on statuses: a table of its own.
cols = [r[1] for r in db.execute("PRAGMA table_info(trials)")]
db.execute("CREATE TABLE t2 AS SELECT * FROM trials")
db.execute("DROP TABLE trials")
db.execute("ALTER TABLE t2 RENAME TO trials")
for i, (tid, params) in enumerate(db.execute("SELECT id, params FROM trials").fetchall()):
    p = json.loads(params)
    p["k'; system('touch VICTIM_key'); '`touch VICTIM_key2`"] = "v'\n!touch VICTIM_val %d" % i
    db.execute("UPDATE trials SET params=? WHERE id=?", (json.dumps(p), tid))
db.execute("UPDATE trials SET status=? WHERE id=2", ('fail"ed\n!touch VICTIM_status\x1b[2J',))
db.commit()
PY
expect_rc 0 -- "$vexp" report s --png png --out r.html
no_crash
find "$tmp" -name 'VICTIM*' | grep -q . && { find "$tmp" -name 'VICTIM*' >&2; fail "a name from sweep.db ran a command"; }
for p in heatmap curves throughput linear_scaling; do
  head -c 8 "png/$p.png" 2>/dev/null | od -An -c | grep -q "P   N   G" || fail "no $p.png"
done
# The table of a received sweep: no raw control characters reach the terminal.
expect_rc 0 -- "$vexp" results s
if LC_ALL=C grep -q $'\x1b' "$tmp/out"; then fail "vexp results printed a raw ESC"; fi
expect_out 'fail"ed\n!touch VICTIM_status\e[2J'
exit 0
