# aclnn phase 2 and aclop launch through libruntime's exported kernel API (PLT): checked with an LD_PRELOADed
# interposer that counts rtRegisterAllKernel / rtKernelLaunchWithHandleV2 and forwards with dlsym(RTLD_NEXT).
add_library(rt_launch_counter SHARED ${CMAKE_CURRENT_LIST_DIR}/rt_launch_counter.c)
target_include_directories(rt_launch_counter PRIVATE ${FAKE_CANN_ROOT}/include)
target_link_libraries(rt_launch_counter PRIVATE dl Threads::Threads)
set_target_properties(rt_launch_counter PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                                                   C_VISIBILITY_PRESET default)
add_dependencies(rt_launch_counter fake_cann_headers)
msprobe_gtest(fake_cann_op_launch_path SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_op_launch_path.cpp
              LINK ascendcl acl_op_compiler nnopbase opapi runtime dl)
add_dependencies(fake_cann_op_launch_path rt_launch_counter fake_cann_device_kernels)
# Under ASan its runtime must come first in the initial library list (cmake/sanitize.cmake).
string(STRIP "${MSPROBE_SANITIZER_PRELOAD} ${CMAKE_BINARY_DIR}/tests/librt_launch_counter.so" counter_preload)
set_property(TEST fake_cann_op_launch_path APPEND PROPERTY ENVIRONMENT "LD_PRELOAD=${counter_preload}")
