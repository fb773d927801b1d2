# The collector's writer (issue 6): bench_writer_helper times the collector's own code (statistics pass, Collector
# writing tensor files, lz4) on data bench_writer.py prepares and also hands to numpy, dd and numpy.save.
add_executable(bench_writer_helper ${CMAKE_CURRENT_LIST_DIR}/bench_writer_helper.cpp)
target_link_libraries(bench_writer_helper PRIVATE msprobe_collector Threads::Threads)
set_target_properties(bench_writer_helper PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

if(MSPROBE_BUILD_TESTS)
  # Smoke run (tiny sizes, no timing assertions): the driver keeps building and running.
  add_test(NAME bench_writer_smoke COMMAND ${TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/bench_writer.py --quick
                                           --build ${CMAKE_BINARY_DIR})
  set_tests_properties(bench_writer_smoke PROPERTIES TIMEOUT 300)
endif()

if(MSPROBE_BUILD_TESTS)
  # compare_shims.py with the same library as A and B, tiny sizes: it keeps running (no timing assertion).
  add_test(NAME bench_compare_shims_smoke
           COMMAND ${TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/compare_shims.py --a $<TARGET_FILE:msprobe_shim>
                   --b $<TARGET_FILE:msprobe_shim> --rounds 1 --kernels 50 --steps 8 --build ${CMAKE_BINARY_DIR})
  set_tests_properties(bench_compare_shims_smoke PROPERTIES TIMEOUT 300)
endif()
