# Process life under libmsprobe_shim.so (issue 6 point 4, issue 8 point 4): exits, fatal signals, SIGKILL and
# repair, late launches, fork, threads, dlclose/DEEPBIND, signals during writes. crash_host is the plain ACL
# host they drive (test/integration/crash/crash_host.cpp).
add_executable(crash_host ${CMAKE_CURRENT_LIST_DIR}/crash_host.cpp)
target_include_directories(crash_host PRIVATE ${FAKE_CANN_ROOT}/include)
target_link_libraries(crash_host PRIVATE ascendcl nnopbase runtime Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(crash_host fake_cann_headers opapi)
set_target_properties(crash_host PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${FAKE_CANN_ROOT}/lib64")
msprobe_pytest(test_shim_crash.py TIMEOUT 600)
msprobe_pytest(test_shim_process.py TIMEOUT 600)
msprobe_pytest(test_shim_stuck_writer.py TIMEOUT 300)
