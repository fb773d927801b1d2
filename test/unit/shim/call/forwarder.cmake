# shim/call/forwarder.{h,cpp} (libffi call forwarding).
msprobe_gtest(shim_forwarder SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_forwarder.cpp LINK msprobe_shim_call TIMEOUT 120)
# The same tests with every forwarder behind a gate trampoline (shim/call/trampoline.h) that lets the hooks run.
msprobe_gtest(shim_forwarder_gated SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_forwarder.cpp LINK msprobe_shim_call
              TIMEOUT 120)
target_compile_definitions(shim_forwarder_gated PRIVATE FORWARDER_GATED=1)
