# A run's name (summary.json) holding ESC / OSC sequences was printed raw by
# `vexp compare`: it retitled the terminal and cleared the screen. Error lines echoed
# control characters from arguments raw too. Both are shown escaped now.
source "$(dirname "$0")/../lib.sh"
mkdir -p a b
printf '{"name": "ok\\u001b]0;owned\\u0007\\u001b[2J\\u009b31m\\nnext", "top1": 0.5}\n' >a/summary.json
printf '{"name": "plain", "top1": 0.25}\n' >b/summary.json
expect_rc 0 -- "$vexp" compare a b
no_crash
if LC_ALL=C grep -q $'\x1b' "$tmp/out"; then fail "vexp compare printed a raw ESC"; fi
if LC_ALL=C grep -q $'\xc2\x9b' "$tmp/out"; then fail "vexp compare printed a raw C1 CSI"; fi
expect_out 'ok\e]0;owned\x07\e[2J\xc2\x9b31m\nnext'
# (compare also prints the runs' provenance now: count on the name, not the lines.)
if grep -q '^next' "$tmp/out"; then fail "a newline in a name added a line"; fi
# The same name twice: the folder tails that tell them apart are escaped as well.
mkdir -p "$(printf 'x\033[2J')" && cp a/summary.json "$(printf 'x\033[2J')/"
expect_rc 0 -- "$vexp" compare a "$(printf 'x\033[2J')"
if LC_ALL=C grep -q $'\x1b' "$tmp/out"; then fail "vexp compare printed a raw ESC from a folder name"; fi
# An error naming an argument with control characters: one line, escaped.
expect_rc 1 -- "$vexp" compare "$(printf 'no\033]0;t\007such\nrun')"
if LC_ALL=C grep -q $'\x1b' "$tmp/out"; then fail "an error line printed a raw ESC"; fi
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "the error is not one line"
expect_out "vexp: error: 'no\\e]0;t\\x07such\\nrun' has no summary.json"
exit 0
