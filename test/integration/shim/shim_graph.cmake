# Graph-sunk kernels through CANN data dump (issue 22).
msprobe_pytest(test_shim_graph.py TIMEOUT 600)

# Inside ACL graph replays: every replayed kernel captured, task updates followed (issue 43).
msprobe_pytest(test_shim_acl_graphs.py TIMEOUT 600)
