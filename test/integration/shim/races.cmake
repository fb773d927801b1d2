# The race check between streams (issue 45, MSPROBE_RACECHECK=1): examples/stream_race.py with each planted race
# reported with both kernels in races.json, and its correct twin silent.
msprobe_pytest(test_shim_races.py TIMEOUT 300)
# Every correct host silent under the check, on 1 and 2 ranks (short runs).
msprobe_pytest(test_shim_races_hosts.py TIMEOUT 900)
