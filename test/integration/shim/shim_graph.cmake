# Graph-sunk kernels through CANN data dump (issue 22).
msprobe_pytest(test_shim_graph.py TIMEOUT 600)
