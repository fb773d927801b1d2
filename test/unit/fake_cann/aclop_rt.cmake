# The aclop path (libascendcl + libacl_op_compiler) and the raw rt kernel path (libruntime + the ELF
# device binary) of the stand-in.
msprobe_gtest(fake_cann_aclop SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aclop.cpp
              LINK ascendcl acl_op_compiler runtime elf)
msprobe_gtest(fake_cann_rt_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rt_kernels.cpp LINK runtime elf)
add_dependencies(fake_cann_rt_kernels fake_cann_device_kernels)

# The same executables again with every stream task delayed, for the tests that show results are valid
# only after synchronization (they skip themselves in the runs above).
foreach(t fake_cann_aclop fake_cann_rt_kernels)
  add_test(NAME ${t}_async COMMAND ${t} --gtest_filter=*Async*)
  set_tests_properties(${t}_async PROPERTIES ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=20000"
                                             TIMEOUT 120)
endforeach()
# AI CPU kernels (rtCpuKernelLaunchWithFlag): MindSpore's args layout, GatherV2, the ext info.
msprobe_gtest(fake_cann_aicpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aicpu.cpp LINK runtime)
# Kernels loaded and launched through the ACL (aclrtBinaryLoad*, aclrtLaunchKernel*, aclrtKernelArgs*) and the device
# allocations beside aclrtMalloc (Align32, Cached, WithCfg, physical memory mapped into reserved addresses).
msprobe_gtest(fake_cann_launch_memory SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_launch_memory.cpp LINK ascendcl runtime)
