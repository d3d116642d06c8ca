# `vexp data prepare --frames` replaces each clip's frame folder (remove_all). A label
# "../../../../victim" made it delete victim/<clip>/ outside --out and fill it with
# frames. The label is refused (file:line) and the victim survives.
source "$(dirname "$0")/../lib.sh"
clip=aaaaaaaaaaa_000000_000010
mkdir -p vids "victim/$clip" work
echo precious >"victim/$clip/keep.txt"
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p "vids/$clip.mp4" || fail ffmpeg
printf 'label,youtube_id,time_start,time_end,split\n"../../../../victim",aaaaaaaaaaa,0,10,train\n' >train.csv
printf 'label,youtube_id,time_start,time_end,split\n' >val.csv
expect_rc 1 -- "$vexp" data prepare kinetics400 --frames --train-csv train.csv --val-csv val.csv --videos vids --out work/out
expect_out "train.csv:2: label '../../../../victim' cannot be a folder name"
[ "$(cat "victim/$clip/keep.txt" 2>/dev/null)" = precious ] || fail "the victim folder outside --out was removed"
[ ! -e "victim/$clip/img_00001.jpg" ] || fail "frames were written outside --out"
no_crash
exit 0
