#!/usr/bin/env bash
# rundir.source_state: libs/rundir/source_state.cmake, which every build runs to fix
# provenance.jsonl's vexp.commit and vexp.tree, on clones of a git tree: a clean clone
# says clean, a modified tracked file (staged or not) dirty, untracked files do not
# count, a folder outside git says unknown; the file is rewritten only when it changes.
# Usage: source_state_test.sh CMAKE SOURCE_DIR BUILD_INFO_CPP (the build's own file)
cmake=$1 src=$2 built=$3 name=source_state
source "$src/tests/support/setup.sh" rundir
script=$src/libs/rundir/source_state.cmake
template=$src/libs/rundir/src/build_info.cpp.in
git_() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }

# state DIR: run the script on DIR into $tmp/info.cpp; prints "COMMIT TREE"
state() {
  "$cmake" -DSOURCE_DIR="$1" -DTEMPLATE="$template" -DOUTPUT="$tmp/info.cpp" -DPROJECT_VERSION=9.9.9 -P "$script" \
    >"$tmp/cmake.out" 2>&1 || { cat "$tmp/cmake.out"; fail "source_state.cmake failed on $1"; }
  local commit tree
  commit=$(sed -n 's/.*vexp_commit() { return "\(.*\)"; }.*/\1/p' "$tmp/info.cpp")
  tree=$(sed -n 's/.*vexp_tree() { return "\(.*\)"; }.*/\1/p' "$tmp/info.cpp")
  grep -q 'vexp_version() { return "9.9.9"; }' "$tmp/info.cpp" || fail "no version in $tmp/info.cpp"
  echo "$commit $tree"
}
expect_state() {  # DIR COMMIT TREE
  local got; got=$(state "$1") || exit 1
  [ "$got" = "$2 $3" ] || fail "$1: expected '$2 $3', got '$got'"
}

# A repository of our own: committed, cloned.
mkdir "$tmp/origin" && cd "$tmp/origin" || fail "no folder"
printf 'a\n' >a.txt && printf 'b\n' >b.txt
git_ init -q . && git_ add a.txt b.txt && git_ commit -qm one || fail "git init/commit failed"
git_ clone -q "$tmp/origin" "$tmp/clone" || fail "git clone failed"
head=$(git -C "$tmp/clone" rev-parse HEAD)
expect_state "$tmp/clone" "$head" clean
# the same state again: the file is left as it was (no rebuild, no relink)
touch -d '2000-01-01' "$tmp/info.cpp"
expect_state "$tmp/clone" "$head" clean
[ "$(stat -c %Y "$tmp/info.cpp")" = "$(date -d 2000-01-01 +%s)" ] || fail "an unchanged state rewrote the file"
# an untracked file is not a change of the tree
printf 'scratch\n' >"$tmp/clone/notes.txt"
expect_state "$tmp/clone" "$head" clean
# a tracked file modified: dirty, staged or not; undone: clean again
printf 'changed\n' >>"$tmp/clone/a.txt"
expect_state "$tmp/clone" "$head" dirty
[ "$(stat -c %Y "$tmp/info.cpp")" != "$(date -d 2000-01-01 +%s)" ] || fail "a changed state did not rewrite the file"
git -C "$tmp/clone" add a.txt && expect_state "$tmp/clone" "$head" dirty
git -C "$tmp/clone" reset -q --hard && expect_state "$tmp/clone" "$head" clean
# a tracked file deleted: dirty
rm "$tmp/clone/b.txt" && expect_state "$tmp/clone" "$head" dirty
# a new commit: its hash, clean
git_ -C "$tmp/clone" commit -qam two && expect_state "$tmp/clone" "$(git -C "$tmp/clone" rev-parse HEAD)" clean
# outside git (a tarball's tree): unknown, unknown
mkdir "$tmp/plain" && cp "$tmp/origin/a.txt" "$tmp/plain/"
expect_state "$tmp/plain" unknown unknown

# vexp's own tree, when it is a git checkout: a fresh clone of its commit says clean,
# and the same clone with a source file changed, dirty.
if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
  git_ clone -q --no-checkout "$src" "$tmp/vexp" || fail "cannot clone $src"
  commit=$(git -C "$src" rev-parse HEAD)
  git -C "$tmp/vexp" checkout -q "$commit" || fail "cannot check out $commit in the clone"
  expect_state "$tmp/vexp" "$commit" clean
  printf '// changed\n' >>"$tmp/vexp/libs/rundir/src/provenance.cpp"
  expect_state "$tmp/vexp" "$commit" dirty
  # the build's own build_info.cpp names a commit of this tree and a state
  grep -Eq 'vexp_tree\(\) \{ return "(clean|dirty)"; \}' "$built" || fail "$built: no clean/dirty state"
  built_commit=$(sed -n 's/.*vexp_commit() { return "\(.*\)"; }.*/\1/p' "$built")
  git -C "$src" cat-file -e "$built_commit^{commit}" 2>/dev/null || fail "$built names '$built_commit', not a commit of $src"
fi
echo "PASS [rundir.source_state]"
