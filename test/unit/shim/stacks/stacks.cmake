# Call stacks (shim/stacks/stacks.h, shim/stacks/stack_*.{h,cpp}): native capture with libunwind opened RTLD_LOCAL, dedupe into
# stack ids, the module map, late ELF symbolization, Python frames through the CPython API.
set(STACK_FIXTURES ${CMAKE_CURRENT_LIST_DIR}/stack_fixtures)
set(STACK_LIB_DIR ${CMAKE_BINARY_DIR}/tests/lib)

# A PIE built with -g whose stack goes through a static and a non-exported function. No sibling calls, so that
# every fixture function keeps its frame whatever the build type.
add_executable(stack_fixture_pie ${STACK_FIXTURES}/pie_fixture.cpp)
target_link_libraries(stack_fixture_pie PRIVATE msprobe_shim_stacks)
target_compile_options(stack_fixture_pie PRIVATE -g -fPIE -fno-optimize-sibling-calls)
target_link_options(stack_fixture_pie PRIVATE -pie)

# A host that throws and catches C++ exceptions (knows nothing of the shim), and a preload library that takes
# stacks inside it, during unwinding too.
add_executable(stack_exception_host ${STACK_FIXTURES}/exception_host.cpp)
target_compile_options(stack_exception_host PRIVATE -fno-optimize-sibling-calls)
target_link_libraries(stack_exception_host PRIVATE Threads::Threads)
add_library(stack_probe_preload MODULE ${STACK_FIXTURES}/probe_preload.cpp)
target_link_libraries(stack_probe_preload PRIVATE msprobe_shim_stacks)

# An embedding host that opens libpython RTLD_LOCAL (Python frames found through the link map).
add_executable(stack_embed_local ${STACK_FIXTURES}/embed_local.cpp)
target_link_libraries(stack_embed_local PRIVATE msprobe_shim_stacks ${CMAKE_DL_LIBS})

# dlopen'ed (and dlclose'd) by the unit test after the module map was built.
add_library(stack_plugin MODULE ${STACK_FIXTURES}/plugin.cpp)
target_compile_options(stack_plugin PRIVATE -g -fno-optimize-sibling-calls)

# Loaded by test_stacks_python.py through ctypes.
add_library(stacks_pytest MODULE ${STACK_FIXTURES}/pylib.cpp)
target_link_libraries(stacks_pytest PRIVATE msprobe_shim_stacks)

set_target_properties(stack_fixture_pie stack_exception_host stack_embed_local PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
set_target_properties(stack_probe_preload stack_plugin stacks_pytest PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${STACK_LIB_DIR})

msprobe_gtest(shim_stacks SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stacks.cpp LINK msprobe_shim_stacks ${CMAKE_DL_LIBS}
              TIMEOUT 120)
target_compile_options(shim_stacks PRIVATE -fno-optimize-sibling-calls)
target_compile_definitions(shim_stacks PRIVATE
  STACK_FIXTURE_PIE="$<TARGET_FILE:stack_fixture_pie>"
  STACK_EXCEPTION_HOST="$<TARGET_FILE:stack_exception_host>"
  STACK_PROBE_PRELOAD="$<TARGET_FILE:stack_probe_preload>"
  STACK_PLUGIN="$<TARGET_FILE:stack_plugin>"
  STACK_EMBED_LOCAL="$<TARGET_FILE:stack_embed_local>")
add_dependencies(shim_stacks stack_fixture_pie stack_exception_host stack_probe_preload stack_plugin stack_embed_local
                 stacks_pytest)

# msprobe_pytest takes the file relative to the including CMakeLists.txt (test/unit/shim): the ctest name stays
# unit.shim.test_stacks_python.
msprobe_pytest(stacks/test_stacks_python.py TIMEOUT 120)
