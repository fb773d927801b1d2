"""msprobe-inspect compare on REAL dumps of examples/train.py: identical runs compare all-pass, and a planted
divergence (FAKE_CANN_PERTURB_OP=Gelu: the stand-in scales Gelu's output by 1.001) is found at exactly the first
Gelu kernel, in tensor mode and in statistics mode. Metrics are checked against numpy on the dumped files.
"""
import csv
import functools
import json
import shutil

import numpy as np
import pytest

from inspect_support import folders, inspect, load_dump, make_dump, tensors_of

MODES = ["tensor", "statistics"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """runs(task, name): train.py under the shim; name "a" and "b" are two clean runs, "gelu" the perturbed one."""
    root = tmp_path_factory.mktemp("compare")

    @functools.lru_cache(maxsize=None)
    def get(task, name, ranks=1):
        env = {"FAKE_CANN_PERTURB_OP": "Gelu"} if name == "gelu" else {}
        return make_dump(root / f"{task}-{name}-{ranks}", steps=2, task=task, ranks=ranks, **env)
    return get


def compare(a, b, out, *extra, expect=0):
    r = inspect("compare", a, b, "--out", out, *extra, expect=expect)
    results = list(out.glob("compare_result_*.csv"))
    details = list(out.glob("compare_details_*.csv"))
    assert len(results) == 1 and len(details) == 1, (results, details)
    with open(results[0], newline="") as f:
        rows = list(csv.DictReader(f))
    with open(details[0], newline="") as f:
        detail_rows = list(csv.DictReader(f))
    return r.stdout, rows, detail_rows


def all_tensors(root):
    """(step, NPU Name, tensor dict, entry) of every tensor, in folder then launch order."""
    out = []
    for f in folders(root):
        data = load_dump(f)["data"]
        for name in sorted(data, key=lambda k: data[k]["launch"]["index"]):
            for row, t in tensors_of(data[name]):
                out.append((f, f"{name}.{row}", t, data[name]))
    return out


@pytest.mark.parametrize("task", MODES)
def test_identical_runs_compare_all_pass(runs, tmp_path, task):
    a, b = runs(task, "a"), runs(task, "b")
    stdout, rows, details = compare(a, b, tmp_path)
    tensors = all_tensors(a)
    assert len(rows) == len(details) == len(tensors)
    assert [r["NPU Name"] for r in rows] == [name for _, name, _, _ in tensors]
    assert all(r["Result"] == "pass" for r in rows), [r for r in rows if r["Result"] != "pass"][:3]
    assert all(r["NPU Name"] == r["Bench Name"] for r in rows)
    assert "no divergence: every matched tensor passes" in stdout
    assert f"compare: {task} mode, 2 folder pair(s)" in stdout
    assert ", 0 only in A, 0 only in B" in stdout
    if task == "tensor":
        assert all(r["MaxAbsErr"] == "0.0" and (r["Cosine"] == "N/A" or float(r["Cosine"]) > 1 - 1e-12) for r in rows)
    else:
        assert all(r["Cosine"] == "N/A" for r in rows)


def first_of(root, op):
    """The first kernel of op type `op` in step 0 (launch order): names carry the Python scope."""
    d = load_dump(folders(root)[0])["data"]
    return min((k for k in d if k.split(".")[0] == op), key=lambda k: d[k]["launch"]["index"])


@pytest.mark.parametrize("task", MODES)
def test_planted_divergence_is_the_first_gelu_kernel(runs, tmp_path, task):
    a, b = runs(task, "gelu"), runs(task, "a")
    stdout, rows, details = compare(a, b, tmp_path)
    gelu = first_of(a, "Gelu")
    assert f"first diverging kernel (launch order): step0/rank {gelu} (launch_index " in stdout, stdout
    # The same program: one stack, each frame on one line.
    assert "stack (the same in A and B):" in stdout and "A stack:" not in stdout and "B stack:" not in stdout
    bad = "error" if task == "tensor" else "diff"
    by_name = {r["NPU Name"]: r for r in rows if r["Step"] == "0"}  # names repeat in every step
    assert by_name[f"{gelu}.input.0"]["Result"] == "pass"
    assert by_name[f"{gelu}.output.0"]["Result"] == bad
    # Everything launched before it in step 0 passes.
    step0 = [name for f, name, _, _ in all_tensors(a) if f.parent.name == "step0"]
    before = step0[:step0.index(f"{gelu}.input.0")]
    assert before and all(by_name[n]["Result"] == "pass" for n in before)

    f = folders(a)[0]
    gelu_a = load_dump(f)["data"][gelu]["output"][0]
    gelu_b = load_dump(folders(b)[0])["data"][gelu]["output"][0]
    row = by_name[f"{gelu}.output.0"]
    detail = {r["NPU Name"]: r for r in details if r["Step"] == "0"}[f"{gelu}.output.0"]
    for stat, col in (("Max", "Max diff"), ("Min", "Min diff"), ("Mean", "Mean diff"), ("Norm", "L2norm diff")):
        assert float(row[col]) == gelu_a[stat] - gelu_b[stat]
        rel = abs(gelu_a[stat] - gelu_b[stat]) / (max(abs(gelu_a[stat]), abs(gelu_b[stat])) + 1e-10)
        assert float(detail[{"L2norm diff": "L2norm", "Max diff": "Max", "Min diff": "Min",
                             "Mean diff": "Mean"}[col] + " RelativeErr"]) == pytest.approx(rel, rel=1e-12)
    if task == "tensor":
        na = np.load(f / "dump_tensor_data" / gelu_a["data_name"]).astype(np.float64).ravel()
        nb = np.load(folders(b)[0] / "dump_tensor_data" / gelu_b["data_name"]).astype(np.float64).ravel()
        cos = na.dot(nb) / (np.linalg.norm(na) * np.linalg.norm(nb))
        bz = nb.copy()
        bz[bz == 0] = np.finfo(np.float32).eps
        rel = np.abs(na - nb) / np.abs(bz)
        assert float(row["Cosine"]) == pytest.approx(min(cos, 1.0), abs=1e-12)
        assert float(row["MaxAbsErr"]) == np.max(np.abs(na - nb))
        assert float(row["MaxRelativeErr"]) == pytest.approx(np.max(rel), rel=1e-12)
        assert float(detail["EucDist"]) == pytest.approx(np.linalg.norm(na - nb), rel=1e-12)
        assert float(detail["One Thousandth Err Ratio"]) == pytest.approx(np.mean(rel < 0.001), abs=1e-12)
        assert float(row["MaxAbsErr"]) > 1e-4  # why it fails msprobe's rule
        assert "MaxAbsErr" in stdout.split("first diverging kernel")[1]
    else:
        assert "Max diff" in stdout.split("first diverging kernel")[1]
        # msprobe's own statistics rule says nothing for a 0.1 % change: no "Warning".
        assert all(r["Result"] != "Warning" for r in rows)


def test_thresholds_are_configurable(runs, tmp_path):
    a, b = runs("tensor", "gelu"), runs("tensor", "a")
    _, rows, _ = compare(a, b, tmp_path, "--atol", "0.01", "--cos", "0.9")
    gelu = first_of(a, "Gelu")
    assert {r["NPU Name"]: r for r in rows if r["Step"] == "0"}[f"{gelu}.output.0"]["Result"] == "pass"
    out2 = tmp_path / "strict"
    stdout, _, _ = compare(runs("statistics", "gelu"), runs("statistics", "a"), out2, "--stat-rtol", "0.5")
    assert "no divergence" in stdout  # 0.1 % is below a 50 % tolerance


def test_kernels_on_one_side_only_are_listed(runs, tmp_path):
    a = runs("statistics", "a")
    b = tmp_path / "b"
    shutil.copytree(runs("statistics", "b"), b)
    f = folders(b)[0]
    d = json.loads((f / "dump.json").read_text())
    softmax = first_of(b, "Softmax")
    gone = d["data"].pop(softmax)
    (f / "dump.json").write_text(json.dumps(d))
    stdout, rows, _ = compare(a, b, tmp_path / "out1")
    assert f"kernel only in A: step0/rank {softmax}" in stdout
    assert ", 1 only in A, 0 only in B" in stdout
    unmatched = [r for r in rows if r["Step"] == "0" and r["NPU Name"].startswith(f"{softmax}.")]
    assert len(unmatched) == len(tensors_of(gone))
    assert all(r["Result"] == "unmatched" and r["Bench Name"] == "N/A" and r["Err_message"] == "No bench data matched."
               for r in unmatched)
    assert "no divergence" in stdout  # unmatched is not a divergence
    stdout, rows, _ = compare(b, a, tmp_path / "out2")
    assert f"kernel only in B: step0/rank {softmax}" in stdout
    assert sum(r["Err_message"] == "No NPU data matched." for r in rows) == len(tensors_of(gone))


def test_ranks_are_paired_and_two_rank_folders_compare(runs, tmp_path):
    d = runs("statistics", "a", ranks=2)
    stdout, rows, _ = compare(d, d, tmp_path / "self")
    assert "4 folder pair(s)" in stdout and "no divergence" in stdout
    assert {r["Rank"] for r in rows} == {"rank0", "rank1"} and {r["Step"] for r in rows} == {"0", "1"}
    # Two single folders: compared with each other whatever their names (here two ranks of one run).
    stdout, rows, _ = compare(d / "step0" / "rank0", d / "step0" / "rank1", tmp_path / "ranks")
    assert "compare: statistics mode, 1 folder pair(s)" in stdout
    if "first diverging kernel" in stdout:  # the ranks train on different data
        assert "step0/rank0 vs step0/rank1 " in stdout.split("first diverging kernel")[1]
    assert len(rows) == sum(len(tensors_of(e)) for e in load_dump(d / "step0" / "rank0")["data"].values())


def test_bad_input(runs, tmp_path):
    a = runs("statistics", "a")
    assert "no such file or directory" in inspect("compare", a, tmp_path / "nope", expect=2).stderr
    assert "--cos" in inspect("compare", a, a, "--cos", "1.5", expect=2).stderr
