# The capture core (shim/capture/): the session's decisions (steps, ranks, names, filters; no device), one kernel
# launch captured end to end against the CANN stand-in (dump.json read back), and the process lifecycle (in forked
# children). Linked against msprobe_shim_capture and, where a device is needed, the stand-in's libraries.
msprobe_gtest(shim_capture_session SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session.cpp LINK msprobe_shim_capture
              TIMEOUT 120)
# opapi/nnopbase: the device statistics' reductions (MSPROBE_DEVICE_STATS=on) run on the stand-in.
msprobe_gtest(shim_capture_kernel_launch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kernel_launch.cpp
              LINK msprobe_shim_capture ascendcl nnopbase opapi runtime TIMEOUT 120)
msprobe_gtest(shim_capture_lifecycle SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_lifecycle.cpp LINK msprobe_shim_capture
              TIMEOUT 120)
# Again with every stream task of the stand-in delayed: the bytes captured are valid only because the capture waits
# for its copies' events, not because the stand-in happened to be done already.
add_test(NAME shim_capture_kernel_launch_async COMMAND shim_capture_kernel_launch)
set_tests_properties(shim_capture_kernel_launch_async PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=20000" TIMEOUT 120)
# Kernel names given after the launch (scope_names.h): armed for the whole executable, hence its own.
msprobe_gtest(shim_capture_scope_names SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scope_names.cpp
              LINK msprobe_shim_capture ascendcl nnopbase opapi runtime TIMEOUT 120)
