# A CSV saved by a spreadsheet starts with a UTF-8 byte order mark; the header check
# failed with a message whose text hid the BOM ("expected the header ..., got
# 'label,youtube_id,...'"). The BOM is accepted, in the CSVs, the label map and lists.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p vids/aaaaaaaaaaa_000000_000010.mp4 || fail ffmpeg
printf '\xef\xbb\xbflabel,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,train\n' >train.csv
printf '\xef\xbb\xbflabel,youtube_id,time_start,time_end,split\n' >val.csv
printf '\xef\xbb\xbfabseiling\n' >map.txt
expect_rc 0 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --label-map map.txt --videos vids --out prep
expect_out "train: 1 listed, 0 missing, 0 undecodable"
grep -qx 'abseiling' prep/classes.txt || fail "the label map's first name kept its BOM"
# A video list for extract-frames
cp vids/aaaaaaaaaaa_000000_000010.mp4 vids/a.mp4
printf '\xef\xbb\xbfa.mp4 3\n' >vids/list.txt
expect_rc 0 -- "$vexp" data extract-frames vids/list.txt --out frames
[ -f frames/a/img_00001.jpg ] || fail "the list's first entry kept its BOM"
no_crash
exit 0
