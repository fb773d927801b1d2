"""tiny_npu's MindSpore-PyNative-shaped mode (TINY_NPU_PYNATIVE=1: frontend_queue, backend_queue, launch_queue) under
train.py, with the queues on and with MS_DEV_LAUNCH_BLOCKING=1: the same training as tiny_npu's own dispatch; under the
shim, every kernel captured with values its numpy reference recomputes; with the queues, one message saying that
Python frames need MS_DEV_LAUNCH_BLOCKING=1 and kernels named Default; with it, no message and the Python scope."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import shimtest  # noqa: E402

STEPS = "2"
PYNATIVE = {"TINY_NPU_PYNATIVE": "1"}
BLOCKING = {"TINY_NPU_PYNATIVE": "1", "MS_DEV_LAUNCH_BLOCKING": "1"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """tiny_npu's own dispatch, under the shim."""
    return shimtest.run_train(tmp_path_factory.mktemp("ref"), "--steps", STEPS, task="tensor")


def test_the_pipeline_trains_as_tiny_npus_own_dispatch(reference, tmp_path):
    for name, env in (("queues", PYNATIVE), ("blocking", BLOCKING)):
        r = shimtest.run_train(tmp_path / name, "--steps", STEPS, shim=False, env=env)
        assert r.losses() == reference.losses(), name


def launch_warnings(stderr):
    return [ln for ln in stderr.splitlines() if "MS_DEV_LAUNCH_BLOCKING=1" in ln]


def test_with_the_queues_one_message_and_no_python_frames(reference, tmp_path):
    r = shimtest.run_train(tmp_path, "--steps", STEPS, task="tensor", env=PYNATIVE)
    assert r.losses() == reference.losses()
    warnings = launch_warnings(r.stderr)
    assert len(warnings) == 1, r.stderr
    assert "backend_queue" in warnings[0] and "no Python frames" in warnings[0]
    names = set().union(*(f.names() for f in r.dump.folders()))
    assert names and all(n.split(".")[1] == "Default" for n in names), sorted(names)[:5]
    # The same kernels as tiny_npu's own dispatch launches, step by step (only their OpName differs).
    for mine, theirs in zip(r.dump.folders(), reference.dump.folders()):
        assert mine.op_counts() == theirs.op_counts()
    problems, checked = shimtest.check_recomputation(r.dump)
    assert not problems, "\n".join(problems[:10])
    assert sum(checked.values()) == sum(len(f.names()) for f in r.dump.folders())
    for f in r.dump.folders():  # the launching threads have no Python frames
        stacks = json.load(open(os.path.join(f.path, "stack.json")))
        assert not any(fr.startswith("File ") for group in stacks.values() for fr in group[1]), f.path


def test_with_launch_blocking_the_python_scope_and_no_message(reference, tmp_path):
    r = shimtest.run_train(tmp_path, "--steps", STEPS, task="tensor", env=BLOCKING)
    assert r.losses() == reference.losses()
    assert not launch_warnings(r.stderr), r.stderr
    # Every stage ran on the Python thread: the kernels are named from the model's scope as with tiny_npu's own
    # dispatch, executor-cache hits included (their launch's own frames, not those of the call that made them).
    for mine, theirs in zip(r.dump.folders(), reference.dump.folders()):
        assert mine.names() == theirs.names(), sorted(mine.names() ^ theirs.names())[:6]
    problems, _ = shimtest.check_recomputation(r.dump)
    assert not problems, "\n".join(problems[:10])
    f = r.dump.folders()[0]
    stacks = json.load(open(os.path.join(f.path, "stack.json")))
    assert any(fr.startswith("File ") and "train.py" in fr for group in stacks.values() for fr in group[1])
