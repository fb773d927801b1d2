# shim/base/got_patch.{h,cpp} (GOT redirection); the tests forward through shim/call/forwarder.h too, so they link
# msprobe_shim_call (which brings msprobe_shim_base).
# The GOT tests need real PLT/GOT traffic: a library with functions (got_target), a library that calls them
# through its own GOT (got_caller, linked in, used as the skip-list object) and one opened later with dlopen
# (got_plugin). The test program is built twice: lazy binding (partial RELRO: .got.plt writable) and
# immediate binding with full RELRO (every GOT entry read-only after start-up).
set(GOT_LIB_DIR ${CMAKE_BINARY_DIR}/tests/lib)
add_library(got_target SHARED ${CMAKE_CURRENT_LIST_DIR}/got_libs/got_target.c)
add_library(got_caller SHARED ${CMAKE_CURRENT_LIST_DIR}/got_libs/got_caller.c)
target_link_libraries(got_caller PRIVATE got_target)
add_library(got_plugin MODULE ${CMAKE_CURRENT_LIST_DIR}/got_libs/got_plugin.c)
target_link_libraries(got_plugin PRIVATE got_target)
set_target_properties(got_target got_caller got_plugin PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${GOT_LIB_DIR})

foreach(mode lazy now)
  msprobe_gtest(shim_got_patch_${mode} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_got_patch.cpp
                LINK msprobe_shim_call got_target got_caller ${CMAKE_DL_LIBS} TIMEOUT 120)
  target_include_directories(shim_got_patch_${mode} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/got_libs)
  target_compile_definitions(shim_got_patch_${mode} PRIVATE GOT_PLUGIN_PATH="$<TARGET_FILE:got_plugin>")
  add_dependencies(shim_got_patch_${mode} got_plugin)
endforeach()
target_compile_definitions(shim_got_patch_lazy PRIVATE GOT_BIND_NOW=0)
target_link_options(shim_got_patch_lazy PRIVATE -Wl,-z,lazy -Wl,-z,relro)
target_compile_definitions(shim_got_patch_now PRIVATE GOT_BIND_NOW=1)
target_link_options(shim_got_patch_now PRIVATE -Wl,-z,now -Wl,-z,relro)
