# msprobe-inspect replay (msprobe's accuracy pre-check at kernel level) on real tensor dumps of examples/train.py,
# examples/acl_app and test/python/ops_workload.py made by the shim.
msprobe_pytest(test_inspect_replay.py TIMEOUT 900)
# replay on real tensor dumps of examples/llm_train.py: no SKIP, every kernel passes; a planted kernel named alone.
msprobe_pytest(test_inspect_replay_llm.py TIMEOUT 900)
