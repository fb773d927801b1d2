# tiny_npu, the Python framework of examples/ (needs the `examples` target: libtiny_npu_taskqueue.so).
msprobe_pytest(test_tiny_npu_tensor.py TIMEOUT 120)
msprobe_pytest(test_tiny_npu_dispatch.py TIMEOUT 120)
msprobe_pytest(test_tiny_npu_signatures.py TIMEOUT 60)
