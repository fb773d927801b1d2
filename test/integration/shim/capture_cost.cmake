# What capture costs the host (issue 29): statistics executors kept and used again, no phase 1 in the steady state,
# tiny_npu's task queue at TASK_QUEUE_ENABLE=0, 1 and 2.
msprobe_pytest(test_shim_capture_cost.py TIMEOUT 900)
