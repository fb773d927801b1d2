# The model API (acl_mdl.h) over the stand-in's model files (tools/fake_atc.py) and the data dump (aclmdlInitDump,
# acldumpRegCallback): outputs against a CPU computation, dump files decoded and compared byte for byte.
msprobe_gtest(fake_cann_model_dump SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_model_dump.cpp LINK ascendcl runtime)
# Again with a tiny chunk payload limit, so that every dump file is split at arbitrary boundaries.
add_test(NAME fake_cann_model_dump_chunks COMMAND fake_cann_model_dump --gtest_filter=*Dump*)
set_tests_properties(fake_cann_model_dump_chunks PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_DUMP_CHUNK_BYTES=100" TIMEOUT 300)
# The model API's load and execution variants (QuerySize, *WithMem, *WithQ refused, LoadWithConfig, ExecuteV2).
msprobe_gtest(fake_cann_model_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_model_api.cpp LINK ascendcl runtime)
