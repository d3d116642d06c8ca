# `vexp check|run --plugin-path DIR RECIPE --set ...` failed with "recipe is required":
# the option took several values and swallowed the recipe. It now takes exactly one
# folder per occurrence (repeatable), in every spelling the docs use.
source "$(dirname "$0")/../lib.sh"
mkdir -p p1 p2
expect_rc 0 -- "$vexp" check --plugin-path p1 tiny.toml --set run.epochs=1
expect_out "tiny.toml: ok"
expect_rc 0 -- "$vexp" check --plugin-path=p1 tiny.toml --set run.epochs=1
expect_out "tiny.toml: ok"
expect_rc 0 -- "$vexp" check --plugin-path p1 --plugin-path p2 tiny.toml
expect_out "tiny.toml: ok"
expect_rc 0 -- "$vexp" check tiny.toml --plugin-path p1 --set run.epochs=1
expect_out "tiny.toml: ok"
expect_rc 0 -- "$vexp" run --plugin-path p1 tiny.toml --dry-run
expect_out "plan of tiny.toml"
expect_rc 0 -- "$vexp" info --plugin-path p1 tiny.toml
printf '[sweep]\nbase = "tiny.toml"\n[[sweep.axis]]\nkey = "optim.lr"\ngrid = [0.1]\n' >s.toml
expect_rc 0 -- "$vexp" sweep --plugin-path p1 s.toml --dry-run
expect_out "1 trials, every recipe valid"
# Two folders after one --plugin-path: the second is not a folder to load.
expect_rc 2 -- "$vexp" check --plugin-path p1 p2 tiny.toml
expect_no_out "recipe is required"
no_crash
exit 0
