# A 2 GB file given as weights was read whole, twice (7.5 GB resident, minutes),
# before its format was checked. Its first bytes (or, for a zip, its last 64 KB)
# decide now: refused at once, in little memory. The files are sparse: no disk used.
source "$(dirname "$0")/../lib.sh"
$PY -c 'import torch; torch.save(torch.rand(4, 1, 16, 16), "clip.pt")' || fail "python could not write the clip"
truncate -s 2G zeros.pth
printf 'PK\003\004' >zip.pth && truncate -s 2G zip.pth
printf '\200\002' >pickle.pth && truncate -s 2G pickle.pth
# Peak resident memory in KB of "$@" (GNU time when there is one, else the kernel's
# high-water mark read by a wrapper shell).
peak_kb() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o rss.txt "$@" >"$tmp/out" 2>&1
    rc=$?
    tail -n 1 rss.txt
  else
    (limit_memory 3000000; exec "$@") >"$tmp/out" 2>&1
    rc=$?
    echo 0
  fi
  return $rc
}
for f in zeros.pth zip.pth pickle.pth; do
  case $f in
    zeros.pth) why="it is neither a zip archive (torch.save's format) nor a pickle (its legacy format): it starts with bytes 00 00 00 00" ;;
    zip.pth) why="it has no zip end-of-directory record (truncated, or not a zip archive?)" ;;
    pickle.pth) why="unsupported pickle opcode 0x00 at byte 2 of the magic number pickle" ;;
  esac
  kb=$(peak_kb "$vexp" predict tiny.toml --weights "$f" --input clip.pt)
  rc=$?
  [ "$rc" -eq 1 ] || { cat "$tmp/out" >&2; fail "predict --weights $f exited $rc, expected 1"; }
  expect_out "'$f' is not a readable torch.save file: $why"
  no_crash
  [ "$kb" -lt 1000000 ] || fail "predict --weights $f peaked at $kb KB resident (the file is 2 GB)"
  kb=$(peak_kb "$vexp" export "$f" --to out.pth)
  [ $? -eq 1 ] || fail "export $f did not exit 1"
  expect_out "'$f' is not a readable checkpoint: $why"
  [ "$kb" -lt 1000000 ] || fail "export $f peaked at $kb KB resident"
done
echo "PASS [$name]"
