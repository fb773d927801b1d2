# The collector's format building blocks (collector/format.h, stats, npy, naming, json_writer).
foreach(part format stats npy naming json)
  msprobe_gtest(collector_${part} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${part}.cpp LINK msprobe_collector
                TIMEOUT 120)
endforeach()

# Test-only driver for the numpy / zlib / json cross-checks in test_collector_formats.py (found through
# MSPROBE_BUILD_DIR/tests/collector_probe).
add_executable(collector_probe ${CMAKE_CURRENT_LIST_DIR}/collector_probe.cpp)
target_link_libraries(collector_probe PRIVATE msprobe_collector)
set_target_properties(collector_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
msprobe_pytest(test_collector_formats.py TIMEOUT 300)
