# Raw runtime kernels and device memory (shim/device/device_allocations.h, shim/device/kernel_binaries.h): the live
# allocation table, kernel symbols of registered device binaries, argument blob slots.
msprobe_gtest(shim_alloc_rt_kernels
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_allocations.cpp ${CMAKE_CURRENT_LIST_DIR}/test_kernel_binaries.cpp
              LINK msprobe_shim_device TIMEOUT 120)
add_dependencies(shim_alloc_rt_kernels fake_cann_device_kernels)  # reads $ASCEND_HOME_PATH/opp/kernel/fake_kernels.o
# The handle table (shim/device/handles.h): the aclnn argument objects' records, made on one thread and destroyed on
# another.
msprobe_gtest(shim_device_handles SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_handles.cpp LINK msprobe_shim_device
              TIMEOUT 120)
# The pinned staging pool (shim/device/staging.h): copies of the stand-in's device memory, pool reuse, the budget.
msprobe_gtest(shim_device_staging SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_staging.cpp
              LINK msprobe_shim_device ascendcl runtime TIMEOUT 120)
add_test(NAME shim_device_staging_async COMMAND shim_device_staging)
set_tests_properties(shim_device_staging_async PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=20000" TIMEOUT 120)
# The flight task's ring (shim/device/device_ring.h): device copies read back, first-in first-out reuse, eviction,
# refusals, waiting for a kernel being checked.
msprobe_gtest(shim_device_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_ring.cpp
              LINK msprobe_shim_device ascendcl runtime TIMEOUT 120)
add_test(NAME shim_device_ring_async COMMAND shim_device_ring)
set_tests_properties(shim_device_ring_async PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=20000" TIMEOUT 120)
