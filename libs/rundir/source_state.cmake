# The state of vexp's source tree, for provenance.jsonl's vexp.commit and vexp.tree:
# run by the build (libs/rundir/CMakeLists.txt, target vexp_source_state) before
# vexp_rundir compiles, every build, as
#   cmake -DSOURCE_DIR=DIR -DTEMPLATE=build_info.cpp.in -DOUTPUT=build_info.cpp
#         -DPROJECT_VERSION=V [-DGIT_EXECUTABLE=git] -P source_state.cmake
# and by the test rundir.source_state on clones of the tree.
#   VEXP_GIT_COMMIT  `git rev-parse HEAD`; "unknown" outside git (a tarball) or without git
#   VEXP_GIT_TREE    "clean" when `git status --porcelain --untracked-files=no` lists
#                    nothing (no tracked file modified, added, deleted or renamed against
#                    HEAD, staged or not), "dirty" when it lists any, "unknown" as above.
#                    Untracked files do not count, as for `git describe --dirty`.
# OUTPUT is written only when its text changes (configure_file), so a build compiles
# build_info.cpp again, and relinks what links it, only when the commit or the state
# changes, not on every edit of a dirty tree.
cmake_minimum_required(VERSION 3.22)
foreach(v SOURCE_DIR TEMPLATE OUTPUT PROJECT_VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "source_state.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT GIT_EXECUTABLE)
  find_program(GIT_EXECUTABLE git)
endif()

set(VEXP_GIT_COMMIT "unknown")
set(VEXP_GIT_TREE "unknown")
if(GIT_EXECUTABLE)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE _commit RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0 AND _commit MATCHES "^[0-9a-f]+$")
    # --no-optional-locks: a build never takes the index lock of the tree it builds from.
    execute_process(COMMAND "${GIT_EXECUTABLE}" --no-optional-locks status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE _status RESULT_VARIABLE _src ERROR_QUIET)
    set(VEXP_GIT_COMMIT "${_commit}")
    if(_src EQUAL 0)
      if(_status STREQUAL "")
        set(VEXP_GIT_TREE "clean")
      else()
        set(VEXP_GIT_TREE "dirty")
      endif()
    endif()
  endif()
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
