# The stand-in's all-to-all, MoE and MC2 ops (issue 41): HCCL ranks as processes (and threads), aclnn ops against numpy.
msprobe_pytest(test_hccl_alltoall.py TIMEOUT 180)
msprobe_pytest(test_aclnn_moe.py TIMEOUT 300)
msprobe_pytest(test_aclnn_mc2.py TIMEOUT 180)
