# `vexp data extract-frames LIST --out DIR` and what lies in DIR (issue #36 item 7.2).
# It removed a regular file inside --out that had a frame folder's name; it mapped two
# entries with one stem (a.mp4, a.avi) to one folder, the second replacing the first;
# and it counted any folder of a frame folder's name as "already done" (an unrelated
# folder, or one extracted from another video, went into the frame list). Now a folder
# is done only when the command's own journal (DIR/.vexp_extract/journal.tsv) says it
# finished it for the same source and settings, and nothing it did not make is removed.
source "$(dirname "$0")/../lib.sh"
mkdir -p vids
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 8 -pix_fmt yuv420p vids/a.mp4 || fail ffmpeg
ffmpeg -v error -f lavfi -i testsrc2=size=64x48:rate=25 -frames:v 5 -pix_fmt yuv420p vids/b.mp4 || fail ffmpeg
one_line() { [ "$(grep -c . "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "not one line"; }; }

# (a) A regular file with a frame folder's name: refused, kept.
printf 'a.mp4 0\nb.mp4 1\n' >vids/list.txt
mkdir -p f1 && echo precious >f1/a
expect_rc 1 -- "$vexp" data extract-frames vids/list.txt --out f1
expect_out "vexp: error: 'f1/a' is a regular file, not a frame folder this command made (vids/list.txt:1: 'a.mp4'); vexp data extract-frames never removes a file it did not make: move it away or choose another --out; nothing extracted"
one_line
[ "$(cat f1/a)" = precious ] || fail "the file f1/a was removed"
[ ! -e f1/b ] || fail "something was extracted"
# ... and a symbolic link in its place, or at its .partial name.
mkdir -p elsewhere && rm f1/a && ln -s "$tmp/elsewhere" f1/a
expect_rc 1 -- "$vexp" data extract-frames vids/list.txt --out f1
expect_out "'f1/a' is a symbolic link, not a frame folder this command made"
rm f1/a && echo precious >f1/b.partial
expect_rc 1 -- "$vexp" data extract-frames vids/list.txt --out f1
expect_out "'f1/b.partial' is a regular file, not a frame folder this command made (vids/list.txt:2: 'b.mp4')"
[ "$(cat f1/b.partial)" = precious ] || fail "the file f1/b.partial was removed"

# (b) Two entries with one stem, and a folder inside another's: refused naming both lines.
printf 'a.mp4 0\nb.mp4 1\nsub/a.avi 1\na.avi 2\n' >vids/dup.txt
expect_rc 1 -- "$vexp" data extract-frames vids/dup.txt --out f2
expect_out "vexp: error: vids/dup.txt:4: 'a.avi' and line 1's 'a.mp4' have one frame folder 'a' (the path without its extension): one would replace the other; rename one"
one_line
printf 'a/x.mp4 0\na.mp4 1\n' >vids/nest.txt
expect_rc 1 -- "$vexp" data extract-frames vids/nest.txt --out f2
expect_out "vexp: error: vids/nest.txt:1: the frame folder 'a/x' of 'a/x.mp4' lies inside the frame folder 'a' of line 2's 'a.mp4', which is replaced when extracted; rename one"
[ ! -e f2/a ] || fail "something was extracted"

# (c) An unrelated folder of a frame folder's name is not "already done" (nor removed).
mkdir -p f3/a && echo mine >f3/a/notes.txt
expect_rc 1 -- "$vexp" data extract-frames vids/list.txt --out f3
expect_out "vexp: error: 'f3/a' is a folder this command did not make ('f3/.vexp_extract/journal.tsv' has no record of it) (vids/list.txt:1: 'a.mp4'); vexp data extract-frames replaces only frame folders it made"
one_line
[ "$(cat f3/a/notes.txt)" = mine ] || fail "the unrelated folder was changed"
rm -r f3/a
# Its own folders are kept on a rerun, and redone when their video changed.
printf 'a.mp4 0\nb.mp4 1\n' >vids/list.txt
expect_rc 0 -- "$vexp" data extract-frames vids/list.txt --out f3
expect_out "extracted 2 video(s), 0 already done, 0 failed"
expect_rc 0 -- "$vexp" data extract-frames vids/list.txt --out f3
expect_out "extracted 0 video(s), 2 already done, 0 failed"
cp vids/b.mp4 vids/a.mp4 && touch -d '2001-01-01' vids/a.mp4
expect_rc 0 -- "$vexp" data extract-frames vids/list.txt --out f3
expect_out "extracted 1 video(s), 1 already done, 0 failed"
grep -qx "a 5 0" f3/list_frames.txt || { cat f3/list_frames.txt; fail "the changed video's folder was not redone"; }
# A frame of its own folder lost: redone, not counted with the frames it has left.
rm f3/b/img_00005.jpg
expect_rc 0 -- "$vexp" data extract-frames vids/list.txt --out f3
expect_out "extracted 1 video(s), 1 already done, 0 failed"
grep -qx "b 5 1" f3/list_frames.txt || { cat f3/list_frames.txt; fail "the damaged folder was not redone"; }
no_crash
exit 0
