# The post-run tools' reader library (tools/reader): the NaN-tolerant JSON reader, dump layout and kernel selectors,
# journal repair, tensor files, compare metrics, CSV, flight records, how stacks are printed, unfinished dump.json.
foreach(part json_reader dump_reader repair tensor_data metrics csv flight stack_text partial_read)
  msprobe_gtest(tools_${part} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${part}.cpp LINK msprobe_dump_reader msprobe_collector TIMEOUT 120)
endforeach()
# first-nan / first-diff's digest and reduce (tools/inspect/ranks.h), on hand-built digests.
msprobe_gtest(tools_ranks SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ranks.cpp LINK msprobe_inspect_core TIMEOUT 120)
