# `vexp submitt --help` printed the main help and exited 0, so a typo in a script's
# command passed. An unknown command is exit 2 with a suggestion, with or without --help.
source "$(dirname "$0")/../lib.sh"
expect_rc 2 -- "$vexp" swep --help
expect_out "vexp: error: unknown command 'swep' (did you mean 'sweep'?)"
expect_rc 2 -- "$vexp" chek tiny.toml
expect_out "unknown command 'chek' (did you mean 'check'?)"
expect_rc 2 -- "$vexp" $'\e]0;x\a' --help
expect_no_out $'\e'
expect_rc 2 -- "$vexp" zzzzzzzz
expect_out "unknown command 'zzzzzzzz'"
expect_rc 0 -- "$vexp" check --help
expect_rc 0 -- "$vexp" --help
no_crash
exit 0
