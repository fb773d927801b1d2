# The stand-in's single-op dump (acl_app --op-dump) against the shim's capture of the same kernels (issue 22).
msprobe_pytest(test_shim_single_op_dump.py TIMEOUT 120)
