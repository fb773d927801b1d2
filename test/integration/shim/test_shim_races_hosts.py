"""MSPROBE_RACECHECK=1 on every correct host stays silent (docs/races.md): train.py under every task on 1 rank and on
2 ranks, the PyNative pipeline, llm_train.py tensor and expert parallel (collectives on the HCCL stream with its
events, as torch_npu's ProcessGroupHCCL), ms_kbk_train.py, acl_app and the graph hosts. Short runs: the check looks
at every launch, and one step holds each ordering the host makes."""
import glob
import json
import os

import pytest

from shimtest import BUILD, PYTHON, SOURCE, run

EX = os.path.join(SOURCE, "examples")
RACECHECK = {"MSPROBE_RACECHECK": "1"}
TRAIN = [PYTHON, os.path.join(EX, "train.py"), "--steps", "1"]
LLM = [PYTHON, os.path.join(EX, "llm_train.py"), "--steps", "1"]
HOSTS = {
    "train-statistics": (TRAIN, {}),
    "train-tensor": (TRAIN, {"MSPROBE_TASK": "tensor"}),
    "train-structure": (TRAIN, {"MSPROBE_TASK": "structure"}),
    "train-overflow_check": (TRAIN, {"MSPROBE_TASK": "overflow_check"}),
    "train-flight": (TRAIN, {"MSPROBE_TASK": "flight", "MSPROBE_FLIGHT_ON_EXIT": "1"}),
    "train-2ranks": (TRAIN + ["--ranks", "2"], {}),
    "train-2ranks-tensor": (TRAIN + ["--ranks", "2"], {"MSPROBE_TASK": "tensor"}),
    "train-chain": (TRAIN + ["--ranks", "2", "--chain"], {}),
    "pynative": (TRAIN, {"TINY_NPU_PYNATIVE": "1"}),
    "llm-1rank": (LLM, {}),
    "llm-tp-allreduce": (LLM + ["--ranks", "2", "--tp-mode", "allreduce"], {}),
    "llm-tp-sequence": (LLM + ["--ranks", "2", "--tp-mode", "sequence"], {}),
    "llm-ep": (LLM + ["--ranks", "2", "--tp-mode", "sequence", "--moe"], {}),
    "ms_kbk": ([PYTHON, os.path.join(EX, "ms_kbk_train.py"), "--steps", "1"], {"MSPROBE_TASK": "tensor"}),
    "acl_app": ([os.path.join(BUILD, "bin", "acl_app")], {}),
}
# Hosts whose kernels the device runs inside a model (reported by CANN's data dump, not launched one by one): no
# launch is stamped, and the check must say nothing.
GRAPH_HOSTS = {
    "graph_train": ([PYTHON, os.path.join(EX, "graph_train.py"), "--steps", "1"], {}),
    "graph_app": ([os.path.join(BUILD, "bin", "graph_app"), "--runs", "1"], {}),
}


def races_of(root):
    out = {}
    for path in glob.glob(os.path.join(root, "step*", "rank*", "races.json")):
        with open(path) as f:
            out[os.path.relpath(path, root)] = json.load(f)["races"]
    return out


def silent_run(tmp_path, name, cmd, env):
    r = run(cmd, tmp_path / name, env={**RACECHECK, **env}, timeout=300).check()
    assert "race check" not in r.stderr, r.stderr
    files = races_of(r.dump.root)
    assert all(races == {} for races in files.values()), files
    return r, files


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_a_correct_host_is_silent(tmp_path, name):
    cmd, env = HOSTS[name]
    r, files = silent_run(tmp_path, name, cmd, env)
    assert files, "the check wrote no races.json: it saw no launch"
    if name.startswith("llm-") and name != "llm-1rank":
        # The collectives ran on a stream of their own: the check had two streams to compare.
        streams = {e["launch"]["stream_id"] for folder in r.dump.folders() for _, e in folder.entries()}
        assert len(streams) >= 2, streams


@pytest.mark.parametrize("name", sorted(GRAPH_HOSTS))
def test_a_graph_host_is_silent(tmp_path, name):
    cmd, env = GRAPH_HOSTS[name]
    silent_run(tmp_path, name, cmd, env)
