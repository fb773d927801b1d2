# The shim on CANN 9 (issue 40): the ACL kernel API, the allocation variants, the model API's other loads and
# executions, teardown through aclFinalizeReference / aclrtResetDeviceForce, a program's own dump through aclInit,
# and the 8-, 6- and 4-bit float types. cann9_host is the plain ACL program they drive.
add_executable(cann9_host ${CMAKE_CURRENT_LIST_DIR}/cann9_host.cpp)
target_include_directories(cann9_host PRIVATE ${FAKE_CANN_ROOT}/include)
target_link_libraries(cann9_host PRIVATE ascendcl nnopbase opapi hccl Threads::Threads)
add_dependencies(cann9_host fake_cann_headers graph_mlp_model)
foreach(t fake_device_kernels fake_cann_device_kernels)
  if(TARGET ${t})
    add_dependencies(cann9_host ${t})
  endif()
endforeach()
set_target_properties(cann9_host PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${FAKE_CANN_ROOT}/lib64")
# A library whose name says torch_npu: loaded into cann9_host, it makes the shim write PyTorch's spellings.
add_library(torch_npu_name_stub SHARED ${CMAKE_CURRENT_LIST_DIR}/torch_npu_name_stub.c)
set_target_properties(torch_npu_name_stub PROPERTIES OUTPUT_NAME torch_npu LIBRARY_OUTPUT_DIRECTORY
                                                     ${CMAKE_BINARY_DIR}/tests/torch_npu_stub)
add_dependencies(cann9_host torch_npu_name_stub)
msprobe_pytest(test_shim_cann9.py TIMEOUT 600)
