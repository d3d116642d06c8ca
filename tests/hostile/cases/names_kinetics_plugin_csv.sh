# The kinetics dataset builds a video's path from CSV fields (csv_path,
# "{label}/{id}_{start}_{end}.mp4"). A label "../../outside" made it read outside
# root; a TAB or NUL in a list path gave a path that is not the file meant. Each is
# refused with the list's file:line, and a BOM before the header is accepted.
source "$(dirname "$0")/../lib.sh"
mkdir -p k400/abseiling
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p k400/abseiling/aaaaaaaaaaa_000000_000010.mp4 || fail ffmpeg
cat >k.toml <<EOF
extends = "$src/recipes/quickstart/tsm_motion_video.toml"
[data.params]
root = "$tmp/k400"
train_list = "train.csv"
val_list = "val.csv"
format = "csv"
classes = 2
EOF
printf '\xef\xbb\xbflabel,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,val\n' >k400/val.csv
printf 'label,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,train\n' >k400/train.csv
expect_rc 0 -- "$vexp" data check k.toml   # the BOM of val.csv is no field
expect_out "data ok"
printf 'label,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,train\n"../../outside",aaaaaaaaaaa,0,10,train\n' >k400/train.csv
expect_rc 1 -- "$vexp" data check k.toml
expect_out "k400/train.csv:3: label '../../outside' cannot be a folder name: it holds a '/'"
printf 'label,youtube_id,time_start,time_end,split\nabseiling,"aa\taa",0,10,train\n' >k400/train.csv
expect_rc 1 -- "$vexp" data check k.toml
expect_out "k400/train.csv:2: youtube_id 'aa\\taa' cannot be part of a path: it holds a control character"
# A TSM list whose path holds a NUL
printf 'abseiling/aaaaaaaaaaa_000000_000010.mp4 8 0\nabseiling/a\0b.mp4 8 0\n' >k400/train.txt
sed -i 's/train_list = "train.csv"/train_list = "train.txt"/; s/format = "csv"/format = "auto"/' k.toml
printf 'abseiling/aaaaaaaaaaa_000000_000010.mp4 8 0\n' >k400/val.txt
sed -i 's/val_list = "val.csv"/val_list = "val.txt"/' k.toml
expect_rc 1 -- "$vexp" data check k.toml
expect_out "k400/train.txt:2: the path 'abseiling/a\\x00b.mp4' holds a control character"
no_crash
exit 0
