# Python frames without the GIL (issue 18): a ctypes-only host under every CPython found on the machine (3.8 to
# 3.13 under pyenv, Debian's python3), GIL released and held, and a faked unsupported version.
msprobe_pytest(test_shim_python_versions.py TIMEOUT 900)
