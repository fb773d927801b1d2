# Layers that a wrong-way include cannot cross (docs/architecture.md). Each product library compiles against an
# include view: a folder in the build tree holding symbolic links to the source folders that library may depend
# on, and nothing else. Every product include names its folder from the root ("shim/base/log.h"), so a header of a
# layer above is simply not found and the build fails. The source root itself is never an include path of product
# code (tests, benchmarks and fuzzers have it: they may look at everything).
#
#   msprobe_layer(target SEES format record shim/base ...)
function(msprobe_layer target)
  cmake_parse_arguments(ARG "" "" "SEES" ${ARGN})
  set(view ${CMAKE_BINARY_DIR}/include_views/${target})
  file(REMOVE_RECURSE ${view})
  foreach(dir IN LISTS ARG_SEES)
    if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${dir})
      message(FATAL_ERROR "msprobe_layer(${target}): no folder ${dir}")
    endif()
    get_filename_component(parent ${view}/${dir} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${dir} ${view}/${dir} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PRIVATE ${view})
  set_target_properties(${target} PROPERTIES MSPROBE_SEES "${ARG_SEES}")
endfunction()
