# Pass-through cost (issue 6): bench_passthrough (C++, one aclnn op of the stand-in per iteration, both phases) run by
# bench_passthrough.py side by side without the shim and under it in several configurations, plus train.py step
# times. Results: bench/RESULTS.md (bench/run_all.sh runs everything).
add_executable(bench_passthrough ${CMAKE_CURRENT_LIST_DIR}/bench_passthrough.cpp)
target_include_directories(bench_passthrough PRIVATE ${FAKE_CANN_ROOT}/include)
target_link_libraries(bench_passthrough PRIVATE ascendcl nnopbase opapi runtime ${CMAKE_DL_LIBS})
add_dependencies(bench_passthrough fake_cann_headers)
# ENABLE_EXPORTS: the program's no-op aclnn pair must be visible to dlsym (and so to the shim).
set_target_properties(bench_passthrough PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench
                                                   BUILD_RPATH "${FAKE_CANN_ROOT}/lib64" ENABLE_EXPORTS ON)

if(MSPROBE_BUILD_TESTS)
  # Smoke run (a few hundred ops per configuration, no timing assertions): the driver keeps building and running.
  add_test(NAME bench_passthrough_smoke
           COMMAND ${TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/bench_passthrough.py --quick --build ${CMAKE_BINARY_DIR})
  set_tests_properties(bench_passthrough_smoke PROPERTIES TIMEOUT 300)
  add_dependencies(bench_passthrough msprobe_shim)
endif()
