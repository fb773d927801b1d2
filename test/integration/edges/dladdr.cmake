# MindSpore's start-up check under the shim (issue 33, test_shim_dladdr.py): a program whose plugin finds CANN with
# dladdr on the address of each CANN function the shim hooks, which must name a CANN library under .../latest/lib64.
# The list of those functions is generated from the shim's hook families (dladdr/gen_hooked_names.py). Neither the
# plugin nor the program has a run path: LD_LIBRARY_PATH decides where CANN comes from, as set_env.sh does.
set(DLADDR_DIR ${CMAKE_CURRENT_LIST_DIR}/dladdr)
set(HOOKED_NAMES_CPP ${CMAKE_CURRENT_BINARY_DIR}/hooked_names.cpp)
file(GLOB SHIM_HOOK_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/shim/hooks/*.cpp)
add_custom_command(OUTPUT ${HOOKED_NAMES_CPP}
  COMMAND ${Python3_EXECUTABLE} ${DLADDR_DIR}/gen_hooked_names.py ${CMAKE_SOURCE_DIR}/shim/hooks ${HOOKED_NAMES_CPP}
  DEPENDS ${DLADDR_DIR}/gen_hooked_names.py ${SHIM_HOOK_FILES}
  COMMENT "Listing the CANN functions the shim hooks")

add_library(ascend_path_probe SHARED ${DLADDR_DIR}/ascend_path_probe.cpp ${HOOKED_NAMES_CPP})
target_include_directories(ascend_path_probe PRIVATE ${DLADDR_DIR})
target_link_libraries(ascend_path_probe PRIVATE ascendcl acl_op_compiler nnopbase opapi runtime hccl ${CMAKE_DL_LIBS})
set_target_properties(ascend_path_probe PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  CXX_VISIBILITY_PRESET hidden
  SKIP_BUILD_RPATH ON)

# The program links the shim's GOT code (shim/base) to report where its entries point.
add_executable(shim_dladdr_host ${DLADDR_DIR}/dladdr_host.cpp)
target_include_directories(shim_dladdr_host PRIVATE ${DLADDR_DIR} ${FAKE_CANN_ROOT}/include ${CMAKE_SOURCE_DIR})
target_link_libraries(shim_dladdr_host PRIVATE ascend_path_probe ascendcl acl_op_compiler msprobe_shim_base
                                               ${CMAKE_DL_LIBS})
add_dependencies(shim_dladdr_host fake_cann_headers)
set_target_properties(shim_dladdr_host PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  SKIP_BUILD_RPATH ON)

msprobe_pytest(test_shim_dladdr.py TIMEOUT 300)
