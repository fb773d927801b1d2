# The aclnn ops of libopapi, checked against independent numpy computations (ctypes, dlopen/dlsym).
msprobe_pytest(test_aclnn_ops.py TIMEOUT 300)
