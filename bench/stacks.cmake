# Call-stack capture cost (issue 5): bench_stacks (C++, native frames only) and bench_stacks.py, which drives
# libbench_stacks.so through ctypes.PyDLL for 30 native + 20 Python frames. Both print median and p99 per capture.
add_executable(bench_stacks ${CMAKE_CURRENT_LIST_DIR}/bench_stacks.cpp)
target_link_libraries(bench_stacks PRIVATE msprobe_shim_stacks)
target_compile_options(bench_stacks PRIVATE -fno-optimize-sibling-calls)
add_library(bench_stacks_py MODULE ${CMAKE_CURRENT_LIST_DIR}/bench_stacks_lib.cpp)
target_link_libraries(bench_stacks_py PRIVATE msprobe_shim_stacks)
target_compile_options(bench_stacks_py PRIVATE -fno-optimize-sibling-calls)
set_target_properties(bench_stacks PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
set_target_properties(bench_stacks_py PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

if(MSPROBE_BUILD_TESTS)
  # Smoke runs (few iterations, no timing assertions): the drivers keep building and running.
  add_test(NAME bench_stacks_smoke COMMAND bench_stacks --quick)
  add_test(NAME bench_stacks_py_smoke
           COMMAND ${TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/bench_stacks.py --quick --lib $<TARGET_FILE:bench_stacks_py>)
  set_tests_properties(bench_stacks_smoke bench_stacks_py_smoke PROPERTIES TIMEOUT 120)
endif()
