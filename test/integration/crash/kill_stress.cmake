# SIGKILL at random moments, then msprobe-inspect repair: every repaired dump is whole (issue 17 item 3).
# bench/kill_stress.py is the long variant.
msprobe_pytest(test_shim_kill_stress.py TIMEOUT 300)
