# Strings of a cluster file (issue #36 item 6): its name, the GPU's name and every
# `source` reached the terminal raw through `vexp plan` and `vexp check` (an OSC
# sequence retitled the window, ESC [2J cleared the screen), and a newline in the
# name ended the comment `vexp plan --tune` writes, so the next line became a key of
# the overlay. Now every human-readable output escapes them (\e, \n, \x07), as run
# names are; diagnostics quoting a value from the file do too, and `vexp status`
# escapes the run directory's name.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
raw_esc() { LC_ALL=C grep -q $'[\x1b\x07]' "$tmp/out"; }
evil='\u001b]0;owned\u0007\u001b[2J'   # TOML escapes: ESC ] 0 ; owned BEL ESC [ 2 J
c=$'c\e]0;file\a.toml'   # the cluster file's own name
$PY - "$src/tests/cli/data/plan_cluster.toml" "$c" "$evil" <<'PY' || fail "could not write the cluster file"
import sys
text, out, evil = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
text = text.replace('name = "test cluster"', 'name = "C%s\\ninjected = 1"' % evil)
text = text.replace('name = "Test GPU"', 'name = "G%s"' % evil)
text = text.replace('source = "made up for the tests"', 'source = "S%s\\nsecond line"' % evil)
open(out, "w").write(text)
PY
grep -q 'u001b' "$c" || fail "the cluster file was not made"
expect_rc 0 -- "$vexp" check "$c"
raw_esc && fail "vexp check printed a raw ESC or BEL: $(cat -v "$tmp/out")"
expect_out 'c\e]0;file\x07.toml: ok (cluster '"'"'C\e]0;owned\x07\e[2J\ninjected = 1'"'"
expect_out '(G\e]0;owned\x07\e[2J)'
[ "$(grep -c . "$tmp/out")" = 1 ] || fail "vexp check: more than one line: $(cat -v "$tmp/out")"
t=$'t\e[2J.toml'
expect_rc 0 -- "$vexp" plan "$tmp/tiny.toml" --cluster "$c" --gpus 1,2 --tune "$t"
raw_esc && fail "vexp plan printed a raw ESC or BEL: $(cat -v "$tmp/out")"
expect_out "on 'C\\e]0;owned\\x07\\e[2J\\ninjected = 1' (c\\e]0;file\\x07.toml, 4 nodes x 2 G\\e]0;owned\\x07\\e[2J)"
expect_out '(S\e]0;owned\x07\e[2J\nsecond line)'
expect_out 'overlay: t\e[2J.toml'
grep -q '^second line' "$tmp/out" && fail "a newline in a source reached the terminal raw"
# The overlay is a recipe: the name stays inside its comment.
LC_ALL=C grep -q $'\x1b' "$t" && fail "the --tune overlay holds a raw ESC"
grep -q '^injected' "$t" && fail "a newline in the cluster name wrote a key into the --tune overlay: $(cat "$t")"
expect_rc 0 -- "$vexp" check "$t"
# A diagnostic quoting a value of the file.
printf '[cluster]\nname = "x"\nnodes = 1\ngpus_per_node = 1\n[gpu]\nname = "g"\n[[gpu.profile]]\nmodel = "m"\nfrom = "%s.json"\n' "$evil" >bad.toml
expect_rc 2 -- "$vexp" check bad.toml
raw_esc && fail "a diagnostic printed a raw ESC or BEL: $(cat -v "$tmp/out")"
expect_out "bad.toml:9:1: error: 'from' = \"\\e]0;owned\\x07\\e[2J.json\""
# vexp status on a run directory whose name holds the sequences.
d=$'run\e]0;owned\a\e[2J'
mkdir "$d"
expect_rc 0 -- "$vexp" status "$d"
raw_esc && fail "vexp status printed a raw ESC or BEL: $(cat -v "$tmp/out")"
expect_out 'run\e]0;owned\x07\e[2J/jobs.jsonl'
no_crash
exit 0
