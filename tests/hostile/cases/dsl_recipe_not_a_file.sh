# A recipe, an `extends` base or a sweep file that is not a regular file of at most
# 16 MiB: /dev/zero used to be read until memory ran out (~0.7 GB/s), a FIFO blocked
# forever. Each is now one located line and exit 2, at once.
source "$(dirname "$0")/../lib.sh"
mkfifo pipe.toml
mkdir folder.toml
truncate -s $((16 * 1024 * 1024 + 1)) big.toml   # sparse: instant
for target in /dev/zero "$tmp/pipe.toml" "$tmp/folder.toml" "$tmp/big.toml"; do
  case $target in
    /dev/zero) why="is a character device, not a regular file" ;;
    *pipe*) why="is a FIFO, not a regular file" ;;
    *folder*) why="is a directory" ;;
    *big*) why="is 16777217 bytes; a recipe file may have at most 16 MiB (16777216 bytes)" ;;
  esac
  # As a base: located at the extends value.
  { printf '# evil\nextends = "%s"\n' "$target"; sed '/^extends/d' tiny.toml; } >evil.toml
  expect_rc 2 -- timeout 20 "$vexp" check evil.toml
  expect_out "evil.toml:2:1: error: cannot read base recipe '$target': $why"
  no_crash
  # As the recipe itself: one line naming the file.
  expect_rc 2 -- timeout 20 "$vexp" check "$target"
  expect_out "cannot read recipe '$target': $why"
  [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out" >&2; fail "more than one line for $target"; }
  expect_rc 2 -- timeout 20 "$vexp" run "$target"
  expect_out "cannot read recipe '$target': $why"
  # As a sweep file (read by the same loader).
  expect_rc 2 -- timeout 20 "$vexp" sweep "$target" --dry-run
  expect_out "'$target': $why"
  no_crash
done
[ ! -e runs ] || fail "a refused recipe created runs/"
exit 0
