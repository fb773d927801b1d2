# The Collector itself (writer threads, submission order, lz4 files) and the sinks it writes through.
find_package(nlohmann_json 3 REQUIRED)
msprobe_gtest(collector_writer SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_collector.cpp
              LINK msprobe_collector nlohmann_json::nlohmann_json TIMEOUT 120)
