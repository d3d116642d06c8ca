# Labels ".", "..", with a TAB or a NUL: "."/".." put clips beside train/ and val/, a
# TAB split the resume journal's fields (every rerun redid the clip), a NUL cut the
# link's path (the list named a file that was not made). Each is refused at its line.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p vids/aaaaaaaaaaa_000000_000010.mp4 || fail ffmpeg
printf 'label,youtube_id,time_start,time_end,split\n' >val.csv
check_label() {  # LABEL-AS-CSV-FIELD EXPECTED-TEXT
  printf 'label,youtube_id,time_start,time_end,split\nabseiling,bbbbbbbbbbb,0,10,train\n%s,aaaaaaaaaaa,0,10,train\n' "$1" >train.csv
  expect_rc 1 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out prep
  expect_out "train.csv:3: label '$2' cannot be a folder name"
  [ ! -e prep/videos ] || fail "label $2: something was prepared"
  rm -rf prep
}
check_label '..' '..'
check_label '.' '.'
check_label '"."""' '."'   # mmaction's name drops quotes: '."' becomes '.'
check_label "$(printf 'a\tb')" 'a\tb'
# A NUL inside a field (printf's \0 cannot travel through a shell variable).
printf 'label,youtube_id,time_start,time_end,split\nab\0cd,aaaaaaaaaaa,0,10,train\n' >train.csv
expect_rc 1 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out prep
expect_out "train.csv:2: label 'ab\\x00cd' cannot be a folder name: it holds a NUL byte"
# A youtube_id becomes the clip's file name: the same rule.
printf 'label,youtube_id,time_start,time_end,split\nabseiling,"aa\tbb",0,10,train\n' >train.csv
expect_rc 1 -- "$vexp" data prepare kinetics400 --train-csv train.csv --val-csv val.csv --videos vids --out prep
expect_out "train.csv:2: youtube_id 'aa\\tbb' cannot be part of a path: it holds a control character"
no_crash
exit 0
