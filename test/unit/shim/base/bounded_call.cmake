# call_with_deadline: the bound on waits for code the shim does not control (the graph dump's drain).
msprobe_gtest(shim_bounded_call SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bounded_call.cpp LINK msprobe_shim_base TIMEOUT 60)
