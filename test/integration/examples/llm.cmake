# examples/llm_train.py, the LLM training host (issue 41): numpy checks of its loss and gradients, 20-step runs on 1 and
# 2 ranks, the shim's runs, the planted-NaN seams (msprobe-inspect first-nan).
msprobe_pytest(test_llm_train.py TIMEOUT 900)
# Every kernel of llm_train.py in every task, its values numpy's (issue 41, item 3).
msprobe_pytest(test_llm_tasks.py TIMEOUT 900)
