# vexp_library(NAME TYPE SOURCE...): a library of the tree as every one is laid out — the
# target vexp_NAME, its alias vexp::NAME (what the others link), and its include/ folder
# (include/vexp/NAME/...), public. The floors it may link are in docs/architecture.md.
function(vexp_library name type)
  add_library(vexp_${name} ${type} ${ARGN})
  add_library(vexp::${name} ALIAS vexp_${name})
  target_include_directories(vexp_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
endfunction()
