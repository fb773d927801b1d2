# msprobe-inspect (tools/) on real dumps of examples/train.py made by the shim, and on a synthetic 100k-kernel dump.
# test/python/inspect_support.py holds their shared helpers.
msprobe_pytest(test_inspect.py TIMEOUT 600)
msprobe_pytest(test_inspect_compare.py TIMEOUT 600)
msprobe_pytest(test_inspect_scale.py TIMEOUT 600)
# first-nan / first-diff across ranks: 8- and 4-rank runs of train.py, alone and under mpirun -n 1, 2, 4.
msprobe_pytest(test_inspect_ranks.py TIMEOUT 900)
# msprobe-inspect as a new user meets it (issue 39): the user's commands on dumps of train.py and acl_app, and the
# words they must see (live runs, kernels only one run has, the folder "rank", repair keeping data, stacks, docs).
msprobe_pytest(test_inspect_new_user.py TIMEOUT 900)
# The examples of docs/inspect.md and docs/report.md, run as they stand: their quoted output is what the commands print.
msprobe_pytest(test_inspect_docs.py TIMEOUT 900)
# first-nan / first-diff through the LLM's MC2 kernels and expert all-to-alls: llm_train.py --moe on two ranks,
# alone and under mpirun -n 2 (issue 42).
msprobe_pytest(test_inspect_llm.py TIMEOUT 900)
