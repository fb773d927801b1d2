# The example workloads (examples/): train.py over tiny_npu, acl_app, and the README's main command (demo.sh).
# libstep_probe.so stands in for the shim's exported msprobe_shim_step() in the --mark-steps test.
add_library(step_probe SHARED ${CMAKE_CURRENT_LIST_DIR}/step_probe.c)
set_target_properties(step_probe PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
msprobe_pytest(test_train.py TIMEOUT 180)
msprobe_pytest(test_acl_app.py TIMEOUT 60)
msprobe_pytest(test_demo.py TIMEOUT 300)
# The README's commands as a newcomer types them, and the outputs examples/README.md and docs/llm_hosts.md quote.
msprobe_pytest(test_readme.py TIMEOUT 300)
# The graph workloads: graph_app and graph_train.py with libms_hook_runner.so; libhook_probe.so records the hook
# calls (libhook_probe_no_end.so lacks MS_DbgOnStepEnd, so the runner must refuse it).
add_library(hook_probe SHARED ${CMAKE_CURRENT_LIST_DIR}/hook_probe.cpp)
add_library(hook_probe_no_end SHARED ${CMAKE_CURRENT_LIST_DIR}/hook_probe.cpp)
target_compile_definitions(hook_probe_no_end PRIVATE HOOK_PROBE_WITHOUT_END)
set_target_properties(hook_probe hook_probe_no_end PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                                                              CXX_VISIBILITY_PRESET hidden)
msprobe_pytest(test_graph_app.py TIMEOUT 120)
msprobe_pytest(test_graph_train.py TIMEOUT 300)
msprobe_pytest(test_ms_kbk.py TIMEOUT 600)
msprobe_pytest(test_pynative.py TIMEOUT 600)
