# A video list naming a FIFO (issue #36 item 5): FFmpeg opened the entry for reading
# and waited for a writer, so `vexp data check` and `vexp data extract-frames` hung;
# a FIFO in place of a frame of a frame folder did the same in the JPEG reader. Now
# each entry is opened without waiting and read only when it is a regular file: the
# entry is one bad item naming it ("... is a FIFO, not a regular file"), at once.
source "$(dirname "$0")/../lib.sh"
mkdir -p v
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 16 -pix_fmt yuv420p v/good.mp4 || fail ffmpeg
mkfifo v/fifo.mp4
printf 'good.mp4 16 0\nfifo.mp4 16 1\n' >v/list.txt
expect_rc 1 -- timeout 60 "$vexp" data extract-frames v/list.txt --out f --workers 1
expect_out "vexp: warning: 'v/fifo.mp4' is a FIFO, not a regular file"
expect_out "extracted 1 video(s), 0 already done, 1 failed"
expect_out "vexp: error: 1 video(s) could not be extracted"
[ "$(ls f/good | wc -l)" -eq 16 ] || fail "the good video was not extracted"
# The same list in a recipe (video files), and a frame folder whose first frame is a FIFO.
cp -r f/good v/frames && rm v/frames/img_00001.jpg && mkfifo v/frames/img_00001.jpg
printf 'good.mp4 16 0\nfifo.mp4 16 1\nframes 16 1\n' >v/list.txt
cat >k.toml <<EOF
extends = "$src/recipes/quickstart/tsm_motion_video.toml"
[data.params]
root = "$tmp/v"
train_list = "list.txt"
val_list = "list.txt"
classes = 2
EOF
expect_rc 1 -- timeout 60 "$vexp" data check k.toml --workers 1
expect_out "BAD '$tmp/v/fifo.mp4' is a FIFO, not a regular file"
expect_out "BAD '$tmp/v/frames/img_00001.jpg' is a FIFO, not a regular file"
expect_out "ok 1, bad 2"
no_crash
exit 0
