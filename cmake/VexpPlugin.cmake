# vexp_add_plugin(NAME SOURCES src... [LIBRARIES lib...])
# Builds a plugin library NAME.so (a MODULE: loaded by vexp, never linked against).
# Works in vexp's own tree and, after find_package(vexp), outside it.
function(vexp_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "vexp_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE vexp::sdk ${ARG_LIBRARIES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TARGET vexp_sdk)  # inside vexp's own build
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${VEXP_PLUGIN_OUTPUT_DIR}"
      INSTALL_RPATH "$ORIGIN/../..")
    install(TARGETS ${name} LIBRARY DESTINATION ${VEXP_PLUGIN_INSTALL_DIR})
    set_property(GLOBAL APPEND PROPERTY VEXP_PLUGIN_TARGETS ${name})
    # A plugin may use the SDK and its own libraries, nothing of the host: an
    # undefined symbol is a link error here, not a dlopen failure in a user's run.
    target_link_options(${name} PRIVATE "LINKER:--no-undefined")
  endif()
endfunction()
