# vexp_library(NAME TYPE SOURCE...): a library of the tree as every one is laid out — the
# target vexp_NAME, its alias vexp::NAME (what the others link), and its include/ folder
# (include/vexp/NAME/...), public. The floors it may link are in docs/architecture.md.
# Installed (the SDK's), it is exported as vexp::NAME with the installed include folder.
function(vexp_library name type)
  add_library(vexp_${name} ${type} ${ARGN})
  add_library(vexp::${name} ALIAS vexp_${name})
  target_include_directories(vexp_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(vexp_${name} PROPERTIES EXPORT_NAME ${name})
endfunction()
