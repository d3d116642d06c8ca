# Files of a run directory that are not regular files (issue #27 item 10): a FIFO,
# /dev/zero or /dev/urandom in place of metrics.jsonl, summary.json, resolved.toml or
# a trial's log: `vexp report`, `vexp compare` and `vexp results` end at once with
# one line naming the file, never hang or read without end.
source "$(dirname "$0")/../lib.sh"
mkrun() {  # a small finished-looking run directory
  rm -rf "$1"; mkdir -p "$1"
  printf '{"type":"step","epoch":1,"step":1,"global_step":1,"loss":1.5,"lr":0.1}\n{"type":"eval","epoch":1,"global_step":1,"top1":0.5,"top5":1,"val_loss":1.2}\n' >"$1/metrics.jsonl"
  printf '{"name":"r","status":"done","top1":0.5,"top5":1}\n' >"$1/summary.json"
  printf '# resolved recipe, hash 0\n[run]\nname = "r"\n' >"$1/resolved.toml"
}
check() {  # $1: what was put where, $2: the file named; then the command
  local what=$1 file=$2; shift 2
  expect_rc 1 -- timeout 120 "$@"
  expect_out "$file"
  expect_out "$what"
  [ "$(grep -c . "$tmp/out")" = 1 ] || fail "$*: more than one line: $(cat "$tmp/out")"
  no_crash
}
for f in metrics.jsonl summary.json resolved.toml; do
  mkrun r; rm r/$f; mkfifo r/$f
  check "a FIFO" "r/$f" "$vexp" report r --out r.html
  mkrun r; rm r/$f; ln -s /dev/zero r/$f
  check "character device" "r/$f" "$vexp" report r --out r.html
  mkrun r; rm r/$f; ln -s /dev/urandom r/$f
  check "character device" "r/$f" "$vexp" report r --out r.html
done
mkrun r; rm r/summary.json; mkfifo r/summary.json
check "a FIFO" "r/summary.json" "$vexp" compare r
mkrun r; rm r/summary.json; ln -s /dev/zero r/summary.json
check "character device" "r/summary.json" "$vexp" compare r
# A failure record that is not a regular file is passed over, not waited on.
mkrun r; mkdir -p r/failures; mkfifo r/failures/rank_0.txt; rm r/summary.json
expect_rc 0 -- timeout 120 "$vexp" report r --out r.html
# A trial's log.txt (read for the trial's last error).
mkrun r; rm r/summary.json; mkfifo r/log.txt
check "a FIFO" "r/log.txt" "$vexp" report r --out r.html
mkrun r
expect_rc 0 -- timeout 120 "$vexp" report r --out r.html
exit 0
