# The aclnn ops of libopapi, checked against independent numpy computations (ctypes, dlopen/dlsym).
msprobe_pytest(test_aclnn_ops.py TIMEOUT 300)
# The transformer ops of issue 41 (attention, RoPE, SwiGlu, norms, cross entropy, the examples' common ops).
msprobe_pytest(test_aclnn_transformer_ops.py TIMEOUT 300)
