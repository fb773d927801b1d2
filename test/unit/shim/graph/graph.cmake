# shim/graph (CANN's model dump as bytes): the decoders on hand-built bytes, then on the stand-in's real dumps
# (tensor and stats modes; again with 100-byte chunks, so that files split inside the header and the tensors).
msprobe_gtest(shim_graph SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_decode.cpp LINK msprobe_shim_graph TIMEOUT 120)
msprobe_gtest(shim_graph_stand_in SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stand_in.cpp
              LINK msprobe_shim_graph ascendcl runtime TIMEOUT 300)
add_test(NAME shim_graph_stand_in_chunks COMMAND shim_graph_stand_in)
set_tests_properties(shim_graph_stand_in_chunks PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_DUMP_CHUNK_BYTES=100" TIMEOUT 300)
msprobe_gtest(shim_graph_aicpu_task SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aicpu_task.cpp LINK msprobe_shim_graph)
