# The capture core (shim/capture/): the session's decisions (steps, ranks, names, filters; no device), one kernel
# launch captured end to end against the CANN stand-in (dump.json read back), and the process lifecycle (in forked
# children). Linked against msprobe_shim_capture and, where a device is needed, the stand-in's libraries.
msprobe_gtest(shim_capture_session SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session.cpp LINK msprobe_shim_capture
              TIMEOUT 120)
