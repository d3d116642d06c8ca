# A directory given as a Kinetics list file was reported as "does not exist" at the
# [data.params] table. It now says "is a directory", at the train_list value.
source "$(dirname "$0")/../lib.sh"
mkdir -p k400/lists.d
printf 'a.mp4 0\n' >k400/val.txt
cat >k.toml <<EOF
extends = "$src/recipes/quickstart/tsm_motion_video.toml"
[data.params]
root = "$tmp/k400"
train_list = "lists.d"
val_list = "val.txt"
EOF
expect_rc 2 -- "$vexp" check k.toml   # checking: an error, as for vexp run
expect_out "k.toml:4:1: error: dataset 'kinetics': train_list: list file '$tmp/k400/lists.d' is a directory, not a file"
expect_rc 0 -- "$vexp" check --no-data k.toml   # without the data: a warning
expect_out "k.toml:4:1: warning: dataset 'kinetics': train_list: list file '$tmp/k400/lists.d' is a directory, not a file"
expect_rc 2 -- "$vexp" run k.toml      # running: an error, nothing started
expect_out "k.toml:4:1: error: dataset 'kinetics': train_list: list file '$tmp/k400/lists.d' is a directory, not a file"
expect_no_out "does not exist"
[ ! -e runs ] || fail "a refused run created runs/"
no_crash
exit 0
