# Link-mode `vexp data prepare` probed 3 frames and listed truncated and mid-file
# corrupt videos as good (the --reencode mode then reported "frame N of M could not
# be decoded"). A good video is one whose every frame decodes, in every mode and in
# `vexp data check`; the summary says what was checked.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids
mk() { ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 100 -g 250 -pix_fmt yuv420p -movflags +faststart "vids/$1.mp4" || fail ffmpeg; }
mk aaaaaaaaaaa_000000_000010
mk bbbbbbbbbbb_000000_000010
mk ccccccccccc_000000_000010
# b: the last 30% cut off (the index at the front still lists every frame).
size=$(stat -c %s vids/bbbbbbbbbbb_000000_000010.mp4)
truncate -s $((size * 7 / 10)) vids/bbbbbbbbbbb_000000_000010.mp4
printf 'label,youtube_id,time_start,time_end,split\nabseiling,aaaaaaaaaaa,0,10,train\nabseiling,bbbbbbbbbbb,0,10,train\n' >train.csv
printf 'label,youtube_id,time_start,time_end,split\nabseiling,ccccccccccc,0,10,val\n' >val.csv
expect_rc 0 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out prep
expect_out "train: 1 listed, 0 missing, 1 undecodable"
expect_out "checked: every frame of every listed video decoded"
grep -q bbbbbbbbbbb prep/train_videofolder.txt && fail "the truncated video is listed as good"
grep -q "^undecodable.*bbbbbbbbbbb.*could not be decoded" prep/prepare_report.txt || { cat prep/prepare_report.txt; fail "the report does not say why"; }
# --reencode agrees (one definition of a good video).
expect_rc 0 -- "$vexp" data prepare kinetics400 --reencode --train-csv train.csv --val-csv val.csv --videos vids --out prep2
expect_out "train: 1 listed, 0 missing, 1 undecodable"
no_crash
exit 0
