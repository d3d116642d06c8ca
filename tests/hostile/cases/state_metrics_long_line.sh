# A metrics.jsonl of one line without end (issue #36 item 5): the line reader looked
# for the newline from the start of the line after each 64 KiB read, so a 300 MB line
# took a minute of `vexp report` and one of 1 GiB (the documented bound of a log)
# about ten. Now each byte is looked at once, and a line longer than any record
# (16 MiB) is skipped and counted, not held in memory: the 1 GiB file below is read in
# seconds, and the records after the long line are still read.
source "$(dirname "$0")/../lib.sh"
mkdir r
printf '{"type":"step","epoch":1,"step":1,"global_step":1,"loss":1.5,"lr":0.1}\n' >r/metrics.jsonl
# Zero bytes up to 100 bytes short of 1 GiB (a sparse file: no disk space), then the
# end of that line and one more record.
truncate -s $(((1 << 30) - 100)) r/metrics.jsonl || { echo "SKIP: truncate cannot make a 1 GiB sparse file here"; exit 77; }
printf '\n{"type":"eval","epoch":1,"global_step":1,"top1":0.5,"top5":1,"val_loss":1.2}\n' >>r/metrics.jsonl
[ "$(stat -c %s r/metrics.jsonl)" -le $((1 << 30)) ] || fail "the test file is past the 1 GiB bound"
printf '{"name":"r","status":"done","top1":0.5,"top5":1}\n' >r/summary.json
start=$SECONDS
expect_rc 0 -- timeout 120 "$vexp" report r --out r.html
echo "vexp report of a 1 GiB line: $((SECONDS - start)) s"
m="$tmp/r/metrics.jsonl"
expect_out "vexp: warning: skipped 1 line of '$m' ($m:2: a line of $(((1 << 30) - 100 - 71)) bytes, more than the 16777216 a record may have)"
[ "$(grep -c . "$tmp/out")" = 3 ] || fail "more than the warning and the report's lines: $(cat "$tmp/out")"
grep -q "0.5" r.html || fail "the eval record after the long line is missing from the report"
no_crash
exit 0
