# vexp_add_plugin(NAME SOURCES src... [LIBRARIES lib...])
# Builds a plugin library NAME.so (a MODULE: loaded by vexp, never linked against).
# Works in vexp's own tree and, after find_package(vexp), outside it, where it also
# brings the SDK's C++ standard and, without a build type, an optimised build.
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
  # (the C++ standard comes with vexp::sdk: its compile features are the SDK's own)
  if(NOT TARGET vexp_sdk AND NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    # A plugin project that names no build type gets an optimised plugin, as Release
    # builds it: vexp runs it inside the training step, and -O0 code there would be
    # the slowest op of the model. CMAKE_BUILD_TYPE (Debug, RelWithDebInfo) overrides.
    target_compile_options(${name} PRIVATE -O2)
    target_compile_definitions(${name} PRIVATE NDEBUG)
  endif()
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
