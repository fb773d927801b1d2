# The two CANN library layouts (README.md "Two layouts"): which library holds what, how each 9.x library is linked, the
# compatibility libascendcl, and a host that dlopens libascendcl.so on each.
msprobe_pytest(test_layouts.py TIMEOUT 120)
# The stand-in's own tests again on the CANN 9.x install: programs linked against 8.x's libraries, run where set_env.sh
# puts 9.x's first (LD_LIBRARY_PATH), reach every function through the compatibility libascendcl and the split
# libraries (the C++ programs built for 9.x are the examples': test_shim_layouts.py).
set(FAKE_CANN9_TEST_ENV ${MSPROBE_TEST_ENV})
list(TRANSFORM FAKE_CANN9_TEST_ENV REPLACE "^ASCEND_HOME_PATH=.*" "ASCEND_HOME_PATH=${FAKE_CANN9_ROOT}")
list(APPEND FAKE_CANN9_TEST_ENV "LD_LIBRARY_PATH=${FAKE_CANN9_ROOT}/lib64")
foreach(t core capture runtime_api acl_init runtime_info builtin_tasks aclop rt_kernels aicpu launch_memory hccl
          hccl_threads model_dump model_api op_dump header_layout)
  add_test(NAME unit.fake_cann.cann9.${t} COMMAND fake_cann_${t})
  set_tests_properties(unit.fake_cann.cann9.${t} PROPERTIES ENVIRONMENT "${FAKE_CANN9_TEST_ENV}" TIMEOUT 120)
endforeach()
