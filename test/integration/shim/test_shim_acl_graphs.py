"""Inside ACL graph replays (issue 43): acl_graph_host.py captures out = x + alpha * y (aclnnAdd, in a task group) and
res = out * w (aclnnMul) into an ACL graph and replays it once per step, x new each step; at step 3 a task update
gives the Add alpha 2.5. Under the shim every replay's kernels are in the dump as kernels of that step, named as the
eager run names them (the capture step has none: nothing ran), with values equal to numpy's (statistics, tensor files) and to the eager run's; the updated
alpha is what the Add records from the update's replay on."""
import json
import os
import re
import subprocess
import zlib

import numpy as np
import pytest

from shimtest import BUILD, PYTHON, SOURCE, expected_stats, run, stat_close, tensors

HOST = os.path.join(SOURCE, "test", "integration", "shim", "acl_graph_host.py")
STEPS, UPDATE_AT = 4, 3


def run_host(workdir, mode, task, env=None, n=6, extra=()):
    out = os.path.join(str(workdir), "values.json")
    e = {"MSPROBE_TASK": task, **(env or {})}
    cmd = [PYTHON, HOST, "--mode", mode, "--steps", STEPS, "--update-at", UPDATE_AT, "--n", n, *extra, out]
    r = run(cmd, workdir, env=e).check()
    with open(out) as f:
        return r, json.load(f)


def expected(values, s):
    """{kernel op type: [input arrays], [output arrays]} of step s (1-based) by numpy, from the host's inputs."""
    st = values["steps"][s - 1]
    x, y, w = (np.asarray(v, dtype=np.float32) for v in (st["x"], values["y"], values["w"]))
    alpha = np.float32(values["alpha2"] if st["updated"] else 1.0)
    out = (x + alpha * y).astype(np.float32)
    res = (out * w).astype(np.float32)
    return {"Add": ([x, y], [out]), "Mul": ([out, w], [res])}


def kernels_of(folder):
    return {name.split(".")[0]: (name, entry) for name, entry in folder.entries()}


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    return run_host(tmp_path_factory.mktemp("eager"), "eager", "statistics")


@pytest.mark.parametrize("task", ["statistics", "tensor", "md5"])
def test_every_replayed_kernel_has_numpys_values_and_the_eager_runs_names(tmp_path, task, eager):
    if task == "md5":
        r, values = run_host(tmp_path, "graph", "statistics", env={"MSPROBE_SUMMARY_MODE": "md5"})
    else:
        r, values = run_host(tmp_path, "graph", task)
    e_run, e_values = eager
    assert values["steps"] == e_values["steps"], "the graph computed other values than the eager run"
    # Step 0: the warm-up ran eagerly; the capture after it ran nothing and adds no kernel to the step.
    assert r.dump.folder(0).names() == e_run.dump.folder(0).names()
    assert all("acl_graph" not in e for _, e in r.dump.folder(0).entries())
    for s in range(1, STEPS + 1):
        got, want = kernels_of(r.dump.folder(s)), expected(values, s)
        assert sorted(n for n, _ in got.values()) == sorted(e_run.dump.folder(s).names()), f"step {s}"
        for op, (name, entry) in got.items():
            assert entry["acl_graph"] == f"replay {s - 1} of ACL graph acl_graph_0 (stack from the capture)", entry
            arrays = want[op][0] + want[op][1]
            refs = list(tensors(entry))
            assert len(refs) == len(arrays), (name, entry)
            for ref, a in zip(refs, arrays):
                if task == "tensor":
                    np.testing.assert_array_equal(r.dump.folder(s).load(ref.info), a, err_msg=f"{name} {ref.slot}")
                    continue
                if task == "md5":  # msprobe's "md5": the CRC-32 of the tensor's bytes
                    assert ref.info["md5"] == f"{zlib.crc32(a.tobytes()):08x}", (s, name, ref.slot, ref.info)
                for key, v in zip(("Max", "Min", "Mean", "Norm"), expected_stats(a, "Float32")):
                    assert stat_close(ref.info[key], v, "Float32"), (s, name, ref.side, ref.slot, key, ref.info, v)


def test_task_update_changes_what_the_replays_record_from_then_on(tmp_path):
    r, _ = run_host(tmp_path, "graph", "statistics")
    for s in range(1, STEPS + 1):
        name, entry = kernels_of(r.dump.folder(s))["Add"]
        alpha = [a for a in entry["input_args"] if not (isinstance(a, dict) and "shape" in a)]
        assert [a["value"] for a in alpha] == [2.5 if s >= UPDATE_AT else 1.0], (s, entry)
    # The update's own launch ran nowhere: no step counts it.
    for s in range(1, STEPS + 1):
        assert sorted(kernels_of(r.dump.folder(s))) == ["Add", "Mul"]


def test_over_the_budget_the_shim_names_the_kernels_it_describes_without_data(tmp_path):
    # Tensors of 400 000 bytes: two fit in 1 MiB of snapshots, the Add's output and the Mul's tensors do not.
    r, _ = run_host(tmp_path, "graph", "statistics", env={"MSPROBE_BUFFER_MB": "1"}, n=100000)
    lines = [ln for ln in r.stderr.splitlines() if "ACL graph acl_graph_0" in ln and "MSPROBE_BUFFER_MB" in ln]
    assert len(lines) == 1 and "aclnnAdd" not in lines[0], r.stderr
    assert "Add (kernel 0)" in lines[0] and "Mul (kernel 1)" in lines[0], lines[0]
    for s in range(1, STEPS + 1):
        add, mul = (kernels_of(r.dump.folder(s))[op][1] for op in ("Add", "Mul"))
        x, y, out = (ref.info for ref in tensors(add))
        assert x["Max"] is not None and y["Max"] is not None and out["Max"] is None, add
        assert all(ref.info["Max"] is None for ref in tensors(mul)), mul
        assert "without data" in add["acl_graph"] and "without data" in mul["acl_graph"]


def test_overflow_check_reports_the_replay_that_overflowed(tmp_path):
    # x holds +Inf at step 2 only: that replay's Add is the first kernel to overflow, the only one written
    # (overflow_nums 1), as in the eager run.
    r, _ = run_host(tmp_path, "graph", "overflow_check", extra=("--inf-at", "2"))
    e, _ = run_host(tmp_path / "eager", "eager", "overflow_check", extra=("--inf-at", "2"))
    assert r.dump.steps() == [2] == e.dump.steps(), r.dump.steps()
    got = kernels_of(r.dump.folder(2))
    assert list(got) == ["Add"] and r.dump.folder(2).names() == e.dump.folder(2).names(), got
    name, entry = got["Add"]
    assert entry["acl_graph"] == "replay 1 of ACL graph acl_graph_0 (stack from the capture)", entry
    x = next(tensors(entry)).info
    assert x["Max"] == float("inf"), x


def test_a_capture_the_runtime_drops_leaves_the_stream_eager(tmp_path, eager):
    # aclmdlRICaptureEnd on another thread fails and CANN drops the capture: the stream's later launches are eager
    # kernels again, in the dump as the plain eager run has them.
    r, _ = run_host(tmp_path, "eager", "statistics", extra=("--drop-a-capture",))
    e_run, _ = eager
    assert r.dump.names_by_folder() == e_run.dump.names_by_folder()


def inspect(*args):
    return subprocess.run([os.path.join(BUILD, "bin", "msprobe-inspect"), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_graph_against_eager_first_diff_names_the_kernel_of_the_skipped_update(tmp_path):
    # The Add's alpha changes every step (a task update before each replay, as vLLM-Ascend updates the attention's
    # sequence lengths); the planted bug skips the update of step 3, whose replay keeps step 2's alpha.
    alpha = ("--alpha-per-step",)
    eager, _ = run_host(tmp_path / "eager", "eager", "tensor", extra=alpha)
    graph, _ = run_host(tmp_path / "graph", "graph", "tensor", extra=alpha)
    stale, _ = run_host(tmp_path / "stale", "graph", "tensor", extra=alpha + ("--skip-update-at", "3"))
    c = inspect("compare", graph.dump.root, eager.dump.root, "--out", tmp_path / "cmp")
    assert c.returncode == 0 and "10 kernels in A, 10 matched, 0 only in A, 0 only in B" in c.stdout, c.stdout
    assert "no divergence" in c.stdout, c.stdout
    clean = inspect("first-diff", graph.dump.root, eager.dump.root)
    assert clean.returncode == 0 and "no kernel departs" in clean.stdout, clean.stdout + clean.stderr
    bad = inspect("first-diff", stale.dump.root, eager.dump.root, "--json")
    doc = json.loads(bad.stdout)
    assert bad.returncode == 1 and doc["step"] == 3 and doc["kernel"].startswith("Add."), doc
    assert doc["kernel"] == kernels_of(eager.dump.folder(3))["Add"][0]
    # The report shows the replays as steps, and the same first divergence.
    r = inspect("report", stale.dump.root, "--against", eager.dump.root, "-o", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "r.html").read_text()
    page = json.loads(re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html, re.S)[1])
    assert page["first_diff"]["kernel"] == doc["kernel"], page["first_diff"]


def test_flight_writes_the_replay_that_overflowed_with_the_kernels_before_it(tmp_path):
    r, _ = run_host(tmp_path, "graph", "flight", extra=("--inf-at", "2"))
    assert "flight record: overflow: Add." in r.stderr and "(step 2, " in r.stderr, r.stderr
    assert list(kernels_of(r.dump.folder(2))) == ["Add"]
    name, entry = kernels_of(r.dump.folder(2))["Add"]
    assert entry["acl_graph"] == "replay 1 of ACL graph acl_graph_0 (stack from the capture)", entry
    assert next(tensors(entry)).info["Max"] == float("inf")
    # The ring kept the kernels before it: the previous replay's.
    assert sorted(kernels_of(r.dump.folder(1))) == ["Add", "Mul"]
