# The wheel and its launcher (issue 21): scripts/build_wheel.sh packs this build's libmsprobe_shim.so and
# msprobe-inspect, pip installs the wheel offline into a fresh venv, and its msprobe-shim runs train.py.
msprobe_pytest(test_wheel.py TIMEOUT 600)
