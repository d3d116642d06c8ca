# `vexp data extract-frames LIST --out DIR` replaces DIR/<entry without extension>.
# An entry "../important.mp4" removed the folder `important` beside DIR. Entries must
# be plain relative paths: refused with the list's file:line, the folder survives.
source "$(dirname "$0")/../lib.sh"
mkdir -p important videos
echo precious >important/keep.txt
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p important.mp4 || fail ffmpeg
printf 'ok.mp4 0\n../important.mp4 0\n' >videos/list.txt
cp important.mp4 videos/ok.mp4
expect_rc 1 -- "$vexp" data extract-frames videos/list.txt --out frames
expect_out "videos/list.txt:2: '../important.mp4': its part '..' cannot be a folder name"
[ "$(cat important/keep.txt 2>/dev/null)" = precious ] || fail "the folder 'important' outside --out was removed"
[ ! -e important/img_00001.jpg ] || fail "frames were written outside --out"
# A NUL would cut the path: the list would name a folder that was not made.
printf 'ok.mp4 0\nok\0evil.mp4 0\n' >videos/nul.txt
expect_rc 1 -- "$vexp" data extract-frames videos/nul.txt --out frames
expect_out "videos/nul.txt:2:"
expect_out "NUL"
no_crash
exit 0
