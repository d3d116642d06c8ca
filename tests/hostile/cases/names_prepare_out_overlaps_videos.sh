# `vexp data prepare --out` equal to, inside, or holding --videos: link mode made links
# inside the folder they point into (self-looping on the next run's index); --frames
# wrote frames among the videos. Refused, one line naming both paths. The same shape in
# `vexp data extract-frames`: a frame folder that would replace the video it is made
# from (an entry without extension, --out at the list's folder), and a frame list that
# would replace the video list.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids/sub
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p vids/aaaaaaaaaaa_000000_000010.mp4 || fail ffmpeg
printf 'label,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,train\n' >train.csv
printf 'label,youtube_id,time_start,time_end,split\n' >val.csv
for out in vids vids/sub/prep .; do
  expect_rc 1 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out "$out"
  expect_out "--out '$out' and --videos 'vids' overlap"
done
[ ! -e vids/videos ] && [ ! -e vids/sub/prep ] && [ ! -e videos ] || fail "something was prepared"
[ "$(find vids -type l | wc -l)" -eq 0 ] || fail "a link was made among the videos"
# extract-frames: "clip" (a video without extension) extracted into its own folder
cp vids/aaaaaaaaaaa_000000_000010.mp4 vids/clip
printf 'clip 0\n' >vids/list.txt
expect_rc 1 -- "$vexp" data extract-frames vids/list.txt --out vids
expect_out "vids/list.txt:1: the frame folder 'vids/clip' would replace the video 'vids/clip' it is made from"
cmp -s vids/clip vids/aaaaaaaaaaa_000000_000010.mp4 || fail "the video was replaced"
# the frame list OUT/LIST_frames.txt onto the list itself (here a hard link of it)
mkdir -p frames
printf 'aaaaaaaaaaa_000000_000010.mp4 0\n' >vids/l.txt
ln vids/l.txt frames/l_frames.txt
cp vids/l.txt list_before.txt
expect_rc 1 -- "$vexp" data extract-frames vids/l.txt --out frames
expect_out "the frame list 'frames/l_frames.txt' would replace the video list 'vids/l.txt'"
cmp -s vids/l.txt list_before.txt || fail "the video list was replaced"
no_crash
exit 0
