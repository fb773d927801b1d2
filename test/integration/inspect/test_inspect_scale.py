"""summary and verify on a synthetic statistics-only dump of 100k kernels finish in seconds.

The dump is written the way the collector writes it (one journal line per kernel), by a small generator here;
the times are printed (run with `pytest -s` to see them; the report notes them), not asserted.
"""
import json
import math
import random
import time

import pytest

from inspect_support import inspect

KERNELS = 100_000
OPS = ["Add", "Mul", "Matmul", "Gelu", "Softmax", "LayerNorm", "Cast", "ReduceSum", "Embedding", "MseLoss",
       "GeluBackward", "SoftmaxBackward", "ApplyAdamWV2", "InplaceZero", "HcclAllReduce", "Div", "Sub", "Exp",
       "Sqrt", "Transpose"]
NAN_LAUNCH, NAN_POS = 41_234, 90_000  # the first NaN by launch order sits late in the file
LATER_NAN_LAUNCH, LATER_NAN_POS = 60_000, 10_000  # an earlier line with a later launch_index


def number(v):
    return json.dumps(v)  # Python's repr, NaN / Infinity as msprobe writes them


def tensor(rng, shape, nan=False):
    mx, mn = rng.uniform(0, 3), rng.uniform(-3, 0)
    return {"type": "mindspore.Tensor", "dtype": "Float32", "shape": shape, "Max": float("nan") if nan else mx,
            "Min": mn, "Mean": (mx + mn) / 4, "Norm": math.sqrt(mx * mx + mn * mn) * 3, "format": "ND"}


def generate(folder):
    rng = random.Random(5)
    counters = {}
    names = []
    for i in range(KERNELS):
        op = OPS[i % len(OPS)]
        n = counters.get(op, 0)
        counters[op] = n + 1
        names.append(f"{op}.Default.{n}")
    launch = list(range(KERNELS))
    launch[NAN_POS], launch[NAN_LAUNCH] = launch[NAN_LAUNCH], launch[NAN_POS]
    launch[LATER_NAN_POS], launch[LATER_NAN_LAUNCH] = launch[LATER_NAN_LAUNCH], launch[LATER_NAN_POS]
    lines = []
    for i, name in enumerate(names):
        shape = [rng.randint(1, 64), rng.randint(1, 64)]
        entry = {"input_args": [tensor(rng, shape), tensor(rng, shape), {"type": "float", "value": 1.0}],
                 "output": [tensor(rng, shape, nan=i in (NAN_POS, LATER_NAN_POS))],
                 "launch_index": launch[i], "task_id": launch[i], "stream_id": 0, "timestamp": 1_700_000_000 + i}
        lines.append(json.dumps(name) + ": " + json.dumps(entry))
    folder.mkdir(parents=True)
    header = '{"task": "statistics", "level": "L2", "framework": "mindspore", "host_framework": "acl", ' \
             '"dump_data_dir": null, "data": {'
    (folder / "dump.json").write_text(header + "\n" + ",\n".join(lines) + "\n}}\n")
    (folder / "construct.json").write_text("{\n" + ",\n".join(f"{json.dumps(n)}: null" for n in names) + "\n}\n")
    return names, counters


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    names, counters = generate(root / "step0" / "rank0")
    return root, names, counters


def timed(*args, expect):
    t = time.monotonic()
    r = inspect(*args, expect=expect, timeout=600)
    return r, time.monotonic() - t


def test_summary_of_100k_kernels(big):
    root, names, counters = big
    size = (root / "step0" / "rank0" / "dump.json").stat().st_size
    r, seconds = timed("summary", root, "--json", expect=0)
    print(f"\nsummary: {KERNELS} kernels, dump.json {size / 2**20:.1f} MiB: {seconds:.2f} s")
    s = json.loads(r.stdout)
    assert s["kernels"] == KERNELS and s["tensors"] == 3 * KERNELS
    assert s["op_types"] == counters
    hit = s["first_nan_inf"]["rank0"]
    assert (hit["kernel"], hit["launch_index"], hit["tensor"], hit["stat"]) == \
        (names[NAN_POS], NAN_LAUNCH, "output.0", "Max")


def test_verify_of_100k_kernels(big):
    root, _, _ = big
    r, seconds = timed("verify", root, expect=0)
    print(f"\nverify: {KERNELS} kernels: {seconds:.2f} s")
    assert r.stdout.strip() == f"verify: 1 folder(s), {KERNELS} kernels, {3 * KERNELS} tensors, 0 tensor files " \
                               f"checked: OK"
