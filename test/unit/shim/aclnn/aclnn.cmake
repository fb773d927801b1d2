# shim/aclnn/prototypes.{h,cpp}: aclnn phase-1 prototypes read from CANN headers (fixtures + the stand-in's headers).
msprobe_gtest(shim_prototypes SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_prototypes.cpp LINK msprobe_shim_aclnn
              TIMEOUT 120)
target_compile_definitions(shim_prototypes PRIVATE
  MSPROBE_PROTO_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures"
  MSPROBE_ACLNN_SPEC="${CMAKE_SOURCE_DIR}/test/fake_cann/aclnn_ops.spec")
# aclnn two-phase capture (shim/aclnn/aclnn_capture.h): the stand-in's phase-1 and phase-2 symbols wrapped and called.
msprobe_gtest(shim_aclnn_capture SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aclnn_capture.cpp
              LINK msprobe_shim_aclnn ascendcl nnopbase opapi runtime ${CMAKE_DL_LIBS}
              TIMEOUT 120)
add_test(NAME shim_aclnn_capture_async COMMAND shim_aclnn_capture)
set_tests_properties(shim_aclnn_capture_async PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_TASK_DELAY_US=20000" TIMEOUT 120)
# scripts/prototype_census.cpp: the prototype reader over an include tree, one JSON line per op (a developer's tool
# driven by scripts/prototype_census.py, never run by ctest; built here so that it keeps compiling).
find_package(nlohmann_json 3 REQUIRED)
add_executable(prototype_census ${CMAKE_SOURCE_DIR}/scripts/prototype_census.cpp)
target_link_libraries(prototype_census PRIVATE msprobe_shim_aclnn nlohmann_json::nlohmann_json)
set_target_properties(prototype_census PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
# Which objects are CANN's (shim/aclnn/plt_redirect.h): their place under the install's roots, not their names.
msprobe_gtest(shim_plt_redirect SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plt_redirect.cpp LINK msprobe_shim_aclnn)
