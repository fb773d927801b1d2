# Call stacks of captured kernels (issue 5): train.py's Python frames against its source and against the frames
# Python itself reports, acl_app's native frames (static helpers), a C++ exception host, and stack.json's groups
# in every MSPROBE_STACK mode with 1 and 2 ranks.
msprobe_pytest(test_shim_stacks.py TIMEOUT 900)
