# JSON of the wrong type in a run directory (issue #27 item 15): a metrics.jsonl
# line that is valid JSON but not a record of the right types is skipped and
# counted, naming file:line; a summary.json key of the wrong type names the file
# and the key. Never a bare [json.exception...].
source "$(dirname "$0")/../lib.sh"
mkdir r
cat >r/metrics.jsonl <<'EOF'
{"type":"step","epoch":1,"step":1,"global_step":1,"loss":1.5,"lr":0.1}
{"type":"step","global_step":"abc"}
[1,2,3]
{"type":5}
{"type":"eval","epoch":1,"global_step":1,"top1":0.5,"top5":1,"val_loss":1.2}
{"type":"eval","epoch":"x"}
{"type":"step","epoch":1,"st
EOF
expect_rc 0 -- "$vexp" report r --out r.html
m="$tmp/r/metrics.jsonl"
expect_out "skipped 5 lines of '$m' ($m:2: key 'global_step' is a string, expected a number; $m:3: a JSON array, not an object; $m:4: key 'type' is a number, expected a string; $m:6: key 'epoch' is a string, expected a number; $m:7: not JSON)"
expect_no_out "json.exception"
grep -q "0.5" r.html || fail "the good eval line is missing from the report"

printf '{"name":5,"status":"done","top1":0.5}\n' >r/summary.json
expect_rc 1 -- "$vexp" report r --out r.html
expect_out "'$tmp/r/summary.json': key 'name' is a number, expected a string"
expect_no_out "json.exception"
expect_rc 1 -- "$vexp" compare r
expect_out "'r/summary.json': key 'name' is a number, expected a string"
printf '{"name":"r","status":"done","top1":"high"}\n' >r/summary.json
expect_rc 1 -- "$vexp" compare r
expect_out "'r/summary.json': key 'top1' is a string, expected a number"
printf '[1]\n' >r/summary.json
expect_rc 1 -- "$vexp" report r --out r.html
expect_out "'$tmp/r/summary.json' is an array, not a JSON object"
# NaN is written as null: it is a value, not an error.
printf '{"name":"r","status":"done","top1":0.5,"val_loss":null}\n' >r/summary.json
expect_rc 0 -- "$vexp" compare r
expect_rc 0 -- "$vexp" report r --out r.html
no_crash
exit 0
