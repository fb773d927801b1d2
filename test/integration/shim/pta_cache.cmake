# torch_npu's executor-cache path (PTAGetExecCache & co., reference/cann_abi.md §6.4): train.py with
# TINY_NPU_PTA_CACHE is bit-identical to the normal path, and libmsprobe_shim.so captures every cache hit
# with the tensors of that launch.
msprobe_pytest(test_shim_pta_cache.py TIMEOUT 600)
