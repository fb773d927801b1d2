"""examples/graph_app: inference through the model API (graph_mlp.om, written at build time by fake_atc.py), both load
paths and both execute paths, each output checked by the program against its own CPU computation."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import shimtest  # noqa: E402

APP = os.path.join(shimtest.BUILD, "bin", "graph_app")
MODEL = os.path.join(shimtest.BUILD, "examples", "graph_mlp.om")
SPEC = os.path.join(shimtest.SOURCE, "examples", "graph_mlp.json")
sys.path.insert(0, os.path.join(shimtest.SOURCE, "test", "fake_cann", "tools"))
import fake_atc  # noqa: E402


def run_app(*args):
    return subprocess.run([APP, *args], capture_output=True, text=True, timeout=60, env=shimtest.clean_env())


@pytest.mark.parametrize("load", [[], ["--mem"]], ids=["from_file", "from_mem"])
@pytest.mark.parametrize("execute", [[], ["--async"]], ids=["execute", "execute_async"])
def test_outputs_match_the_cpu_reference(load, execute):
    p = run_app(*load, *execute, "--runs", "4")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[:3] for line in lines[:-1]] == [["run", str(i), "ok"] for i in range(4)], p.stdout
    assert lines[-1] == "graph_app: all outputs match"
    assert all(float(line.split()[4]) == 0.0 for line in lines[:-1]), "dyadic values: the outputs are exact"


def test_model_path_argument_and_default_model_file():
    assert open(MODEL, "rb").read(8) == b"FAKEOM01"
    p = run_app(MODEL, "--runs", "2")
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_model_with_other_weights_is_a_mismatch(tmp_path):
    with open(SPEC) as f:
        spec = json.load(f)
    spec["weights"]["b2"][1] += 0.5
    path = str(tmp_path / "changed.om")
    fake_atc.write_model(spec, path)
    p = run_app(path, "--runs", "2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "MISMATCH" in p.stdout


def test_api_errors_exit_2(tmp_path):
    p = run_app(str(tmp_path / "missing.om"))
    assert p.returncode == 2
    assert "aclmdlLoadFromFile failed with 100014" in p.stderr, p.stderr  # ACL_ERROR_READ_MODEL_FAILURE
    assert run_app("--bogus").returncode == 2


def test_links_the_acl_library_directly():
    needed = subprocess.run(["readelf", "-d", APP], capture_output=True, text=True, check=True).stdout
    assert "[libascendcl.so]" in needed
