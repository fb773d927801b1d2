"""Graph-sunk kernels through CANN's data dump (issue 22): examples/graph_train.py (a MindSpore-O2-shaped training
step compiled into one model, run with one aclmdlExecute per step, with MindSpore's step hook) and examples/graph_app
(.om inference) under the shim. No kernel of theirs crosses the host API one by one; the shim turns CANN's dump on and
writes every model kernel of every selected step into the usual step{N}/rank{R}/ layout.

Checked: one entry per model kernel per step (against the stand-in's own log of the kernels its models ran), every
output equal to numpy's recomputation from the dumped inputs (node attributes from the model's own spec), statistics
equal numpy's on a tensor run's files, losses bit-identical with and without the shim, filters, two runs compared by
msprobe-inspect, and a host that runs CANN's dump itself keeps its files.
"""
import collections
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import npu_refs
import shimtest
from shimtest import fail_report, run

GRAPH_TRAIN = os.path.join(shimtest.SOURCE, "examples", "graph_train.py")
GRAPH_APP = os.path.join(shimtest.BUILD, "bin", "graph_app")
GRAPH_MLP = os.path.join(shimtest.SOURCE, "examples", "graph_mlp.json")
INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")
STEPS = 3

sys.path.insert(0, os.path.join(shimtest.SOURCE, "examples"))
import graph_train  # noqa: E402  (the model spec, with every node's attributes)


def train(workdir, *args, task="statistics", env=None, shim=True):
    e = {"MSPROBE_TASK": task, **(env or {})}
    return run([shimtest.PYTHON, GRAPH_TRAIN, "--steps", str(STEPS), *args], workdir, shim=shim, env=e).check()


def model_kernels(r):
    """The kernels the stand-in's models ran, from its log: Counter of op types."""
    path = r.launch_log + ".model"
    with open(path) as f:
        return collections.Counter(line.split(" ", 1)[0] for line in f if line.strip())


def entries(dump):
    """{(step, rank): [(name, entry), ...] in launch order}."""
    out = {}
    for f in dump.folders():
        out[(f.step, f.rank)] = sorted(f.entries(), key=lambda kv: kv[1]["launch"]["index"])
    return out


def recompute(node, args):
    """The node's outputs from its inputs, in float64, as float32."""
    x = [np.asarray(a, dtype=np.float64) for a in args]
    op, attrs = node["type"], node.get("attrs", {})
    if op == "MatMul":
        a = x[0].T if attrs.get("transpose_x1") else x[0]
        b = x[1].T if attrs.get("transpose_x2") else x[1]
        y = a @ b
    elif op in ("Add", "Sub", "Mul"):
        y = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](x[0], x[1])
    elif op == "Relu":
        y = np.maximum(x[0], 0)
    elif op == "ReluGrad":
        y = x[0] * (x[1] > 0)
    elif op == "ReduceSumD":
        y = x[0].sum(axis=tuple(attrs["axes"]), keepdims=attrs.get("keep_dims", False))
    elif op == "Muls":
        y = x[0] * np.float32(attrs["value"])
    else:
        raise AssertionError(f"no reference for {op}")
    return [np.asarray(y, dtype=np.float32)]


def check_against_model(dump, nodes, steps, missing=()):
    """Each step's kernels are the model's nodes in order (less the (step, node index) pairs in `missing`), and every
    output is numpy's recomputation."""
    problems, checked = [], 0
    for (step, rank), kernels in sorted(entries(dump).items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        folder = dump.folder(step, rank)
        want_nodes = [node for i, node in enumerate(nodes) if (step, i) not in missing]
        if [shimtest.op_type(n) for n, _ in kernels] != [node["type"] for node in want_nodes]:
            problems.append(f"step{step} rank{rank}: {[n for n, _ in kernels]}")
            continue
        for (name, e), node in zip(kernels, want_nodes):
            want = recompute(node, [folder.load(a) for a in e["input_args"]])
            for i, (out, w) in enumerate(zip(e["output"], want)):
                msg = npu_refs.compare(folder.load(out), w, out["dtype"])
                if msg:
                    problems.append(f"step{step}: {name} output {i}: {msg}")
            checked += 1
    assert sorted({s for s, _ in entries(dump)}) == list(range(steps))
    return problems, checked


def spec_of_graph_train():
    return graph_train.model_spec(0.05)


def test_statistics_one_entry_per_model_kernel_per_step_and_losses_unchanged(tmp_path):
    r = train(tmp_path / "s")
    nodes = spec_of_graph_train()["nodes"]
    got = collections.Counter(shimtest.op_type(n) for f in r.dump.folders() for n in f.names())
    assert got == model_kernels(r), (got, model_kernels(r))
    assert sum(got.values()) == len(nodes) * STEPS
    for (step, _), kernels in entries(r.dump).items():
        assert [shimtest.op_type(n) for n, _ in kernels] == [n["type"] for n in nodes], step
    plain = train(tmp_path / "p", shim=False)
    assert r.stdout == plain.stdout
    # Statistics come from CANN's stats CSV (no tensor crossed): they equal numpy's on a tensor run's files.
    t = train(tmp_path / "t", task="tensor")
    stats_entries, tensor_entries = entries(r.dump), entries(t.dump)
    compared = 0
    for key, kernels in tensor_entries.items():
        folder = t.dump.folder(*key)
        for (name, e), (sname, se) in zip(kernels, stats_entries[key]):
            assert name == sname
            for got_t, file_t in zip(shimtest.tensors(se), shimtest.tensors(e)):
                want = shimtest.expected_stats(folder.load(file_t.info), "Float32")
                for k, w in zip(shimtest.STAT_KEYS, want):
                    assert shimtest.stat_close(got_t.info[k], w, "Float32"), (name, got_t.side, got_t.slot, k)
                compared += 1
    assert compared > len(nodes) * STEPS


def test_tensor_task_outputs_equal_numpy_and_files_are_valid(tmp_path):
    r = train(tmp_path / "t", task="tensor")
    problems, _ = shimtest.check_files(r.dump)
    assert not problems, fail_report(problems)
    problems, checked = check_against_model(r.dump, spec_of_graph_train()["nodes"], STEPS)
    assert not problems, fail_report(problems)
    assert checked == len(spec_of_graph_train()["nodes"]) * STEPS
    # The stack is the step hook's: train()'s frame in graph_train.py, where it calls runner.step_begin().
    for f in r.dump.folders():
        with open(os.path.join(f.path, "stack.json")) as fh:
            frames = [frame for group in json.load(fh).values() for frame in group[1]]
        assert any("graph_train.py" in frame and "in train" in frame for frame in frames), frames


def test_two_ranks(tmp_path):
    r = train(tmp_path / "r", "--ranks", "2", task="tensor")
    ranks = sorted({f.rank for f in r.dump.folders()})
    assert ranks == [0, 1]
    nodes = spec_of_graph_train()["nodes"]
    for rank in ranks:
        assert sum(len(f.names()) for f in r.dump.folders() if f.rank == rank) == len(nodes) * STEPS
    problems, checked = check_against_model(r.dump, nodes, STEPS)
    assert not problems and checked == 2 * len(nodes) * STEPS, fail_report(problems)


def test_two_runs_compare_kernel_by_kernel(tmp_path):
    a = train(tmp_path / "a", task="tensor")
    b = train(tmp_path / "b", task="tensor")
    out = tmp_path / "cmp"
    p = subprocess.run([INSPECT, "compare", a.dump.root, b.dump.root, "--out", str(out)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = []
    for path in out.rglob("*.csv"):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    assert len(rows) >= len(spec_of_graph_train()["nodes"]) * STEPS, len(rows)


def graph_app(workdir, *args, env=None, shim=True):
    return run([GRAPH_APP, *args], workdir, shim=shim, env=env).check()


@pytest.mark.parametrize("mode", [(), ("--mem", "--async")])
def test_graph_app_inference(tmp_path, mode):
    with open(GRAPH_MLP) as f:
        nodes = json.load(f)["nodes"]
    r = graph_app(tmp_path / "a", *mode, "--runs", "3", env={"MSPROBE_TASK": "tensor"})
    assert sum(model_kernels(r).values()) == 3 * len(nodes)
    problems, checked = check_against_model(r.dump, nodes, 3)  # step n = the model's n-th execution
    assert not problems and checked == 3 * len(nodes), fail_report(problems)
    plain = graph_app(tmp_path / "p", *mode, "--runs", "3", shim=False)
    assert r.stdout == plain.stdout


def test_graph_app_filters(tmp_path):
    r = graph_app(tmp_path / "a", "--runs", "3",
                  env={"MSPROBE_TASK": "tensor", "MSPROBE_LIST": "MatMul", "MSPROBE_STEP": "1",
                       "MSPROBE_DATA_MODE": "output"})
    folders = r.dump.folders()
    assert [f.step for f in folders] == [1]
    names = folders[0].names()
    assert len(names) == 2 and all(shimtest.op_type(n) == "MatMul" for n in names), names
    for _, e in folders[0].entries():
        assert not e.get("input_args") and len(e["output"]) == 1


def test_disabled_shim_and_no_model_are_untouched(tmp_path):
    r = train(tmp_path / "off", env={"MSPROBE_ENABLE": "0"})
    assert not os.path.exists(r.dump.root)
    # train.py (op by op, no model): the graph path never turns CANN's dump on.
    t = shimtest.run_train(tmp_path / "ops", "--steps", "2")
    assert "dump" not in t.stderr.lower() or "graph" not in t.stderr.lower(), t.stderr


def test_host_with_its_own_dump_keeps_its_files(tmp_path):
    """A program that turns CANN's dump on itself (files to its own dump_path, no callback): the shim must not take
    its files away. It steps back from graph kernels and says so once."""
    own = tmp_path / "own"
    own.mkdir()
    plain = graph_app(tmp_path / "p", "--runs", "2", "--own-dump", str(tmp_path / "pown"), shim=False) \
        if (tmp_path / "pown").mkdir() is None else None
    r = graph_app(tmp_path / "a", "--runs", "2", "--own-dump", str(own), env={"MSPROBE_TASK": "tensor"})
    assert r.stdout == plain.stdout.replace(str(tmp_path / "pown"), str(own))
    with open(GRAPH_MLP) as f:
        nodes = len(json.load(f)["nodes"])
    assert "own dump: %d files" % (2 * nodes) in r.stdout, r.stdout
    warnings = [line for line in r.stderr.splitlines() if "turns CANN's data dump on itself" in line]
    assert len(warnings) == 1, r.stderr


def test_host_with_its_own_callback_gets_every_chunk_too(tmp_path):
    """A program that registers its own dump callback: the shim's callback is CANN's (one per process) and feeds the
    program's with every chunk, and the kernels are captured as well."""
    with open(GRAPH_MLP) as f:
        nodes = json.load(f)["nodes"]
    r = graph_app(tmp_path / "a", "--runs", "2", "--own-callback", env={"MSPROBE_TASK": "tensor"})
    assert "own callback: %d files in" % (2 * len(nodes)) in r.stdout, r.stdout
    problems, checked = check_against_model(r.dump, nodes, 2)
    assert not problems and checked == 2 * len(nodes), fail_report(problems)
    # Without the shim the program's callback gets nothing: nobody turned the dump on.
    plain = graph_app(tmp_path / "p", "--runs", "2", "--own-callback", shim=False)
    assert "own callback: 0 files in 0 chunks" in plain.stdout, plain.stdout


def test_a_program_callback_that_never_returns_does_not_hang_the_program(tmp_path):
    """The shim feeds the program's own dump callback (above); one that never returns holds CANN's record thread, so
    the shim's drain (aclmdlFinalizeDump at aclrtResetDevice) would wait for ever. It waits a bounded time, says so
    once, and the program ends as it does without the shim (whose callback is then never called)."""
    plain = graph_app(tmp_path / "p", "--runs", "2", "--stuck-callback", shim=False)
    started = time.monotonic()
    r = run([GRAPH_APP, "--runs", "2", "--stuck-callback"], tmp_path / "a", timeout=120,
            env={"MSPROBE_TASK": "tensor", "SHIM_TEST_DRAIN_TIMEOUT_MS": "1500"}).check()
    elapsed = time.monotonic() - started
    assert r.stdout == plain.stdout
    warnings = [line for line in r.stderr.splitlines() if "did not finish delivering the dump" in line]
    assert len(warnings) == 1 and "within 1.5 s" in warnings[0], r.stderr
    assert elapsed < 60, elapsed  # the bound, not the callback, ended the wait


# What each damage planted by the stand-in (FAKE_CANN_DUMP_FAULT, fake_cann/README.md) makes the shim say.
DAMAGE = {
    "corrupt": "DumpData: truncated or overlong field key",  # the protobuf cannot be read
    "cut": "ends past the file's",  # the last chunk is short: the tensors end early
    "header": "file dropped",  # a chunk header whose bufLen the callback's len does not hold
    "truncate": "the dump ended before the file's last chunk; the kernel is not recorded",  # never ends
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_dump_file_costs_only_its_kernel(tmp_path, damage):
    """CANN delivers the third kernel's dump file damaged: one error line names that file (CANN's own path), every
    other kernel is recorded and equals numpy, and the program's output and exit status are those without the shim."""
    with open(GRAPH_MLP) as f:
        nodes = json.load(f)["nodes"]
    env = {"MSPROBE_TASK": "tensor", "FAKE_CANN_DUMP_FAULT": f"{damage}:3"}
    r = graph_app(tmp_path / "a", "--runs", "2", env=env)
    plain = graph_app(tmp_path / "p", "--runs", "2", shim=False)
    assert r.stdout == plain.stdout
    errors = [line for line in r.stderr.splitlines() if "graph dump:" in line]
    assert len(errors) == 1 and DAMAGE[damage] in errors[0], r.stderr
    assert f"/graph_mlp/1/0/{nodes[2]['type']}." in errors[0] and "msprobe_shim_graph_" not in errors[0], errors[0]
    problems, checked = check_against_model(r.dump, nodes, 2, missing={(0, 2)})
    assert not problems and checked == 2 * len(nodes) - 1, fail_report(problems)


def test_a_dump_that_never_ends_in_a_training_run(tmp_path):
    """graph_train.py with MindSpore's step hook and 100-byte chunks: the fifth file's last chunk never comes. Each
    step's dump is drained at the step's end; the unfinished file is reported once, at exit, and nothing else is
    lost: the other kernels of all steps are recorded and equal numpy, and the losses are those without the shim."""
    nodes = spec_of_graph_train()["nodes"]
    env = {"FAKE_CANN_DUMP_FAULT": "truncate:5", "FAKE_CANN_DUMP_CHUNK_BYTES": "100"}
    r = train(tmp_path / "a", task="tensor", env=env)
    plain = train(tmp_path / "p", shim=False)
    assert r.stdout == plain.stdout
    errors = [line for line in r.stderr.splitlines() if "graph dump:" in line]
    assert len(errors) == 1 and DAMAGE["truncate"] in errors[0], r.stderr
    assert f"/{nodes[4]['type']}." in errors[0], errors[0]
    problems, checked = check_against_model(r.dump, nodes, STEPS, missing={(0, 4)})
    assert not problems and checked == STEPS * len(nodes) - 1, fail_report(problems)


def test_a_tensor_in_a_device_format_is_described_not_decoded(tmp_path):
    """graph_app's model with its hidden activation `a` laid out as FRACTAL_NZ (a format whose bytes are not in
    row-major order): the shim does not convert layouts, so the Relu's output and the second MatMul's input are
    described (dtype, shape) without data, and the entry's graph_note says why; every other tensor is decoded and
    every kernel is still there."""
    with open(GRAPH_MLP) as f:
        spec = json.load(f)
    for t in spec["tensors"]:
        if t["name"] == "a":
            t["format"] = "FRACTAL_NZ"
    with open(tmp_path / "nz.json", "w") as f:
        json.dump(spec, f)
    model = tmp_path / "nz.om"
    subprocess.run([shimtest.PYTHON, os.path.join(shimtest.SOURCE, "test", "fake_cann", "tools", "fake_atc.py"),
                    str(tmp_path / "nz.json"), str(model)], check=True)
    r = graph_app(tmp_path / "a", "--runs", "1", str(model), env={"MSPROBE_TASK": "tensor"})
    assert not [line for line in r.stderr.splitlines() if "graph dump:" in line], r.stderr
    folder = r.dump.folder(0, None)
    kernels = entries(r.dump)[(0, None)]
    assert [shimtest.op_type(n) for n, _ in kernels] == [n["type"] for n in spec["nodes"]]
    undecoded = []
    for name, e in kernels:
        for side in ("input_args", "output"):
            for i, t in enumerate(e.get(side) or []):
                if "data_name" not in t:
                    undecoded.append((shimtest.op_type(name), side, i))
                    assert t["dtype"] == "torch.float32" or t["dtype"] == "Float32", t
                    assert list(t["shape"]) == [4, 16], t
                    assert "device format FRACTAL_NZ is not row-major" in e["graph_note"], e
                else:
                    assert folder.load(t) is not None
    produced_by = {n["name"]: n["type"] for n in spec["nodes"] if "a" in n["outputs"]}
    consumers = [n["type"] for n in spec["nodes"] if "a" in n["inputs"]]
    assert sorted(undecoded) == sorted([(t, "output", 0) for t in produced_by.values()] +
                                       [(t, "input_args", 0) for t in consumers]), undecoded
