# replay's CPU references (tools/replay/refs_*.cpp) against numpy formulas written in the tests, on hand-made tensor
# dumps (replay_dumps.py).
foreach(part collective attention transformer moe norm_loss)
  msprobe_pytest(test_replay_refs_${part}.py TIMEOUT 300)
endforeach()
