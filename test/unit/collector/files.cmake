# The collector's files: journals (dump.json, construct.json) and tensor files with mapping.csv.
msprobe_gtest(collector_journal SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_journal.cpp LINK msprobe_collector TIMEOUT 120)
msprobe_gtest(collector_dump_files SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dump_files.cpp LINK msprobe_collector
              TIMEOUT 120)
