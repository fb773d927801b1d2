"""The two rules every msprobe applies to a dump (issue 27, reference/msprobe_compare_facts.md §9), checked by a reader
of our own, written from those rules alone, on real dumps of every task and every host:

1. An entry's name carries a direction: its last or second-to-last '.'-token is forward, backward or parameters_grad,
   with at least three tokens before it. msprobe's compare (since March 2026) and its trend tool drop every other
   entry without a word, so a dump without it compares as "No valid data found", exit 0.
2. Nothing truthy that is not a string, list, bool or dict stands at an entry's top level: statistics and md5 mode
   run `"md5" in value` on every field of every entry, and a number there aborts the whole compare with TypeError.

The same keys name the entry's stack.json group, its construct.json member and its tensor files
({key}.{input|output}.{slot}...), so those are checked too.
"""
import json
import os

import pytest

import shimtest
from shimtest import run, run_train

DIRECTIONS = ("forward", "backward", "parameters_grad")
ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
GRAPH_APP = os.path.join(shimtest.BUILD, "bin", "graph_app")
GRAPH_TRAIN = os.path.join(shimtest.SOURCE, "examples", "graph_train.py")


def direction_problem(name):
    """Why msprobe would drop an entry of this name, or None."""
    tokens = name.split(".")
    for cut in (1, 2):
        if len(tokens) > cut and tokens[-cut] in DIRECTIONS:
            return None if len(tokens) - cut >= 3 else f"{name!r}: fewer than three tokens before the direction"
    return f"{name!r}: no direction token ({', '.join(DIRECTIONS)}) last or second to last"


def top_level_problem(name, key, value):
    """Why msprobe's `"md5" in value` test would abort on this member of an entry, or None."""
    if not value or isinstance(value, (str, list, bool, dict)):
        return None
    try:
        "md5" in value  # noqa: B015 -- what msprobe's statistics and md5 modes do to every member
    except TypeError as e:
        return f"{name}: member {key!r} = {value!r} aborts msprobe ({e})"
    return f"{name}: member {key!r} = {value!r} is not a string, list, bool or object"


def tensor_leaves(node):
    if isinstance(node, list):
        for x in node:
            yield from tensor_leaves(x)
    elif isinstance(node, dict) and "dtype" in node and "shape" in node:
        yield node


def rule_problems(root):
    """Every violation of the two rules in every rank folder under `root`, and how many entries were read."""
    problems, entries = [], 0
    folders = [dirpath for dirpath, _, files in os.walk(root) if "dump.json" in files]
    assert folders, f"no dump.json under {root}"
    for folder in sorted(folders):
        with open(os.path.join(folder, "dump.json"), encoding="utf-8") as f:
            data = json.load(f)["data"]
        for name, entry in data.items():
            entries += 1
            if (p := direction_problem(name)) is not None:
                problems.append(f"{folder}: {p}")
            problems += [f"{folder}: {p}" for key, value in entry.items()
                         if (p := top_level_problem(name, key, value)) is not None]
            for key in ("input_args", "output"):
                for t in tensor_leaves(entry.get(key) or []):
                    stem = f"{name}.{'input' if key == 'input_args' else 'output'}."
                    if "data_name" in t and not t["data_name"].startswith(stem):
                        problems.append(f"{folder}: {name}: data_name {t['data_name']!r} does not start with {stem!r}")
        with open(os.path.join(folder, "construct.json"), encoding="utf-8") as f:
            if set(json.load(f)) != set(data):
                problems.append(f"{folder}: construct.json's keys are not dump.json's")
        stack_path = os.path.join(folder, "stack.json")
        if os.path.exists(stack_path):
            with open(stack_path, encoding="utf-8") as f:
                stacked = {n for names, _frames in json.load(f).values() for n in names}
            if not stacked <= set(data):
                problems.append(f"{folder}: stack.json names kernels dump.json lacks: {sorted(stacked - set(data))[:3]}")
    return problems, entries


def test_the_rules_catch_what_msprobe_drops_or_aborts_on():
    """The reader itself: the old names and top-level numbers are what it must refuse."""
    assert direction_problem("Add.Default.0.forward") is None
    assert direction_problem("Add.Default.0.forward.input") is None  # second to last, as msprobe's row names
    assert direction_problem("Add.Default.0") is not None
    assert direction_problem("Add.forward") is not None
    assert top_level_problem("k", "launch", {"index": 3}) is None
    assert top_level_problem("k", "note", "output.0: 1 NaN") is None
    assert top_level_problem("k", "launch_index", 0) is None  # falsy: msprobe skips it
    assert top_level_problem("k", "launch_index", 35) is not None
    assert top_level_problem("k", "timestamp", 1.5) is not None


def check(root, want_at_least=1):
    problems, entries = rule_problems(root)
    assert entries >= want_at_least, (root, entries)
    assert not problems, shimtest.fail_report(problems)


@pytest.mark.parametrize("task,env", [
    ("statistics", {}),
    ("statistics", {"MSPROBE_SUMMARY_MODE": "md5"}),
    ("tensor", {}),
    ("structure", {}),
])
def test_train_two_ranks(tmp_path, task, env):
    """train.py with two HCCL ranks: aclnn kernels and all-reduces, every task."""
    r = run_train(tmp_path, "--steps", "2", "--ranks", "2", task=task, env=env)
    assert sorted({f.rank for f in r.dump.folders()}) == [0, 1]
    assert any(shimtest.op_type(n).startswith("Hccl") for _, n, _ in r.dump.kernels())
    check(r.dump.root, want_at_least=50)


@pytest.mark.parametrize("task", ["overflow_check", "flight"])
def test_train_overflow_and_flight_record(tmp_path, task):
    r = run_train(tmp_path, "--steps", "3", "--overflow-at", "1", task=task)
    entries = [e for _, _, e in r.dump.kernels()]
    assert entries and any("overflow" in e for e in entries), task
    if task == "flight":
        assert all(e.get("flight_trigger") == "overflow" for e in entries)
    check(r.dump.root)


def test_acl_app_aclnn_aclop_and_rt_kernels(tmp_path):
    r = run([ACL_APP], tmp_path, env={"MSPROBE_TASK": "tensor"}).check()
    ops = {shimtest.op_type(n) for _, n, _ in r.dump.kernels()}
    assert "fake_vector_add" in ops and len(ops) >= 3, ops  # an rt kernel beside aclnn and aclop ones
    check(r.dump.root)


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_graph_sunk_kernels(tmp_path, task):
    """graph_train.py (MindSpore O2-shaped, through CANN's data dump) and graph_app (.om inference)."""
    r = run([shimtest.PYTHON, GRAPH_TRAIN, "--steps", "2"], tmp_path / "train", env={"MSPROBE_TASK": task}).check()
    check(r.dump.root, want_at_least=10)
    r = run([GRAPH_APP, "--runs", "2"], tmp_path / "app", env={"MSPROBE_TASK": task}).check()
    check(r.dump.root)
