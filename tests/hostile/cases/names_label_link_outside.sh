# A label of the Kinetics CSV is a folder name. "../../../../victim/x" made link-mode
# `vexp data prepare` create a symlink outside --out (the label climbed out of
# OUT/videos/train/). Labels must be one path component: refused with the CSV's file:line.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids victim work
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p vids/aaaaaaaaaaa_000000_000010.mp4 || fail ffmpeg
printf 'label,youtube_id,time_start,time_end,split\n"../../../../victim/x",aaaaaaaaaaa,0,10,train\n' >train.csv
printf 'label,youtube_id,time_start,time_end,split\n' >val.csv
expect_rc 1 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out work/out
expect_out "train.csv:2: label '../../../../victim/x' cannot be a folder name: it holds a '/'"
[ -z "$(ls -A victim)" ] || fail "something was made in the victim folder: $(ls -A victim)"
[ ! -e "$tmp/x" ] || fail "a link was made outside --out"
no_crash
exit 0
