# The collector under concurrent producers, flushers and late completions (label "concurrency": scripts/sanitize.sh
# runs these under TSan).
find_package(nlohmann_json 3 REQUIRED)
msprobe_gtest(collector_concurrency SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_concurrency.cpp
              LINK msprobe_collector nlohmann_json::nlohmann_json TIMEOUT 300 LABELS concurrency)
