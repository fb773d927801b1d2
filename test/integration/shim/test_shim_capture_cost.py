"""What capture costs the host (issue 29), and that the cheaper capture records the same thing.

- Statistics executors kept per tensor layout and place (aclSetAclOpExecutorRepeatable + aclSetInputTensorAddr):
  test/python/reuse_workload.py meets them with new addresses, other shapes and dtypes, views, lists and in-place
  ops; every tensor's device statistics equal numpy's on the same tensor's file from a tensor-task run, so none went
  to a neighbour. Where the runtime refuses to keep executors (nnopbase: made with huge-page memory, which
  torch_npu's cache path sets up around phase 1), each reduction is made for its launch alone, with the same result.
- In the steady state of train.py the shim makes no aclnn phase-1 call and no argument object (the stand-in's call
  counters, FAKE_CANN_CALL_COUNTERS: the steps beyond the first ones, with the shim minus without it).
- tiny_npu's task queue at TASK_QUEUE_ENABLE=0, 1 and 2 (torch_npu's levels): the same kernels with the same
  statistics; at 2 phase 1 runs on the queue thread, stacks hold no Python frames and the shim says so once.
"""
import collections
import json
import os
import re

import pytest

import shimtest
from shimtest import PYTHON, run, run_train, tensors

REUSE = os.path.join(shimtest.SOURCE, "test", "python", "reuse_workload.py")
STATS = ("Max", "Min", "Mean", "Norm")


def by_place(r):
    """{(step, rank, kernel, side, slot): tensor dict} of a run's dump, in launch order."""
    out = {}
    for f, name, e in r.dump.kernels():
        for t in tensors(e):
            out[(f.step, f.rank, name, t.side, t.slot)] = t.info
    return out


def device_stats_line(r):
    m = re.search(r"device statistics: (\d+) tensors, (\d+) reduction kernels launched with (\d+) executors made "
                  r"\((\d+) tensors with executors of their own", r.stderr)
    assert m, r.stderr[-3000:]
    return dict(zip(("tensors", "kernels", "executors", "one_shot"), map(int, m.groups())))


@pytest.fixture(scope="module")
def reuse_runs(tmp_path_factory):
    cache = {}

    def get(label, **env):
        if label not in cache:
            d = tmp_path_factory.mktemp(label)
            cache[label] = run([PYTHON, REUSE], d, env={"MSPROBE_LOG_LEVEL": "info", **env}).check()
        return cache[label]
    return get


def check_against_files(stats_run, files_run):
    """Every tensor of `stats_run` (statistics task) has the statistics numpy computes on the same tensor's file in
    `files_run` (tensor task, the same program): Max and Min exactly, Mean and Norm within one rounding."""
    got, files = by_place(stats_run), by_place(files_run)
    assert got.keys() == files.keys() and len(got) > 300
    problems = []
    folders = {(f.step, f.rank): f for f in files_run.dump.folders()}
    for key, info in got.items():
        ref = files[key]
        want = shimtest.expected_stats(folders[key[:2]].load(ref), ref["dtype"])
        for k, w in zip(shimtest.STAT_KEYS, want):
            g = info.get(k)
            ok = (g == w or (w != w and g != g)) if k in ("Max", "Min") else shimtest.stat_close(g, w, info["dtype"])
            if not ok:
                problems.append(f"{key}: {k} {g!r}, numpy {w!r}")
    assert not problems, shimtest.fail_report(problems)
    return len(got)


def test_reused_executors_give_each_kernel_its_own_statistics(reuse_runs):
    stats, files = reuse_runs("statistics"), reuse_runs("tensor", MSPROBE_TASK="tensor")
    check_against_files(stats, files)
    d = device_stats_line(stats)
    # Executors were kept and used again: far fewer made than reductions launched, none made for one launch only.
    assert d["one_shot"] == 0 and d["tensors"] > 300, d
    assert d["executors"] * 3 < d["kernels"], d


def test_reused_executors_with_precision_high(reuse_runs):
    """MSPROBE_PRECISION=high: float16/bfloat16 means and norms in float32, each tensor's own norm kernel (no
    aclnnForeachNorm: its output has the tensors' dtype)."""
    high = reuse_runs("high", MSPROBE_PRECISION="high")
    host = reuse_runs("high_host", MSPROBE_PRECISION="high", MSPROBE_DEVICE_STATS="off")
    dev, ref = by_place(high), by_place(host)
    assert dev.keys() == ref.keys()
    for key, h in ref.items():
        for s in STATS:
            a, b = dev[key][s], h[s]
            assert a == b or abs(a - b) <= 1e-6 * max(abs(b), 1e-30), (key, s, a, b)


def test_refused_repeatable_executors_are_made_for_each_launch(reuse_runs, tmp_path):
    """TASK_QUEUE_ENABLE=0 with torch_npu's cache path: phase 2, and the shim's reductions with it, run inside
    InitHugeMemThreadLocal, where nnopbase refuses repeatable executors. The shim makes them for each launch; the
    statistics are the same."""
    r = run([PYTHON, REUSE], tmp_path, env={"MSPROBE_LOG_LEVEL": "info", "TASK_QUEUE_ENABLE": "0",
                                             "TINY_NPU_PTA_CACHE": "1"}).check()
    d = device_stats_line(r)
    # The cache's misses run phase 2 inside the scope (its hits do not): some tensors of each kind.
    assert d["one_shot"] > 50 and d["tensors"] - d["one_shot"] > 50, d
    check_against_files(r, reuse_runs("tensor", MSPROBE_TASK="tensor"))


def counters(path):
    with open(path) as f:
        return json.load(f)


def test_no_phase1_and_no_argument_object_in_the_steady_state(tmp_path):
    """train.py: what the shim adds per step once every kernel was seen (steps 4 to 8) is phase 2 only."""
    got = {}
    for steps in (4, 8):
        for shim in (False, True):
            path = tmp_path / f"calls_{steps}_{shim}.json"
            run_train(tmp_path / f"{steps}_{shim}", "--steps", str(steps), shim=shim,
                      env={"FAKE_CANN_CALL_COUNTERS": str(path)})
            got[(steps, shim)] = counters(path)
    added = {k: (got[(8, True)][k] - got[(8, False)][k]) - (got[(4, True)][k] - got[(4, False)][k])
             for k in got[(8, True)]}
    assert added["phase1"] == 0 and added["argument_created"] == 0 and added["executor_repeatable"] == 0, added
    assert added["phase2"] > 0 and added["copy"] > 0 and added["event_record"] > 0, added


# ---- tiny_npu's task queue levels -----------------------------------------------------------------------------------
def sequence(r):
    """Each folder's kernels in launch order: op type and the statistics of every tensor (names carry the Python
    scope, which level 2 does not see)."""
    out = []
    for f in r.dump.folders():
        for name, e in f.entries():
            out.append((f.step, shimtest.op_type(name),
                        [(t.side, t.slot, t.info["dtype"], t.info["shape"], [t.info.get(s) for s in STATS])
                         for t in tensors(e)]))
    return out


def python_frames(r):
    n = 0
    for f in r.dump.folders():
        path = os.path.join(f.path, "stack.json")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            stacks = json.load(fh)
        for _names, frames in stacks.values():  # {group: [kernel names, frames]}
            n += sum(1 for fr in frames if fr.startswith("File "))
    return n


NO_FRAMES = "ran on a thread without Python frames: with TASK_QUEUE_ENABLE=2"


@pytest.fixture(scope="module")
def levels(tmp_path_factory):
    cache = {}

    def get(level, shim=True):
        key = (level, shim)
        if key not in cache:
            d = tmp_path_factory.mktemp(f"level{level}_{shim}")
            cache[key] = run_train(d, "--steps", "3", shim=shim,
                                   env={"TASK_QUEUE_ENABLE": str(level), "MSPROBE_STACK": "python"})
        return cache[key]
    return get


@pytest.mark.parametrize("level", [0, 2])
def test_task_queue_levels_record_the_same_kernels(levels, level):
    one, other = levels(1), levels(level)
    assert other.losses() == one.losses() == levels(1, shim=False).losses()
    assert other.launches() == one.launches()
    assert sequence(other) == sequence(one) and len(sequence(one)) > 50


def test_level_2_stacks_have_no_python_frames_and_the_shim_says_why_once(levels):
    one, two = levels(1), levels(2)
    assert python_frames(one) > 0 and NO_FRAMES not in one.stderr
    assert python_frames(two) == 0
    assert two.stderr.count(NO_FRAMES) == 1, two.stderr[-3000:]
    assert "TASK_QUEUE_ENABLE=1" in two.stderr
    # Without Python frames every kernel's scope is the default one.
    names = [n for f in two.dump.folders() for n in f.names()]
    assert names and all(n.split(".")[1] == "Default" for n in names), names[:5]
