# Edges of libmsprobe_shim.so (issue 3): a custom vendor op library the shim was never built against (with
# and without its header), long kernel names, bad configurations, exported symbols and C++ exceptions in the
# host, the PLT path of a directly linked program, and another interposer that forwards with RTLD_NEXT.

# The custom op vendor "msprobe_test", laid out as CANN installs custom ops:
#   <build>/custom_opp/vendors/msprobe_test/op_api/{lib/libcust_opapi.so, include/aclnn_*.h}
# (ASCEND_CUSTOM_OPP_PATH=<build>/custom_opp/vendors/msprobe_test). Written against the stand-in's executor
# API like libopapi's ops, but built here, outside test/fake_cann.
set(MSPROBE_TEST_VENDOR_DIR ${CMAKE_BINARY_DIR}/custom_opp/vendors/msprobe_test)
set(MSPROBE_TEST_VENDOR_HEADERS)
foreach(h aclnn_scale_shift.h aclnn_long_kernel.h)
  add_custom_command(OUTPUT ${MSPROBE_TEST_VENDOR_DIR}/op_api/include/${h}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${CMAKE_CURRENT_LIST_DIR}/custom_op/include/${h}
            ${MSPROBE_TEST_VENDOR_DIR}/op_api/include/${h}
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/custom_op/include/${h})
  list(APPEND MSPROBE_TEST_VENDOR_HEADERS ${MSPROBE_TEST_VENDOR_DIR}/op_api/include/${h})
endforeach()
add_custom_target(msprobe_test_vendor_headers ALL DEPENDS ${MSPROBE_TEST_VENDOR_HEADERS})

add_library(msprobe_test_cust_opapi SHARED ${CMAKE_CURRENT_LIST_DIR}/custom_op/custom_ops.cpp)
target_include_directories(msprobe_test_cust_opapi PRIVATE ${FAKE_CANN_ROOT}/include
                           ${CMAKE_SOURCE_DIR}/test/fake_cann/src/include ${CMAKE_CURRENT_LIST_DIR}/custom_op/include)
target_link_libraries(msprobe_test_cust_opapi PRIVATE nnopbase runtime)
# Products and sums rounded one at a time, as the test's numpy reference does.
target_compile_options(msprobe_test_cust_opapi PRIVATE -ffp-contract=off)
add_dependencies(msprobe_test_cust_opapi fake_cann_headers msprobe_test_vendor_headers)
set_target_properties(msprobe_test_cust_opapi PROPERTIES
  OUTPUT_NAME cust_opapi
  LIBRARY_OUTPUT_DIRECTORY ${MSPROBE_TEST_VENDOR_DIR}/op_api/lib
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  BUILD_RPATH "${FAKE_CANN_ROOT}/lib64")

# A C++ host that throws and catches exceptions around aclnn launches (spec §3: the shim must not break them).
add_executable(shim_exception_host ${CMAKE_CURRENT_LIST_DIR}/exception_host.cpp)
target_include_directories(shim_exception_host PRIVATE ${FAKE_CANN_ROOT}/include)
target_link_libraries(shim_exception_host PRIVATE ascendcl nnopbase opapi runtime Threads::Threads)
add_dependencies(shim_exception_host fake_cann_headers)
set_target_properties(shim_exception_host PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${FAKE_CANN_ROOT}/lib64")

# Another interposer of aclCreateTensor that forwards with dlsym(RTLD_NEXT).
add_library(rtld_next_wrapper SHARED ${CMAKE_CURRENT_LIST_DIR}/rtld_next_wrapper.c)
target_link_libraries(rtld_next_wrapper PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(rtld_next_wrapper PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  C_VISIBILITY_PRESET hidden)

# Runs a program with process_vm_readv refused by seccomp (EPERM), as in a container without CAP_SYS_PTRACE.
add_executable(deny_process_vm_readv ${CMAKE_CURRENT_LIST_DIR}/deny_process_vm_readv.c)
set_target_properties(deny_process_vm_readv PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

msprobe_pytest(test_shim_custom_op.py TIMEOUT 600)
msprobe_pytest(test_shim_config_errors.py TIMEOUT 600)
msprobe_pytest(test_shim_linkage.py TIMEOUT 600)
# The capture skeleton's exception policy (issue 28): a describe step that throws in any launching family drops that
# kernel's record and never the host's call.
msprobe_pytest(test_shim_describe_faults.py TIMEOUT 300)
