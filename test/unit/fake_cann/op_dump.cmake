# Single-op dump (dump_op_switch "on") of aclnn and aclop kernels: files decoded and compared, the host call
# synchronous, the executor cache off while dump is on.
msprobe_gtest(fake_cann_op_dump SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_op_dump.cpp
              LINK ascendcl acl_op_compiler nnopbase opapi runtime)
# Again with every stream task delayed: the call must have waited for the queued work and its dumps.
add_test(NAME fake_cann_op_dump_sync COMMAND fake_cann_op_dump --gtest_filter=*Sync*)
set_tests_properties(fake_cann_op_dump_sync PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=30000" TIMEOUT 120)
# And with a tiny chunk payload limit: every single-op dump file split at arbitrary boundaries.
add_test(NAME fake_cann_op_dump_chunks COMMAND fake_cann_op_dump)
set_tests_properties(fake_cann_op_dump_chunks PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_DUMP_CHUNK_BYTES=100" TIMEOUT 120)
