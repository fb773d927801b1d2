# The race check between streams (issue 45, MSPROBE_RACECHECK=1): examples/stream_race.py with each planted race
# reported with both kernels in races.json, and its correct twin silent.
msprobe_pytest(test_shim_races.py TIMEOUT 300)
