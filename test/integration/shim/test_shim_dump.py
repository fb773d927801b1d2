"""libmsprobe_shim.so's dumps of examples/train.py are complete and correct (issue 3, "Done when").

For fp32 and bf16, 1 rank and 2 HCCL ranks (3 steps each):
- completeness: one dump.json entry per aclnn kernel the stand-in launched (its FAKE_CANN_LAUNCH_LOG),
  per op type; launch fields on every entry; construct.json lists exactly the kernels; rank folders;
- tensor task: every file loads with numpy, shape/dtype as in dump.json, and for every op type an
  independent numpy reference (npu_refs) recomputes the dumped outputs from the dumped inputs
  (in-place tensors: inputs PRE-kernel, outputs POST-kernel);
- statistics: Max/Min/Mean/Norm equal numpy's on the file data, and the statistics task (no files)
  writes exactly the tensor task's statistics;
- the host is unchanged: losses and final parameters bit-identical with and without the shim, same
  exit status; two runs give the same kernel names in every step/rank folder.
"""
import collections
import functools
import os
import re

import numpy as np
import pytest

import shimtest
from shimtest import fail_report, op_type, tensors

STEPS = 3
# (dtype, ranks) of the runs checked here; test_shim_dump_ranks.py runs the same tests with 2 ranks.
CONFIGS = [("fp32", 1), ("bf16", 1)]
LAUNCH_FIELDS = ("index", "task_id", "stream_id", "timestamp")  # members of an entry's "launch" object


def pytest_generate_tests(metafunc):
    """Tests taking (dtype, ranks) run for every configuration of the module that collects them."""
    if {"dtype", "ranks"} <= set(metafunc.fixturenames):
        configs = metafunc.module.CONFIGS
        metafunc.parametrize("dtype,ranks", configs, ids=[f"{d}-{r}rank" for d, r in configs])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """runs(kind, dtype, ranks): one train.py run per configuration, made on first use and shared.

    kind: "stats" (the shim with its default task), "tensor" (MSPROBE_TASK=tensor) or "plain" (no shim).
    Every run saves its exact losses and final parameters with --dump."""
    root = tmp_path_factory.mktemp("shim_dump")

    @functools.lru_cache(maxsize=None)
    def get(kind, dtype, ranks):
        work = root / f"{kind}-{dtype}-{ranks}"
        args = ["--steps", str(STEPS), "--dtype", dtype, "--ranks", str(ranks),
                "--dump", str(work / "final-{rank}.npz")]
        return shimtest.run_train(work, *args, shim=kind != "plain", task="tensor" if kind == "tensor" else None)
    return get


def expected_collectives(ranks):
    """HCCL kernels of the workload per rank: with several ranks every step all-reduces its 7 gradients
    and its loss (train.py, tiny_npu.distributed); the stand-in's launch log only lists aclnn kernels."""
    return collections.Counter({"HcclAllReduce": 8 * STEPS} if ranks > 1 else {})


def is_collective(op):
    return op.startswith("Hccl")


def split_counts(counts):
    """(aclnn op types, HCCL calls) of a Counter of op types."""
    aclnn = collections.Counter({k: v for k, v in counts.items() if not is_collective(k)})
    return aclnn, collections.Counter({k: v for k, v in counts.items() if is_collective(k)})


# ---- 1. completeness ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["stats", "tensor"])
def test_one_entry_per_launched_kernel(runs, kind, dtype, ranks):
    r = runs(kind, dtype, ranks)
    launched = r.launches()
    assert sum(launched.values()) > 50, f"the launch log is (nearly) empty: {launched}"
    dumped, hccl = split_counts(r.dump.op_counts())
    assert dumped == launched, (f"aclnn kernels per op type: dump {sorted(dumped.items())} != launched "
                                f"{sorted(launched.items())}")
    if ranks == 1:
        assert r.dump.ranks() == [None], "one process without RANK_ID/RANK must write rank/ folders"
        assert not hccl, hccl
    else:
        # Every rank process appends to the one launch log; ranks run the same program, so each rank
        # folder set must hold exactly its half, op type by op type.
        assert r.dump.ranks() == list(range(ranks)), f"rank folders: {[f.path for f in r.dump.folders()]}"
        per_rank = [split_counts(r.dump.op_counts(rank)) for rank in range(ranks)]
        assert all(c == per_rank[0] for c in per_rank), per_rank
        assert {k: v * ranks for k, v in per_rank[0][0].items()} == launched
        assert per_rank[0][1] == expected_collectives(ranks), f"HCCL kernels of rank 0: {per_rank[0][1]}"


@pytest.mark.parametrize("kind", ["stats", "tensor"])
def test_entries_files_and_construct(runs, kind, dtype, ranks):
    r = runs(kind, dtype, ranks)
    task = "statistics" if kind == "stats" else "tensor"
    problems = []
    launch_indices = {}
    for f in r.dump.folders():
        d = f.dump
        header = {k: d.get(k) for k in ("task", "level", "framework", "host_framework")}
        if header != {"task": task, "level": "L2", "framework": "mindspore", "host_framework": "acl"}:
            problems.append(f"{f.path}: header {header}")
        if os.path.normpath(d.get("dump_data_dir") or "") != os.path.normpath(f.tensor_dir) and kind == "tensor":
            problems.append(f"{f.path}: dump_data_dir {d.get('dump_data_dir')!r}")
        # construct.json: exactly the kernels of dump.json, flat, every value null.
        if set(f.construct) != f.names():
            problems.append(f"{f.path}: construct.json names differ from dump.json's: "
                            f"{sorted(set(f.construct) ^ f.names())[:5]}")
        if any(v is not None for v in f.construct.values()):
            problems.append(f"{f.path}: construct.json has non-null values")
        # Names: {OpType}.{OpName}.{n}.forward, OpName sanitized (the Python scope, or Default), n = 0, 1, ... per
        # OpType.OpName in this folder, in launch order.
        by_type = {}
        for name, e in sorted(f.entries(), key=lambda kv: kv[1].get("launch", {}).get("index", -1)):
            parts = name.split(".")
            if len(parts) != 4 or not re.fullmatch(r"[A-Za-z0-9_-]+", parts[1]) or not parts[2].isdigit() \
                    or parts[3] != "forward":
                problems.append(f"{f.path}: kernel name {name!r}")
                continue
            by_type.setdefault(parts[0] + "." + parts[1], []).append(int(parts[2]))
            missing = [k for k in LAUNCH_FIELDS if not isinstance(e.get("launch", {}).get(k), int)]
            if missing:
                problems.append(f"{f.path}: {name} lacks integer {missing}")
                continue
            launch_indices.setdefault(f.rank, []).append((e["launch"]["index"], e["launch"]["task_id"], e["launch"]["stream_id"],
                                                          e["launch"]["timestamp"], name))
            if "input_args" not in e or "output" not in e:
                problems.append(f"{f.path}: {name} lacks input_args or output")
            for t in tensors(e):
                if kind == "stats" and "data_name" in t.info:
                    problems.append(f"{f.path}: {name} has a data_name in the statistics task")
                if kind == "tensor" and "data_name" not in t.info:
                    problems.append(f"{f.path}: {name} {t.side}.{t.slot} has no data_name in the tensor task")
        for op, ns in by_type.items():
            if ns != list(range(len(ns))):
                problems.append(f"{f.path}: {op} ordinals in launch order are {ns}")
        if kind == "stats" and f.files():
            problems.append(f"{f.path}: statistics task wrote tensor files {f.files()[:3]}")
    # One process per rank, one stream: launch_index counts every launch from 0, task_id equals it on
    # stream 0, and the timestamps follow launch order.
    for rank, rows in launch_indices.items():
        rows.sort()
        if [row[0] for row in rows] != list(range(len(rows))):
            problems.append(f"rank {rank}: launch_index values are not 0..{len(rows) - 1}")
        if any(row[1] != row[0] or row[2] != 0 for row in rows):
            problems.append(f"rank {rank}: task_id/stream_id not (launch_index, 0) on the single stream")
        if any(b[3] < a[3] for a, b in zip(rows, rows[1:])):
            problems.append(f"rank {rank}: timestamps go backwards in launch order")
    assert not problems, fail_report(problems)


def test_one_folder_per_training_step(runs, dtype, ranks):
    """A step ends after the optimizer's run of ApplyAdamWV2 kernels: 3 steps, 3 step folders."""
    r = runs("stats", dtype, ranks)
    steps = r.dump.steps()
    assert steps == list(range(STEPS)), (
        f"{len(steps)} step folders for a {STEPS}-step run: {steps[:10]}{'...' if len(steps) > 10 else ''}; "
        f"first kernels of the first folders: "
        + "; ".join(f"step{f.step}: {sorted(f.names(), key=lambda n: f.data[n]['launch']['index'])[:4]}"
                    for f in r.dump.folders()[:4])
        + ". (The default step marker ends a step at the first non-optimizer kernel after ApplyAdamWV2; "
          "mixed-precision AdamW launches Cast kernels between its ApplyAdamWV2 kernels.)")
    for f in r.dump.folders():
        assert f.op_counts()["ApplyAdamWV2"] == 7, f"{f.path}: {f.op_counts()}"  # 7 parameters, one step each


# ---- 2. tensor task: files and independent recomputation -------------------------------------------------------
def test_tensor_files_load_with_their_shape_and_dtype(runs, dtype, ranks):
    problems, seen_dtypes = shimtest.check_files(runs("tensor", dtype, ranks).dump)
    assert not problems, fail_report(problems)
    assert seen_dtypes == {"Float32", "Int64"} | ({"BFloat16"} if dtype == "bf16" else set()), seen_dtypes


def test_outputs_match_numpy_recomputation_from_inputs(runs, dtype, ranks):
    r = runs("tensor", dtype, ranks)
    problems, checked = shimtest.check_recomputation(r.dump)
    assert not problems, fail_report(problems)
    # Every op type the stand-in launched was recomputed, every time it ran (and every collective).
    aclnn, hccl = split_counts(checked)
    assert aclnn == r.launches(), (aclnn, r.launches())
    assert hccl == collections.Counter({k: v * ranks for k, v in expected_collectives(ranks).items()}), hccl


def f32(x):
    return float(np.float32(x))


T = "tensor"


def train_width():
    """examples/train.py's default model width (LayerNorm's normalized shape), read from its source."""
    with open(shimtest.TRAIN) as f:
        m = re.search(r"^VOCAB, HIDDEN, FFN, CLASSES = \d+, (\d+),", f.read(), re.M)
    assert m, "train.py no longer defines VOCAB, HIDDEN, FFN, CLASSES"
    return int(m.group(1))


W = train_width()
# The non-tensor phase-1 arguments train.py passes (tiny_npu.ops / optim / distributed), as the shim must
# record them: doubles and floats as "float" (a by-value C float keeps its float32 value), int64_t/int8_t
# as "int", bool, handles by their aclnn type; a list value stands for a sequence (aclIntArray, aclBoolArray),
# written as msprobe writes one: a list of scalar leaves of that type. "out" stands for the output's dtype.
EXPECTED_ARGS = {
    "Add": [T, T, ("float", 1.0)],
    "Adds": [T, ("float", 1.0), ("float", 1.0)],
    "Muls": [T, ("float", 0.5)],
    "Matmul": [T, T, ("int", 0)],
    "Gelu": [T], "GeluBackward": [T, T], "Embedding": [T, T], "InplaceZero": [T],
    "LayerNorm": [T, ("int", [W]), T, T, ("float", 1e-5)],
    "LayerNormBackward": [T, T, ("int", [W]), T, T, T, T, ("bool", [True, True, True])],
    "EmbeddingDenseBackward": [T, T, ("int", 16), ("int", (-1, 2 ** 64 - 1)), ("bool", False)],
    "Softmax": [T, ("int", -1)], "SoftmaxBackward": [T, T, ("int", -1)],
    "MseLoss": [T, T, ("int", 1)], "MseLossBackward": [T, T, T, ("int", 1)],
    "ReduceSum": [T, ("int", [0]), ("bool", False), ("aclDataType", "out")],
    "Cast": [T, ("aclDataType", "out")],
    "ApplyAdamWV2": [T, T, T, None, T, T, ("float", f32(0.02)), ("float", f32(0.9)), ("float", f32(0.999)),
                     ("float", f32(0.01)), ("float", f32(1e-8)), ("bool", False), ("bool", False)],
    "HcclAllReduce": [T, ("str", "sum")],
}


def test_non_tensor_arguments_are_recorded_exactly(runs, dtype, ranks):
    r = runs("stats", dtype, ranks)
    problems, seen = [], set()
    for f, name, e in r.dump.kernels():
        op = op_type(name)
        want = EXPECTED_ARGS.get(op)
        if want is None:
            problems.append(f"{name}: no expected arguments for op type {op}")
            continue
        seen.add(op)
        got = e["input_args"]
        if len(got) != len(want):
            problems.append(f"{name}: {len(got)} input_args, expected {len(want)}")
            continue
        for i, (g, w) in enumerate(zip(got, want)):
            if w == T:
                ok = shimtest.is_tensor(g)
            elif w is None:
                ok = g is None
            else:
                typ, value = w
                if value == "out":
                    value = e["output"][0]["dtype"].lower()
                values = value if isinstance(value, tuple) else (value,)
                if isinstance(value, list):
                    ok = isinstance(g, list) and all(isinstance(x, dict) for x in g) and [
                        (x.get("type"), x.get("value"), type(x.get("value"))) for x in g] == [
                        (typ, v, type(v)) for v in value]
                else:
                    ok = isinstance(g, dict) and g.get("type") == typ and any(
                        g.get("value") == v and type(g.get("value")) is type(v) for v in values)
            if not ok:
                problems.append(f"{name}: input_args[{i}] = {g!r}, expected {w!r}")
    assert not problems, fail_report(problems)
    assert seen == set(r.launches()) | set(expected_collectives(ranks)), seen


def test_in_place_tensors_hold_pre_and_post_kernel_values(runs, dtype, ranks):
    """ApplyAdamWV2 updates varRef/mRef/vRef in place and step_count is advanced by Adds(out=self): their
    inputs must differ from their outputs exactly as one update does (not both PRE or both POST)."""
    r = runs("tensor", dtype, ranks)
    for rank in r.dump.ranks():
        kernels = [(f, n, e) for f, n, e in r.dump.kernels() if f.rank == rank]
        adam = [(f, n, e) for f, n, e in kernels if op_type(n) == "ApplyAdamWV2"]
        assert len(adam) == 7 * STEPS
        for f, name, e in adam:
            for slot in range(3):  # var, m, v
                pre, post = f.load(e["input_args"][slot]), f.load(e["output"][slot])
                assert not np.array_equal(pre, post), f"{name}: in/out {slot} are identical: not PRE and POST"
        steps = sorted(float(f.load(e["input_args"][5]).reshape(-1)[0]) for f, _, e in adam)
        assert steps == [float(s + 1) for s in range(STEPS) for _ in range(7)], steps
        adds = sorted((float(f.load(e["input_args"][0]).reshape(-1)[0]),
                       float(f.load(e["output"][0]).reshape(-1)[0]))
                      for f, n, e in kernels if op_type(n) == "Adds")
        assert adds == [(float(s), float(s + 1)) for s in range(STEPS)], adds


# ---- 3. statistics --------------------------------------------------------------------------------------------
def test_statistics_match_numpy_on_the_files(runs, dtype, ranks):
    problems, n = shimtest.check_statistics(runs("tensor", dtype, ranks).dump)
    assert not problems, fail_report(problems)
    assert n > 100


def _strip(arg):
    """A dumped argument without what only the tensor task writes (data_name)."""
    if isinstance(arg, list):
        return [_strip(a) for a in arg]
    if isinstance(arg, dict):
        return {k: v for k, v in arg.items() if k != "data_name"}
    return arg


def _same(a, b):
    """Equality where NaN equals NaN (garbage in never-written memory may be NaN)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_statistics_task_equals_tensor_task(runs, dtype, ranks):
    """The same deterministic run gives identical entries (statistics, shapes, arguments) in both tasks."""
    stats, tensor = runs("stats", dtype, ranks), runs("tensor", dtype, ranks)
    a, b = stats.dump.names_by_folder(), tensor.dump.names_by_folder()
    assert a == b, "kernel names differ between the statistics and the tensor task"
    problems = []
    for fa in stats.dump.folders():
        fb = tensor.dump.folder(fa.step, fa.rank)
        for name, ea in fa.entries():
            eb = fb.data[name]
            for key in ("input_args", "output"):
                if not _same(_strip(ea[key]), _strip(eb[key])):
                    problems.append(f"step{fa.step} rank{fa.rank} {name}.{key}: statistics task {ea[key]} != "
                                    f"tensor task {eb[key]}")
    assert not problems, fail_report(problems, limit=5)


# ---- 4. the host is unchanged ---------------------------------------------------------------------------------
def test_losses_and_parameters_bit_identical_with_and_without_the_shim(runs, dtype, ranks):
    plain = runs("plain", dtype, ranks)
    assert set(plain.losses()) == set(range(ranks)) and all(len(v) == STEPS for v in plain.losses().values())
    for kind in ("stats", "tensor"):
        shim = runs(kind, dtype, ranks)
        assert shim.returncode == plain.returncode == 0
        assert shim.losses() == plain.losses(), f"{kind}: printed losses changed under the shim"
        for rank in range(ranks):
            pa = np.load(os.path.join(plain.workdir, f"final-{rank}.npz"))
            pb = np.load(os.path.join(shim.workdir, f"final-{rank}.npz"))
            assert sorted(pa.files) == sorted(pb.files)
            for k in pa.files:
                assert pa[k].tobytes() == pb[k].tobytes(), f"{kind} rank {rank}: {k} differs under the shim"
    # Nothing leaks onto the host's stdout (diagnostics go to stderr).
    assert runs("tensor", dtype, ranks).stdout == plain.stdout


def test_exit_status_is_unchanged(tmp_path):
    """A failing host run fails the same way under the shim."""
    # argparse refuses an argument before any ACL call; np.savez fails after every kernel has run.
    for args, want in ((["--dtype", "fp128"], 2), (["--steps", "1", "--dump", str(tmp_path / "no" / "x.npz")], 1)):
        plain = shimtest.run_train(tmp_path / "plain", *args, shim=False, check=False)
        shim = shimtest.run_train(tmp_path / "shim", *args, check=False)
        assert plain.returncode == want, plain.stderr
        assert shim.returncode == plain.returncode, (args, shim.stderr)
        assert shim.stdout == plain.stdout


def test_two_runs_give_the_same_kernel_names(runs, dtype, ranks):
    a, b = runs("stats", dtype, ranks).dump.names_by_folder(), runs("tensor", dtype, ranks).dump.names_by_folder()
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], f"step/rank {key}: names differ: {sorted(a[key] ^ b[key])[:10]}"
