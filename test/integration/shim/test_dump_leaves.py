"""Every leaf of REAL dumps has a scalar value (issue 17).

msprobe's compare reads a leaf without statistics as Max = Min = Mean = Norm = its "value" (gen_op_item); a list
there makes its result table ragged and the whole compare aborts. Sequences (aclIntArray, aclBoolArray, aclop list
attributes...) must be written as msprobe writes them: a JSON list of scalar leaves. Checked here with Python's json
(an independent reader) on dumps of train.py and acl_app under every task, the HCCL, rt and aclop paths included;
then two train.py runs must still compare kernel by kernel with msprobe-inspect, and the old form (a leaf with a
list value, in dumps already on disk) must still read the same in compare and replay. The members of an
aclScalarList keep their own types (int, float, bool, mixed; issue 32), and replay rebuilds the call from them.
"""
import csv
import functools
import json
import os
import re
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import shimtest
from shimtest import run, run_train
from inspect_support import folders, inspect, load_dump, make_dump, tensors_of

ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
SCALAR = (type(None), bool, int, float, str)
STATS = ("Max", "Min", "Mean", "Norm")


def dicts(node, path="$"):
    """Every dict in a parsed JSON document, with its path, outer before inner."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            yield from dicts(x, f"{path}[{i}]")
    elif isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from dicts(v, f"{path}.{k}")


def bad_leaves(node):
    """msprobe's rule: a dict with "type" and no statistics is read as its value, which must be scalar."""
    return [f"{path} = {json.dumps(d)[:200]}" for path, d in dicts(node)
            if "type" in d and not any(k in d for k in STATS) and not isinstance(d.get("value"), SCALAR)]


def list_values(node):
    """Any dict whose "value" is a list, statistics or not."""
    return [path for path, d in dicts(node) if isinstance(d.get("value"), list)]


def is_sequence(v):
    """A non-empty list of scalar leaves (not tensors)."""
    return isinstance(v, list) and v and all(
        isinstance(x, dict) and "value" in x and "dtype" not in x and isinstance(x["value"], SCALAR) for x in v)


def sequences(doc):
    return [(name, i, a) for name, e in doc["data"].items() for i, a in enumerate(e.get("input_args") or [])
            if is_sequence(a)]


def check_dump(root, expect_dump=True):
    """Loads every dump.json under root; asserts msprobe's leaf rule on all of it. Returns the documents."""
    docs = [load_dump(f) for f in folders(root)] if Path(root).exists() else []
    if expect_dump:
        assert docs, f"no dump.json under {root}"
    problems = [f"{f}: {p}" for f, d in zip(folders(root) if docs else [], docs) for p in bad_leaves(d)]
    assert not problems, shimtest.fail_report(problems)
    return docs


def test_the_checker_finds_the_old_form():
    assert bad_leaves({"data": {"K": {"input_args": [{"type": "aclIntArray", "value": [64]}]}}})
    assert bad_leaves([[{"type": "x", "value": {"a": 1}}]])
    assert not bad_leaves({"input_args": [[{"type": "int", "value": 64}], {"type": "aclIntArray", "value": None},
                                          {"type": "t", "dtype": "Float32", "shape": [2], "Max": 1, "Min": 0,
                                           "Mean": 0.5, "Norm": 1}]})


# ---- every task, every workload -----------------------------------------------------------------------------------
TASKS = {"statistics": {"MSPROBE_TASK": "statistics"}, "tensor": {"MSPROBE_TASK": "tensor"},
         "overflow_check": {"MSPROBE_TASK": "overflow_check", "MSPROBE_OVERFLOW_NUMS": "-1"},
         "structure": {"MSPROBE_TASK": "structure"},
         "md5": {"MSPROBE_TASK": "statistics", "MSPROBE_SUMMARY_MODE": "md5"}}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_train_py_leaves_are_scalar(tmp_path, task):
    # 2 ranks: the HCCL path (HcclAllReduce's named "op" leaf) is written too; --overflow-at plants the overflow
    # that overflow_check reports (every later kernel of the step with -1 as the limit).
    args = ["--steps", "2", "--ranks", "2"] + (["--overflow-at", "1"] if task == "overflow_check" else [])
    r = run_train(tmp_path / task, *args, env=TASKS[task])
    docs = check_dump(r.dump.root)
    seqs = [s for d in docs for s in sequences(d)]
    ops = {shimtest.op_type(n) for d in docs for n in d["data"]}
    if "LayerNorm" in ops:  # normalizedShape: [{"type": "int", "value": W}]
        assert any(shimtest.op_type(n) == "LayerNorm" and [x["type"] for x in a] == ["int"] for n, _, a in seqs), \
            seqs[:5]
    if task != "overflow_check":
        assert {"LayerNorm", "LayerNormBackward", "ReduceSum", "HcclAllReduce"} <= ops, ops
        assert any(x["type"] == "bool" for n, _, a in seqs for x in a), "LayerNormBackward's outputMask"


@pytest.mark.skipif(not os.path.exists(ACL_APP), reason="acl_app not built")
@pytest.mark.parametrize("task", sorted(TASKS))
def test_acl_app_leaves_are_scalar(tmp_path, task):
    # acl_app runs the aclnn, aclop and rt-kernel paths; it plants no overflow, so overflow_check may write nothing.
    r = run([ACL_APP], tmp_path / task, env=TASKS[task]).check()
    docs = check_dump(r.dump.root, expect_dump=task != "overflow_check")
    if task != "overflow_check":
        names = {shimtest.op_type(n) for d in docs for n in d["data"]}
        assert "fake_vector_add" in names and "Add" in names, names


# An aclop kernel with list attributes of every kind (and an empty one): named leaves, one per element.
ACLOP_LIST_ATTRS = textwrap.dedent('''
    import ctypes, os
    import numpy as np
    from aclop_ctypes import acl, compiler, P, I64, add_operands
    for fn in ("aclopSetAttrListInt", "aclopSetAttrListFloat", "aclopSetAttrListBool"):
        getattr(acl, fn).argtypes = [P, ctypes.c_char_p, ctypes.c_int, P]
    compiler.aclopCompileAndExecute.argtypes = [ctypes.c_char_p, ctypes.c_int, P, P, ctypes.c_int, P, P, P,
                                                ctypes.c_int, ctypes.c_int, ctypes.c_char_p, P]
    assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
    stream = P()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    n = 4
    x, y, z, dims, descs, ins, outs = add_operands(n)
    attr = acl.aclopCreateAttr()
    assert acl.aclopSetAttrListInt(attr, b"li", 3, (I64 * 3)(1, -2, 3)) == 0
    assert acl.aclopSetAttrListFloat(attr, b"lf", 2, (ctypes.c_float * 2)(0.5, 2.0)) == 0
    assert acl.aclopSetAttrListBool(attr, b"lb", 2, (ctypes.c_uint8 * 2)(1, 0)) == 0
    assert acl.aclopSetAttrListInt(attr, b"empty", 0, None) == 0
    assert compiler.aclopCompileAndExecute(b"Add", 2, descs(2), ins, 1, descs(1), outs, attr, 0, 0, None,
                                           stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0
    print("ok")
''')


def test_aclop_list_attributes_are_named_scalar_leaves(tmp_path):
    host = tmp_path / "aclop_list_attrs.py"
    host.write_text(ACLOP_LIST_ATTRS)
    r = run([shimtest.PYTHON, str(host)], tmp_path / "w", env={"MSPROBE_TASK": "tensor"}).check()
    docs = check_dump(r.dump.root)
    (name, entry), = [(n, e) for d in docs for n, e in d["data"].items() if shimtest.op_type(n) == "Add"]
    attrs = [a for a in entry["input_args"] if not shimtest.is_tensor(a)]
    want = [[{"type": "int", "value": v, "name": "li"} for v in (1, -2, 3)],
            [{"type": "float", "value": v, "name": "lf"} for v in (0.5, 2.0)],
            [{"type": "bool", "value": v, "name": "lb"} for v in (True, False)],
            []]
    assert attrs == want, attrs


# ---- compare and replay, new form and old -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaves")

    @functools.lru_cache(maxsize=None)
    def get(task, name):
        return make_dump(root / f"{task}-{name}", steps=2, task=task)
    return get


OLD_TYPE = {"int": "aclIntArray", "bool": "aclBoolArray", "float": "aclFloatArray"}


def to_old_form(src, dest):
    """A copy of the dump with every sequence rewritten as dumps before issue 17 held it: one leaf with a list
    value ({"type": "aclIntArray", "value": [64]})."""
    shutil.copytree(src, dest)
    changed = 0
    for f in folders(dest):
        d = load_dump(f)
        for e in d["data"].values():
            args = e.get("input_args") or []
            for i, a in enumerate(args):
                if is_sequence(a):
                    args[i] = {"type": OLD_TYPE[a[0]["type"]], "value": [x["value"] for x in a]}
                    changed += 1
        with open(f / "dump.json", "w") as out:
            json.dump(d, out)
    assert changed, "no sequence to rewrite"
    return dest


def compare_rows(a, b, out):
    r = inspect("compare", a, b, "--out", out, expect=0)
    (path,) = Path(out).glob("compare_result_*.csv")
    with open(path, newline="") as f:
        return r.stdout, list(csv.DictReader(f))


@pytest.mark.parametrize("task", ["tensor", "statistics"])
def test_two_runs_have_no_list_value_and_compare_kernel_by_kernel(dumps, tmp_path, task):
    a, b = dumps(task, "a"), dumps(task, "b")
    for root in (a, b):
        docs = check_dump(root)
        lists = [p for d in docs for p in list_values(d)]
        assert not lists, lists[:5]
        assert any(sequences(d) for d in docs)
    stdout, rows = compare_rows(a, b, tmp_path / "new")
    tensors = [(f, f"{n}.{row}") for f in folders(a) for n, e in sorted(
        load_dump(f)["data"].items(), key=lambda kv: kv[1]["launch"]["index"]) for row, _ in tensors_of(e)]
    assert [r["NPU Name"] for r in rows] == [n for _, n in tensors]
    assert all(r["NPU Name"] == r["Bench Name"] and r["Result"] == "pass" for r in rows), \
        [r for r in rows if r["Result"] != "pass"][:3]
    assert ", 0 only in A, 0 only in B" in stdout and "no divergence" in stdout
    # Dumps written before (old form) read the same: the same rows, and old against new matches too.
    old_a, old_b = to_old_form(a, tmp_path / "old-a"), to_old_form(b, tmp_path / "old-b")
    for x, y, out in ((old_a, old_b, "old"), (old_a, b, "mixed")):
        stdout_old, rows_old = compare_rows(x, y, tmp_path / out)
        assert [r["NPU Name"] for r in rows_old] == [r["NPU Name"] for r in rows]
        assert all(r["Result"] == "pass" for r in rows_old)
        assert ", 0 only in A, 0 only in B" in stdout_old


def test_replay_reads_both_forms(dumps, tmp_path):
    """replay needs the int arrays' values (LayerNorm's normalizedShape, ReduceSum's dims): same verdicts on the
    dump and on its old-form copy, every kernel with a reference compared."""
    new = dumps("tensor", "a")
    old = to_old_form(new, tmp_path / "old")
    assert all(bad_leaves(load_dump(f)) for f in folders(old)), "the checker must catch the old form"
    results = {}
    for name, root in (("new", new), ("old", old)):
        r = inspect("replay", root, "--out", tmp_path / f"out-{name}", expect=0)
        (path,) = (tmp_path / f"out-{name}").glob("accuracy_checking_result_*.csv")
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        results[name] = [(x["API name"], x["Forward Test Success"]) for x in rows]
        assert "every compared kernel passes" in r.stdout and " 0 skipped" in r.stdout, r.stdout
    assert results["new"] == results["old"]
    done = {shimtest.op_type(n) for n, s in results["new"] if s == "pass"}
    assert {"LayerNorm", "LayerNormBackward", "ReduceSum"} <= done, done


def test_show_prints_a_sequence_on_one_line(dumps):
    """LayerNorm's normalizedShape, a list of one int leaf, as `int[] [W]`."""
    root = dumps("statistics", "a")
    d = load_dump(folders(root)[0])["data"]
    name = min((k for k in d if shimtest.op_type(k) == "LayerNorm"), key=lambda k: d[k]["launch"]["index"])
    seq = d[name]["input_args"][1]
    assert is_sequence(seq), seq
    out = inspect("show", root, "LayerNorm#0", expect=0).stdout
    assert re.search(rf"^\s+1\s+int\[\] {re.escape(json.dumps([x['value'] for x in seq]))}$", out, re.M), out


# ---- aclScalarList: each member with its own type (issue 32) -------------------------------------------------------
# aclnnForeachMulScalarList (out[i] = x[i] * scalars[i]) launched with a list of each kind and a mixed one. Each
# member is a leaf of its own type, as a lone aclScalar is written; replay rebuilds the call from those leaves.
SCALAR_LISTS = {
    "ints": [("int64", 3), ("int32", -2)],
    "floats": [("float", 0.375), ("double", 0.1)],
    "bools": [("bool", True), ("bool", False)],
    "mixed": [("int64", 2), ("float", 0.25), ("bool", True)],
}
LEAF_TYPE = {"int64": "int", "int32": "int", "float": "float", "double": "float", "bool": "bool"}

SCALAR_LIST_HOST = textwrap.dedent('''
    import ctypes, json, sys
    import numpy as np
    from tiny_npu import acl
    P, U64 = ctypes.c_void_p, ctypes.c_uint64
    CTYPE = {"int64": (ctypes.c_int64, acl.INT64), "int32": (ctypes.c_int32, acl.INT32),
             "float": (ctypes.c_float, acl.FLOAT), "double": (ctypes.c_double, acl.DOUBLE),
             "bool": (ctypes.c_uint8, acl.BOOL)}
    lists = json.loads(sys.argv[1])
    libs = acl.Libraries()
    a, n = libs.ascendcl, libs.nnopbase
    n.aclCreateScalar.argtypes, n.aclCreateScalar.restype = [P, ctypes.c_int], P
    n.aclCreateScalarList.argtypes, n.aclCreateScalarList.restype = [P, U64], P
    n.aclCreateTensorList.argtypes, n.aclCreateTensorList.restype = [P, U64], P
    assert a.aclInit(None) == 0 and a.aclrtSetDevice(0) == 0
    stream = P()
    assert a.aclrtCreateStream(ctypes.byref(stream)) == 0
    op = acl.AclnnOp(libs, "ForeachMulScalarList", "TTT")
    rng = np.random.default_rng(32)
    keep, record = [], {}

    def tensor(values):
        v = np.ascontiguousarray(values, dtype=np.float32)
        ptr = P()
        assert a.aclrtMalloc(ctypes.byref(ptr), max(v.nbytes, 1), 0) == 0
        assert a.aclrtMemcpy(ptr, v.nbytes, v.ctypes.data, v.nbytes, acl.MEMCPY_H2D) == 0
        nd = v.ndim
        dims = (ctypes.c_int64 * nd)(*v.shape)
        strides = (ctypes.c_int64 * nd)(*[s // 4 for s in v.strides])
        h = n.aclCreateTensor(dims, nd, acl.FLOAT, strides, 0, acl.FORMAT_ND, dims, nd, ptr)
        assert h
        keep.append((ptr, h))
        return ptr, h

    def read(ptr, shape):
        out = np.empty(shape, np.float32)
        assert a.aclrtMemcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, acl.MEMCPY_D2H) == 0
        return out

    for name, members in lists.items():
        xs = [rng.uniform(-2, 2, (2, 3 + i)).astype(np.float32) for i in range(len(members))]
        xh = [tensor(x) for x in xs]
        oh = [tensor(np.zeros_like(x)) for x in xs]
        scalars = []
        for kind, value in members:
            ctype, dtype = CTYPE[kind]
            buf = ctype(value)
            keep.append(buf)
            scalars.append(n.aclCreateScalar(ctypes.byref(buf), dtype))
        sl = n.aclCreateScalarList((P * len(scalars))(*scalars), len(scalars))
        xl = n.aclCreateTensorList((P * len(xh))(*[h for _, h in xh]), len(xh))
        ol = n.aclCreateTensorList((P * len(oh))(*[h for _, h in oh]), len(oh))
        ws, ex = op.prepare(xl, sl, ol)
        w = P()
        if ws:
            assert a.aclrtMalloc(ctypes.byref(w), ws, 0) == 0
        assert op.phase2(w, ws, ex, stream) == 0
        assert a.aclrtSynchronizeStream(stream) == 0
        record[name] = {"x": [x.tolist() for x in xs], "out": [read(p, x.shape).tolist() for (p, _), x in zip(oh, xs)]}
    print(json.dumps(record))
''')


def test_scalar_list_members_keep_their_types_and_replay_reads_them(tmp_path):
    host = tmp_path / "scalar_lists.py"
    host.write_text(SCALAR_LIST_HOST)
    r = run([shimtest.PYTHON, str(host), json.dumps(SCALAR_LISTS)], tmp_path / "w",
            env={"MSPROBE_TASK": "tensor"}).check()
    record = json.loads(r.stdout.strip().splitlines()[-1])
    docs = check_dump(r.dump.root)
    entries = sorted(((n, e) for d in docs for n, e in d["data"].items()
                      if shimtest.op_type(n) == "ForeachMulScalarList"), key=lambda kv: kv[1]["launch"]["index"])
    assert len(entries) == len(SCALAR_LISTS), [n for n, _ in entries]
    for (name, entry), (kind, members) in zip(entries, SCALAR_LISTS.items()):
        x, scalars = entry["input_args"]
        # Each member as a lone aclScalar of its dtype is written: int / float / bool with its exact value.
        want = [{"type": LEAF_TYPE[k], "value": float(np.float32(v)) if k == "float" else v} for k, v in members]
        assert scalars == want, (kind, scalars, want)
        assert all(type(s["value"]) is type(w["value"]) for s, w in zip(scalars, want)), (kind, scalars)
        assert len(x) == len(members) and len(entry["output"]) == 1 and len(entry["output"][0]) == len(members)
        # The kernel's results, independently: x[i] * scalars[i] in numpy, rounded to float32 once.
        for i, (k, v) in enumerate(members):
            xi = np.array(record[kind]["x"][i], np.float32)
            np.testing.assert_array_equal(np.array(record[kind]["out"][i], np.float32),
                                          (xi.astype(np.float64) * float(v)).astype(np.float32))
    # replay rebuilds each call from the dumped leaves and passes every kernel (a wrong type or value would make a
    # reference unusable, a skip, or a different product, an error).
    out = tmp_path / "replay"
    rep = inspect("replay", r.dump.root, "--out", out, expect=0)
    (path,) = out.glob("accuracy_checking_result_*.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = [x for x in csv.DictReader(f) if shimtest.op_type(x["API name"]) == "ForeachMulScalarList"]
    assert [x["API name"] for x in rows] == [n for n, _ in entries]
    assert all(x["Forward Test Success"] == "pass" for x in rows), rows
    (path,) = out.glob("accuracy_checking_details_*.csv")
    with open(path, newline="", encoding="utf-8") as f:
        details = [x["API Name"] for x in csv.DictReader(f)]
    for (name, _), members in zip(entries, SCALAR_LISTS.values()):
        assert [d for d in details if d.startswith(name + ".")] == \
            [f"{name}.output.0.{i}" for i in range(len(members))], details
    assert " 0 skipped" in rep.stdout, rep.stdout
    # show names each member's type when they differ.
    shown = inspect("show", r.dump.root, "ForeachMulScalarList#3", expect=0).stdout
    assert re.search(r"^\s+1\s+\[int, float, bool\] \[2, 0\.25, true\]$", shown, re.M), shown
    shown = inspect("show", r.dump.root, "ForeachMulScalarList#0", expect=0).stdout
    assert re.search(r"^\s+1\s+int\[\] \[3, -2\]$", shown, re.M), shown
