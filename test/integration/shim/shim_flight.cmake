# The flight task (issue 20).
msprobe_pytest(test_shim_flight.py TIMEOUT 600)
