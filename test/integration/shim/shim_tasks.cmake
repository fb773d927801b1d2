# overflow_check and structure tasks, and aclop capture (issue 4).
msprobe_pytest(test_shim_tasks.py TIMEOUT 300)
