# msprobe-inspect summary and replay on flight records (MSPROBE_TASK=flight), made from real tensor dumps of
# examples/train.py by keeping a launch_index window and adding the flight fields.
msprobe_pytest(test_inspect_flight.py TIMEOUT 600)
