"""msprobe-inspect replay (msprobe's accuracy pre-check at kernel level) on REAL tensor dumps of examples/train.py
and examples/acl_app made by the shim: a clean run passes every kernel that has a CPU reference, a planted wrong
kernel (FAKE_CANN_PERTURB_OP: the stand-in scales that op's outputs by 1.001) is flagged and nothing else is,
metrics agree with numpy (test/python/npu_refs.py, an independent reference), an interrupted run resumes with
--csv-path without duplicating rows, and bad input exits 2 with a clear message.
"""
import csv
import functools
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import npu_refs
import shimtest
from inspect_support import BUILD, PYTHON, SHIM, SRC, clean_env, folders, inspect, load_dump, make_dump

# msprobe's columns (api_accuracy_checker: Comparator.write_csv_title and compare_utils.DETAIL_TEST_ROWS), then ours.
RESULT_COLUMNS = ["API name", "Forward Test Success", "Backward Test Success", "Message"]
DETAIL_COLUMNS = ["API Name", "Bench Dtype", "DEVICE Dtype", "Shape", "余弦相似度", "最大绝对误差", "双百指标",
                  "双千指标", "双万指标", "二进制一致错误率", "误差均衡性", "均方根误差", "小值域错误占比",
                  "相对误差最大值", "相对误差平均值", "inf/nan错误率", "相对误差错误率", "绝对误差错误率",
                  "ULP误差最大值", "ULP误差平均值", "ULP误差大于阈值占比", "Status", "Message"]
ACL_APP = BUILD / "bin" / "acl_app"
OPS_WORKLOAD = SRC / "test" / "python" / "ops_workload.py"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """dumps(name): a tensor dump of train.py (2 steps); "clean", "bf16", "ranks2", "gelu" / "matmul" (perturbed)."""
    root = tmp_path_factory.mktemp("replay")
    settings = {"clean": {}, "bf16": {"dtype": "bf16"}, "ranks2": {"ranks": 2},
                "gelu": {"FAKE_CANN_PERTURB_OP": "Gelu"}, "matmul": {"FAKE_CANN_PERTURB_OP": "Matmul"},
                "bin": {"MSPROBE_FILE_FORMAT": "bin"}, "stats": {"task": "statistics"}}

    @functools.lru_cache(maxsize=None)
    def get(name):
        return make_dump(root / name, steps=2, **settings[name])
    return get


@functools.lru_cache(maxsize=None)
def ops_with_reference():
    r = inspect("replay", "--list-ops", expect=0)
    ops = set(r.stdout.split())
    assert "Gelu" in ops and "Matmul" in ops
    return ops


def replay(dump, out, *extra, expect=None):
    """Runs replay; returns (stdout, result rows, detail rows) from the one pair of CSV files in `out`."""
    r = inspect("replay", dump, "--out", out, *extra, expect=expect)
    return (r,) + read_csvs(out)


def read_csvs(out):
    results = list(Path(out).glob("accuracy_checking_result_*.csv"))
    details = list(Path(out).glob("accuracy_checking_details_*.csv"))
    assert len(results) == 1 and len(details) == 1, (results, details)
    return read_csv(results[0]), read_csv(details[0])


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    return [dict(zip(header, r)) | {"_header": header} for r in rows[1:]] or [{"_header": header}]


def kernels_in_launch_order(root):
    """(folder, step, rank cell, kernel name, entry) of every kernel, folders in order, kernels by launch_index."""
    out = []
    for f in folders(root):
        data = load_dump(f)["data"]
        for name in sorted(data, key=lambda k: data[k]["launch"]["index"]):
            out.append((f, f.parent.name[4:], f.name, name, data[name]))
    return out


def op_type(name):
    return name.split(".", 1)[0]


def by_key(rows):
    return {(r["Step"], r["Rank"], r["API name"]): r for r in rows}


# ---- a clean run -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["clean", "bf16", "ranks2", "bin"])
def test_clean_run_passes_every_kernel_with_a_reference(dumps, tmp_path, name):
    dump = dumps(name)
    r, rows, details = replay(dump, tmp_path, expect=0)
    assert rows[0]["_header"][:4] == RESULT_COLUMNS
    assert details[0]["_header"][:len(DETAIL_COLUMNS)] == DETAIL_COLUMNS
    kernels = kernels_in_launch_order(dump)
    refs = ops_with_reference()
    # One result row per kernel, in launch order per folder; names and folders as in dump.json.
    assert [(r["Step"], r["Rank"], r["API name"]) for r in rows] == [(s, rk, n) for _, s, rk, n, _ in kernels]
    assert [int(r["Launch Index"]) for r in rows] == [e["launch"]["index"] for *_, e in kernels]
    with_ref = [n for *_, n, _ in kernels if op_type(n) in refs]
    # train.py's op types all have a reference (HcclAllReduce too, with 2 ranks).
    assert {op_type(n) for *_, n, _ in kernels} <= refs, {op_type(n) for *_, n, _ in kernels} - refs
    compared = [r for r in rows if r["Forward Test Success"] != "SKIP"]
    assert len(compared) == len(with_ref)
    bad = [(r["API name"], r["Forward Test Success"], r["Message"]) for r in compared
           if r["Forward Test Success"] != "pass"]
    assert not bad, bad[:5]
    assert f"{len(with_ref)} compared ({len(with_ref)} pass, 0 warning, 0 error), 0 skipped" in r.stdout
    assert "every compared kernel passes" in r.stdout
    # One details row per output tensor the dump holds.
    outputs = [(s, rk, f"{n}.output.{i}") for _, s, rk, n, e in kernels for i, o in enumerate(e["output"])
               if o is not None]
    assert [(d["Step"], d["Rank"], d["API Name"]) for d in details] == outputs
    assert all(d["Status"] == "pass" for d in details)
    if name == "ranks2":
        assert any(op_type(n) == "HcclAllReduce" for n in with_ref)
    # Without msprobe's MaxAbsErr shortcut every output is judged by its relative error alone: the references are
    # that close to a correct kernel.
    inspect("replay", dump, "--out", tmp_path / "strict", "--atol", "0", expect=0)


def test_metrics_agree_with_numpy(dumps, tmp_path):
    """Cosine and MaxAbsErr of a few outputs, recomputed from the npy files with npu_refs' numpy references."""
    for name in ("clean", "gelu"):
        out = tmp_path / name
        _, rows, details = replay(dumps(name), out)
        detail = {(d["Step"], d["Rank"], d["API Name"]): d for d in details}
        dump = shimtest.Dump(str(dumps(name)))
        checked = set()
        for f in dump.folders():
            for kernel, e in f.entries():
                op = op_type(kernel)
                if op not in ("Gelu", "LayerNorm", "Matmul", "Softmax", "MseLoss", "ApplyAdamWV2") or op in checked:
                    continue
                checked.add(op)
                args = [shimtest.arg_value(f, a) for a in e["input_args"]]
                dtypes = [shimtest.arg_dtype(a) for a in e["input_args"]]
                want = npu_refs.REFS[op](args, dtypes)
                for i, (w, o) in enumerate(zip(want, e["output"])):
                    if o is None or w is None:
                        continue
                    dev = f.load(o).astype(np.float64).reshape(-1)
                    ref = np.asarray(w, dtype=np.float64).reshape(-1)
                    row = detail[(str(f.step), os.path.basename(f.path), f"{kernel}.output.{i}")]
                    max_abs = float(np.max(np.abs(dev - ref)))
                    assert float(row["最大绝对误差"]) == pytest.approx(max_abs, rel=1e-6, abs=1e-12), (kernel, i)
                    if dev.size > 1 and np.linalg.norm(dev) > 0 and np.linalg.norm(ref) > 0:
                        cos = float(np.dot(dev, ref) / (np.linalg.norm(dev) * np.linalg.norm(ref)))
                        assert float(row["余弦相似度"]) == pytest.approx(cos, abs=1e-12), (kernel, i)
                    rel = np.abs(dev - ref) / (np.abs(ref) + np.finfo(np.float64).eps)
                    assert float(row["双千指标"]) == pytest.approx(float(np.mean(rel < 0.001)), abs=1e-12)
        assert checked == {"Gelu", "LayerNorm", "Matmul", "Softmax", "MseLoss", "ApplyAdamWV2"}


def test_every_op_of_the_stand_in_replays_and_passes(tmp_path):
    """test/python/ops_workload.py launches every aclnn op of the stand-in (fp32, fp16, bf16; strided views,
    broadcasting, optional tensors, output masks...): each has a reference and every kernel passes."""
    dest = tmp_path / "dump"
    env = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": "tensor", "LD_PRELOAD": str(SHIM)})
    p = subprocess.run([PYTHON, str(OPS_WORKLOAD)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r, rows, details = replay(dest, tmp_path / "out", expect=0)
    kernels = kernels_in_launch_order(dest)
    ops = {op_type(n) for *_, n, _ in kernels}
    assert len(ops) >= 38 and ops <= ops_with_reference(), sorted(ops - ops_with_reference())
    assert len(rows) == len(kernels)
    bad = [(x["API name"], x["Forward Test Success"], x["Message"]) for x in rows
           if x["Forward Test Success"] != "pass"]
    assert not bad, bad[:5]
    dtypes = {d["DEVICE Dtype"] for d in details}
    assert {"Float32", "Float16", "BFloat16"} <= dtypes, dtypes
    inspect("replay", dest, "--out", tmp_path / "strict", "--atol", "0", expect=0)


# ---- a planted wrong kernel ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,op,extra", [("gelu", "Gelu", ()), ("matmul", "Matmul", ("--atol", "0"))])
def test_planted_bug_flags_exactly_that_op(dumps, tmp_path, name, op, extra):
    """--atol 0 for Matmul: its backward products are small, below msprobe's MaxAbsErr shortcut (0.001) even when
    1.001 times too large; without the shortcut the relative-error shares find every one."""
    dump = dumps(name)
    r, rows, details = replay(dump, tmp_path, *extra, expect=1)
    failed = {(x["Step"], x["Rank"], x["API name"]) for x in rows if x["Forward Test Success"] in ("error", "warning")}
    kernels = kernels_in_launch_order(dump)
    planted = {(s, rk, n) for _, s, rk, n, _ in kernels if op_type(n) == op}
    assert planted and failed == planted
    assert all(by_key(rows)[k]["Forward Test Success"] == "error" for k in planted)
    # The summary lists them in launch order, with their stacks.
    first = next(n for *_, n, _ in kernels if op_type(n) == op)
    listing = r.stdout.split("failing kernels (launch order):\n", 1)[1]
    assert listing.lstrip().startswith(f"step0/rank {first} (launch_index ")
    assert "stack:" in listing
    bad_details = [d for d in details if d["Status"] == "error"]
    assert bad_details and all(op_type(d["API Name"]) == op for d in bad_details)


# ---- acl_app ------------------------------------------------------------------------------------------------------
def test_acl_app_dump(tmp_path):
    dest = tmp_path / "dump"
    env = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": "tensor", "LD_PRELOAD": str(SHIM)})
    p = subprocess.run([str(ACL_APP)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    r, rows, details = replay(dest, tmp_path / "out", expect=0)
    refs = ops_with_reference()
    kernels = kernels_in_launch_order(dest)
    assert len(rows) == len(kernels)
    for _, s, rk, n, _ in kernels:
        row = by_key(rows)[(s, rk, n)]
        if op_type(n) in refs:
            assert row["Forward Test Success"] == "pass", row
        else:
            assert row["Forward Test Success"] == "SKIP" and "No CPU reference" in row["Message"]
    with_ref = [n for *_, n, _ in kernels if op_type(n) in refs]
    assert {"Add", "Mul"} <= {op_type(n) for n in with_ref}
    skipped = sorted({op_type(n) for *_, n, _ in kernels if op_type(n) not in refs})
    if skipped:
        line = next(x for x in r.stdout.splitlines() if x.startswith("skipped op types (no CPU reference): "))
        for op in skipped:
            assert f"{op} (" in line


# ---- resume -------------------------------------------------------------------------------------------------------
def test_resume_after_an_interrupted_run(dumps, tmp_path):
    dump = dumps("gelu")  # some kernels fail: verdicts other than pass must survive the resume too
    whole = tmp_path / "whole"
    _, whole_rows, whole_details = replay(dump, whole, "-j", "1", expect=1)

    part = tmp_path / "part"
    r, rows, _ = replay(dump, part, "--max-kernels", "10")
    assert len(rows) == 10 and "resume with --csv-path" in r.stdout
    result = next(part.glob("accuracy_checking_result_*.csv"))
    details = next(part.glob("accuracy_checking_details_*.csv"))
    # A kill mid-write leaves a partial last line in either file; the details of a kernel whose result row was
    # not written yet are written again by the resumed run.
    with open(details, "a", encoding="utf-8") as f:
        f.write(",".join([whole_details[10]["API Name"]] + ["x"] * 30) + "\n")
        f.write(whole_details[11]["API Name"] + ",Float64,Flo")
    with open(result, "a", encoding="utf-8") as f:
        f.write(whole_rows[10]["API name"] + ",pa")
    r2 = inspect("replay", dump, "-csv_path", result, "--max-kernels", "20")  # msprobe's spelling
    assert r2.returncode in (0, 1) and "(10 already in " in r2.stdout and ", 20 replayed now)" in r2.stdout
    r3 = inspect("replay", dump, "--csv-path", result, "-j", "2", expect=1)
    assert "(30 already in " in r3.stdout
    rows, drows = read_csvs(part)
    keys = [(x["Step"], x["Rank"], x["API name"]) for x in rows]
    assert len(keys) == len(set(keys)) == len(whole_rows)
    assert {k: x["Forward Test Success"] for k, x in by_key(rows).items()} == \
        {k: x["Forward Test Success"] for k, x in by_key(whole_rows).items()}
    # Resumed in launch order: the files equal a single uninterrupted run's, row for row.
    assert rows == whole_rows and drows == whole_details
    # Resuming a finished file replays nothing and keeps the verdicts.
    r4 = inspect("replay", dump, "--csv-path", result, expect=1)
    assert "0 replayed now" in r4.stdout
    assert read_csvs(part)[0] == rows


def test_parallel_output_is_deterministic(dumps, tmp_path):
    _, a, da = replay(dumps("clean"), tmp_path / "a", "-j", "1", expect=0)
    _, b, db = replay(dumps("clean"), tmp_path / "b", "-j", "2", expect=0)
    assert a == b and da == db


# ---- bad input ----------------------------------------------------------------------------------------------------
def test_bad_input(dumps, tmp_path):
    r = inspect("replay", tmp_path / "missing", expect=2)
    assert "no such file or directory" in r.stderr
    r = inspect("replay", dumps("stats"), "--out", tmp_path / "o1", expect=2)
    assert "replay needs tensor data" in r.stderr and "statistics" in r.stderr
    assert not list((tmp_path / "o1").glob("*.csv"))
    r = inspect("replay", dumps("clean"), "--csv-path", tmp_path / "accuracy_checking_result_none.csv", expect=2)
    assert "accuracy_checking_result_none.csv: no such file" in r.stderr
    d = tmp_path / "accuracy_checking_result_dir.csv"
    d.mkdir()
    r = inspect("replay", dumps("clean"), "--csv-path", d, expect=2)
    assert "not a regular file" in r.stderr
    wrong = tmp_path / "accuracy_checking_result_wrong.csv"
    wrong.write_text("a,b\n1,2\n")
    r = inspect("replay", dumps("clean"), "--csv-path", wrong, expect=2)
    assert "the header differs" in r.stderr
    assert wrong.read_text() == "a,b\n1,2\n"
    r = inspect("replay", dumps("clean"), "--atol", "x", expect=2)
    assert "--atol 'x' is not a number" in r.stderr
    r = inspect("replay", "--help", expect=0)
    assert "usage: msprobe-inspect replay DIR" in r.stdout
