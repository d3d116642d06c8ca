# The trust file (issue #27 item 5): no path can forge another entry, concurrent
# `vexp trust` commands all take effect, and a removal cannot be undone by an
# addition running at the same time.
source "$(dirname "$0")/../lib.sh"
trustfile="$XDG_CONFIG_HOME/vexp/trusted-plugin-dirs"
entries() { "$vexp" trust --list 2>/dev/null; }

# A newline in a path: refused with one line, and the folder after the newline is
# not trusted.
mkdir -p "$tmp/x
$tmp/victim" "$tmp/victim"
expect_rc 2 -- "$vexp" trust "$tmp/x
$tmp/victim"
expect_out "control character"
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "more than one line: $(cat "$tmp/out")"
entries | grep -qx "$tmp/victim" && fail "the newline forged a trust entry for $tmp/victim"

# A trailing space is part of a name: "sp " is trusted as itself, never as "sp".
mkdir -p "sp " sp
expect_rc 0 -- "$vexp" trust "sp "
expect_out "trusted: '$tmp/sp '"
entries | grep -qx "$tmp/sp" && fail "trusting 'sp ' trusted '$tmp/sp'"
entries | grep -qxF "'$tmp/sp '" || fail "'sp ' is not listed: $(entries)"
mkdir -p only
expect_rc 2 -- "$vexp" trust "only "
expect_out "space at its start or end"
entries | grep -qx "$tmp/only" && fail "trusting the missing 'only ' trusted '$tmp/only'"
expect_rc 0 -- "$vexp" trust --remove "sp "

# The first format (one bare path per line) is still read; a quote or a space in
# an old entry stays part of it.
printf '# old\n%s\n%s \n' "$tmp/sp" "$tmp/only" >"$trustfile"
entries | grep -qx "$tmp/sp" || fail "an entry of the first format was not read: $(entries)"
entries | grep -qx "$tmp/only" && fail "an old entry with a trailing space was read as another folder"
rm -f "$trustfile"

# 20 at once: 20 entries.
pids=()
for i in $(seq 1 20); do
  mkdir -p "d$i"
  "$vexp" trust "d$i" >/dev/null 2>"$tmp/err$i" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent vexp trust failed: $(cat "$tmp"/err*)"; done
n=$(entries | grep -c "^$tmp/d[0-9]*$")
[ "$n" = 20 ] || fail "20 concurrent vexp trust left $n entries"

# --remove racing additions: what it reports removed stays removed.
for round in 1 2 3 4 5; do
  "$vexp" trust d1 >/dev/null
  "$vexp" trust --remove d1 >"$tmp/rm.out" 2>&1 & rp=$!
  "$vexp" trust "d$((round + 1))" >/dev/null 2>&1 & tp=$!
  wait "$rp"; rc=$?; wait "$tp"
  if [ "$rc" = 0 ]; then
    grep -q "no longer trusted: d1" "$tmp/rm.out" || fail "remove said: $(cat "$tmp/rm.out")"
    entries | grep -qx "$tmp/d1" && fail "round $round: 'no longer trusted: d1' was printed but d1 is still trusted"
  fi
done

# A trust file that is a FIFO: `vexp trust` says so in one line, other commands
# trust nothing from it and do not hang.
rm -f "$trustfile"; mkfifo "$trustfile"
expect_rc 1 -- timeout 120 "$vexp" trust --list
expect_out "FIFO"
expect_rc 0 -- timeout 120 "$vexp" check tiny.toml
no_crash
exit 0
