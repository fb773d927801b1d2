# Statistics on the device (issue 9): device vs host path, bytes moved, losses, overflow_check.
msprobe_pytest(test_shim_device_stats.py TIMEOUT 900)
