# A sweep's name, its [sweep] out folder and `vexp sweep --out` reach the PNG report:
# the name used to be pasted into the gnuplot script (a ' closed the string and
# gnuplot's system() ran), the folder into `gnuplot '...' > '...'` run by a shell
# (a ' ended the word and $(...) ran). Now gnuplot is started by argv, gets its
# folder as an argument and every name as a quoted gnuplot string: nothing runs,
# the PNGs are drawn.
source "$(dirname "$0")/../lib.sh"
mkdir work && cd work
victims() { find "$tmp" -name 'VICTIM*' | grep -q . && { find "$tmp" -name 'VICTIM*' >&2; fail "$1: a name ran a command"; }; return 0; }
pngs() {
  for p in heatmap curves throughput linear_scaling; do
    head -c 8 "$1/$p.png" 2>/dev/null | od -An -c | grep -q "P   N   G" || fail "$2: no $p.png in '$1'"
  done
}
out="$tmp/o'; touch VICTIM_out1; \$(touch VICTIM_out2) \`touch VICTIM_out3\` x"
cat >sw.toml <<EOF
[sweep]
name = "n'; system('touch VICTIM_name1'); 'a\`touch VICTIM_name2\`b"
base = "$tmp/tiny.toml"
out = '''$out'''
[sweep.set]
"run.epochs" = 1
[[sweep.axis]]
key = "optim.lr"
grid = [0.05, 0.1]
EOF
expect_rc 0 -- "$vexp" sweep sw.toml
no_crash
expect_no_out "gnuplot failed"
expect_out "plots: 4 PNG files"
victims "[sweep] name / [sweep] out"
pngs "$out/report" "[sweep] out"
# The same sweep again under `--out` with a newline, quotes and $(...) in the folder:
# resumed (nothing to run), the report drawn again.
cli_out="$tmp/c'
!touch VICTIM_cli1
\$(touch VICTIM_cli2); \`touch VICTIM_cli3\`"
cp -r "$out" "$cli_out"
expect_rc 0 -- "$vexp" sweep sw.toml --out "$cli_out"
expect_out "0 trials to run"
expect_out "plots: 4 PNG files"
victims "vexp sweep --out"
pngs "$cli_out/report" "--out"
# vexp report --png into such a folder (and --out for the HTML next to it).
png="$tmp/p'; touch VICTIM_png1; \$(touch VICTIM_png2)
!touch VICTIM_png3"
expect_rc 0 -- "$vexp" report "$out" --png "$png" --out "$tmp/r'\$(touch VICTIM_html).html"
victims "vexp report --png / --out"
pngs "$png" "--png"
[ -f "$tmp/r'\$(touch VICTIM_html).html" ] || fail "no HTML report at the quoted --out"
exit 0
