# Raw runtime kernels and HCCL collectives captured by libmsprobe_shim.so (issue 4): examples/acl_app,
# train.py with two ranks, and a two-rank ctypes worker for the launch variants the examples do not use.
msprobe_pytest(test_shim_rt_hccl.py TIMEOUT 600)
# aclnn and aclop kernels, launched through the exported rtKernelLaunchWithHandleV2, dumped exactly once and never
# as raw rt kernels (issue 17 item 4).
msprobe_pytest(test_shim_op_launch_path.py TIMEOUT 600)
msprobe_pytest(test_shim_rank_threads.py TIMEOUT 300)
