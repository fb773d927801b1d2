# msprobe-inspect replay (msprobe's accuracy pre-check at kernel level) on real tensor dumps of examples/train.py,
# examples/acl_app and test/python/ops_workload.py made by the shim.
msprobe_pytest(test_inspect_replay.py TIMEOUT 900)
