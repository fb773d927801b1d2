# libnnopbase's executor cache for torch_npu (PTAGetExecCache & co., reference/cann_abi.md §6.4), from ctypes.
msprobe_pytest(test_pta_cache.py TIMEOUT 120)
