"""The checks of test_shim_dump.py on train.py with 2 HCCL ranks (RANK_ID 0 and 1: rank0/ and rank1/
folders), in a file of their own so that ctest can run both halves in parallel; plus what only a
data-parallel run shows: the all-reduced gradients a kernel reads after HcclAllReduce are captured
in stream order (after the collective), identical on both ranks and the sum of both ranks' values."""
import inspect

import numpy as np

import npu_refs
import test_shim_dump
from shimtest import op_type
from test_shim_dump import pytest_generate_tests, runs  # noqa: F401 - pytest's hook and fixture, used here too

# Every test of test_shim_dump.py that runs per (dtype, ranks) configuration, collected again with CONFIGS.
globals().update({name: fn for name, fn in vars(test_shim_dump).items()
                  if name.startswith("test_") and {"dtype", "ranks"} <= set(inspect.signature(fn).parameters)})

CONFIGS = [("fp32", 2), ("bf16", 2)]


def test_all_reduced_inputs_are_captured_after_the_collective(runs, dtype, ranks):
    """Muls(x, 1/world, out=x) follows each HcclAllReduce: its input must be the reduced tensor."""
    r = runs("tensor", dtype, ranks)
    checked = 0
    for f0 in r.dump.folders():
        if f0.rank != 0:
            continue
        f1 = r.dump.folder(f0.step, 1)
        assert f0.names() == f1.names()
        order = sorted(f0.names(), key=lambda n: f0.data[n]["launch"]["index"])
        for k, name in enumerate(order):
            if op_type(name) != "Muls":
                continue
            x0, x1 = (f.load(f.data[name]["input_args"][0]) for f in (f0, f1))
            assert np.array_equal(x0, x1), f"step{f0.step} {name}: the ranks read different all-reduced inputs"
            dtype_name = f0.data[name]["input_args"][0]["dtype"]
            # The tensor before the collective is the output of an earlier kernel of the same name on each
            # rank (the ranks' shards differ, so those outputs differ); the reduced one is their sum.
            found = False
            for prev in reversed(order[:k]):
                for i, out in enumerate(f0.data[prev]["output"]):
                    if out is None or out["shape"] != f0.data[name]["input_args"][0]["shape"]:
                        continue
                    p0, p1 = f0.load(out), f1.load(f1.data[prev]["output"][i])
                    if np.array_equal(p0, p1):
                        continue
                    if npu_refs.compare(x0, p0.astype(np.float64) + p1, dtype_name) is None:
                        found = True
                        break
                if found:
                    break
            assert found, f"step{f0.step} {name}: input is not the sum over ranks of any earlier output"
            checked += 1
    assert checked == 8 * 3, checked  # 7 gradients and the loss, every step
