# Core semantics of the stand-in: device memory, streams, events, executors.
msprobe_gtest(fake_cann_core SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_core.cpp LINK ascendcl nnopbase opapi runtime)
# The asynchrony test slows every stream task down so that "not yet done" is observable.
msprobe_gtest(fake_cann_async SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_async.cpp LINK ascendcl nnopbase opapi runtime)
set_property(TEST fake_cann_async APPEND PROPERTY ENVIRONMENT FAKE_CANN_TASK_DELAY_US=30000)
# A program written from reference/cann_abi.md alone (own declarations), finding ops with dlopen/dlsym.
msprobe_gtest(fake_cann_abi_only SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_abi_only.cpp LINK dl)
# Stream capture into model runtime instances (aclmdlRICapture*, aclmdlRIExecuteAsync, aclmdlRIDestroy).
msprobe_gtest(fake_cann_capture SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_capture.cpp LINK ascendcl nnopbase opapi runtime)
# Devices, contexts, streams and events against CANN's runtime (reference counts, context switches, forced destroy,
# failure modes, host functions, event status values).
msprobe_gtest(fake_cann_runtime_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_runtime_api.cpp
              LINK ascendcl nnopbase opapi runtime)
# aclInit / aclFinalize (codes, reference counts, the first config's content) and aclInit's dump section. Its own
# process: aclInit's state is the process's.
msprobe_gtest(fake_cann_acl_init SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_acl_init.cpp LINK ascendcl nnopbase opapi runtime)
# The runtime about itself: the thread's last error, device faults, package versions, CANN attributes, the SoC and its
# architecture, device capabilities, the host fp16 conversions (the 0_quickstart samples' calls).
msprobe_gtest(fake_cann_runtime_info SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_runtime_info.cpp LINK ascendcl runtime)
# The runtime's built-in device tasks (value write/wait, reduce, random numbers) and peer access between devices.
msprobe_gtest(fake_cann_builtin_tasks SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_builtin_tasks.cpp LINK ascendcl runtime)
