# The race check's own cost (issue 45): bench_races times, with the thread's CPU clock, what a launching thread adds
# per captured kernel (the stamp and the accesses the record carries) and what the writer side's detector spends per
# checked kernel. bench_races.py measures the same end to end (launch loop and train.py, check off and on).
add_executable(bench_races ${CMAKE_CURRENT_LIST_DIR}/bench_races.cpp)
target_link_libraries(bench_races PRIVATE msprobe_races)
set_target_properties(bench_races PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

if(MSPROBE_BUILD_TESTS)
  add_test(NAME bench_races_smoke COMMAND bench_races --quick)
  set_tests_properties(bench_races_smoke PROPERTIES TIMEOUT 120)
endif()
