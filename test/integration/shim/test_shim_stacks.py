"""Call stacks of captured kernels (issue 5), end to end under libmsprobe_shim.so:

* train.py: every kernel's stack names the train.py line and the Module (or optimizer) method that launched
  it, checked against the source files (ast and the files' own lines), with phase 2 on tiny_npu's task-queue
  thread and inline; the frames are exactly the ones Python itself reports at each aclnn phase 1 (a driver
  records sys._getframe() there); the OpName is the documented rule applied to those frames, and names are
  the same in every run;
* acl_app (a C++ program built with -g): native frames name its launch helpers, `static` ones included, at
  offsets that nm places inside those functions;
* a host that throws and catches C++ exceptions behaves the same under the shim while stacks are taken;
* stack.json: each distinct frame list once, every kernel of dump.json in exactly one group and no other names,
  for train.py (1 and 2 ranks), acl_app and every MSPROBE_STACK mode.
"""
import ast
import collections
import json
import os
import re
import subprocess
import sysconfig

import pytest

import shimtest
from shimtest import PYTHON, SOURCE, TRAIN, op_type

EXAMPLES = os.path.join(SOURCE, "examples")
TINY = os.path.join(EXAMPLES, "tiny_npu")
OPS_PY = os.path.join(TINY, "ops.py")
ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
EXCEPTION_HOST = os.path.join(shimtest.BUILD, "tests", "shim_exception_host")
STEPS = "2"

PY_FRAME = re.compile(r"^File (.*), line (\d+), in (.*), \n (.*)$", re.S)
NATIVE_FRAME = re.compile(r"^(.*) \(([^()]+)\+0x([0-9a-f]+)\)$")
STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


# ---- reading stacks -----------------------------------------------------------------------------------------
def load_stacks(folder):
    with open(os.path.join(folder.path, "stack.json")) as f:
        return json.load(f)


def python_frames(frames):
    """[(file, line, qualname, source)] of the Python frames among msprobe frame strings, innermost first."""
    out = []
    for s in frames:
        m = PY_FRAME.match(s)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return out


def stack_of(stacks):
    """{kernel name: frames} from stack.json's groups."""
    out = {}
    for names, frames in stacks.values():
        for n in names:
            out[n] = frames
    return out


def group_problems(folder, stacks, allow_missing=()):
    """stack.json against dump.json: every group names kernels and has frames, no two groups have the same frame
    list, every kernel is in exactly one group (except those in allow_missing, which are in none), no group names
    a kernel dump.json does not have."""
    problems = []
    seen = {}
    where = collections.Counter()
    for gid, group in stacks.items():
        if not (isinstance(group, list) and len(group) == 2):
            problems.append(f"group {gid}: not [[names], [frames]]: {group!r}"[:300])
            continue
        names, frames = group
        if not names or not frames:
            problems.append(f"group {gid}: {len(names)} names, {len(frames)} frames")
        key = tuple(frames)
        if key in seen:
            problems.append(f"groups {seen[key]} and {gid} have the same {len(frames)} frames")
        seen[key] = gid
        where.update(names)
    kernels = folder.names()
    for n, c in where.items():
        if n not in kernels:
            problems.append(f"group names {n}, which dump.json does not have")
        if c != 1:
            problems.append(f"{n} is in {c} groups")
    for n in kernels:
        if n in allow_missing:
            if where[n]:
                problems.append(f"{n} has a group but should have none")
        elif not where[n]:
            problems.append(f"{n} is in no group")
    return problems


def by_launch(folder):
    return sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])


# ---- the source, independently --------------------------------------------------------------------------------
class Source:
    """Function and class spans of a Python file (ast), and its lines."""

    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.text = f.read()
        self.lines = self.text.splitlines()
        tree = ast.parse(self.text)
        self.functions = {}  # qualname -> (first line, last line)
        self.classes = set()
        self.call_lines = set()  # lines covered by a call expression

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    q = prefix + child.name
                    self.functions[q] = (child.lineno, child.end_lineno)
                    visit(child, q + ".<locals>.")
                elif isinstance(child, ast.ClassDef):
                    self.classes.add(prefix + child.name)
                    visit(child, prefix + child.name + ".")
                else:
                    if isinstance(child, ast.Call):
                        self.call_lines.update(range(child.lineno, child.end_lineno + 1))
                    visit(child, prefix)

        visit(tree, "")

    def line(self, n):
        return self.lines[n - 1].strip() if 0 < n <= len(self.lines) else None

    def inside(self, qualname, line):
        if qualname == "<module>":
            return 0 < line <= len(self.lines)
        while qualname.endswith(">") and ".<locals>." in qualname:  # a comprehension: its enclosing function
            qualname = qualname.rsplit(".<locals>.", 1)[0]
        span = self.functions.get(qualname)
        return span is not None and span[0] <= line <= span[1]


SOURCES = {os.path.realpath(p): Source(p) for p in
           [TRAIN] + [os.path.join(TINY, n) for n in sorted(os.listdir(TINY)) if n.endswith(".py")]}
# Classes whose methods launch kernels: the model's modules, the optimizer, the process group.
MODEL_CLASSES = {(path, c) for path, s in SOURCES.items() for c in s.classes}


def is_dispatch(qualname):
    last = qualname.split(".")[-1]
    return last.startswith("<") or (last.startswith("_") and last != "__init__")


def is_stdlib(filename):
    if filename.startswith("<frozen "):
        return True
    real = os.path.realpath(filename)
    return real.startswith(STDLIB) and "site-packages" not in real and "dist-packages" not in real


def expected_op_name(frames):
    """docs/stacks.md's rule, applied to frames (innermost first) and sanitized as spec §5 says."""
    names = [q for f, _, q, _ in reversed(frames) if not is_stdlib(f) and not is_dispatch(q)]
    return re.sub(r"[^A-Za-z0-9_-]", "_", "/".join(names)) or "Default"


def train_kernel_problems(name, frames):
    """A train.py kernel's Python frames against the source files."""
    problems = []
    py = python_frames(frames)
    if not py:
        return [f"{name}: no Python frames"]
    for file, line, qual, text in py:
        src = SOURCES.get(os.path.realpath(file))
        if src is None:
            if not is_stdlib(file):
                problems.append(f"{name}: frame in an unexpected file {file}")
            continue
        if src.line(line) != text:
            problems.append(f"{name}: {file}:{line} reads {src.line(line)!r}, the frame says {text!r}")
        if not src.inside(qual, line):
            problems.append(f"{name}: {file}:{line} is not inside {qual}")
        if line not in src.call_lines:
            problems.append(f"{name}: {file}:{line} ({text}) is not a call")
    # The train.py line: the innermost frame in train.py.
    in_train = [fr for fr in py if os.path.realpath(fr[0]) == os.path.realpath(TRAIN)]
    if not in_train:
        problems.append(f"{name}: no frame in train.py")
    # The method that launched it: the innermost method of a class of train.py or tiny_npu that is not dispatch.
    methods = [fr for fr in py if not is_dispatch(fr[2]) and "." in fr[2] and "<locals>" not in fr[2]
               and (os.path.realpath(fr[0]), fr[2].rsplit(".", 1)[0]) in MODEL_CLASSES]
    if not methods:
        problems.append(f"{name}: no Module or optimizer method among {[q for _, _, q, _ in py]}")
    # The op: the innermost frame in ops.py dispatches this kernel's op type.
    ops = [fr for fr in py if os.path.realpath(fr[0]) == os.path.realpath(OPS_PY)]
    launch = next((fr for fr in ops if '_run("' in fr[3] or '_unary("' in fr[3]), None)
    if launch is None or not any(f'{w}("{op_type(name)}"' in launch[3] for w in ("_run", "_unary")):
        problems.append(f"{name}: ops.py frames {[(q, t) for _, _, q, t in ops]} do not launch {op_type(name)}")
    # The name carries the scope of these frames.
    scope = name.split(".")[1]
    if scope != expected_op_name(py):
        problems.append(f"{name}: OpName {scope}, the frames give {expected_op_name(py)}")
    return problems


def train(tmp_path, tag, *args, env=None):
    return shimtest.run_train(tmp_path / tag, "--steps", STEPS, *args, env=env)


# ---- train.py ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def train_runs(tmp_path_factory):
    """train.py under the shim (mixed stacks), phase 2 on the task-queue thread and inline."""
    base = tmp_path_factory.mktemp("train")
    return {tq: train(base, f"tq{tq}", env={"TASK_QUEUE_ENABLE": tq}) for tq in ("1", "0")}


@pytest.mark.parametrize("tq", ["1", "0"])
def test_every_train_kernel_names_its_train_py_line_and_method(train_runs, tq):
    r = train_runs[tq]
    folders = r.dump.folders()
    assert len(folders) == int(STEPS), folders
    checked = collections.Counter()
    for folder in folders:
        stacks = load_stacks(folder)
        assert not group_problems(folder, stacks), shimtest.fail_report(group_problems(folder, stacks))
        per_kernel = stack_of(stacks)
        problems = []
        for name, _ in by_launch(folder):
            problems += train_kernel_problems(name, per_kernel[name])
            checked[op_type(name)] += 1
        assert not problems, shimtest.fail_report(problems)
    # Forward, backward and optimizer kernels were all checked.
    for op in ("Embedding", "LayerNorm", "Matmul", "Gelu", "Softmax", "MseLoss", "MseLossBackward",
               "EmbeddingDenseBackward", "ApplyAdamWV2"):
        assert checked[op] > 0, checked


def test_names_carry_the_scope_and_are_the_same_in_every_run(train_runs):
    a, b = train_runs["1"].dump, train_runs["0"].dump
    for fa, fb in zip(a.folders(), b.folders(), strict=True):
        assert [n for n, _ in by_launch(fa)] == [n for n, _ in by_launch(fb)]
    names = [n for f in a.folders() for n in f.names()]
    assert not any(".Default." in n for n in names), [n for n in names if ".Default." in n][:5]
    # The model's structure is in the names (msprobe-style scopes), not tiny_npu's dispatch internals.
    step0 = a.folder(0).names()
    for want in ("Matmul.main_train_TinyModel_forward_Linear_forward_matmul.0.forward",
                 "Matmul.main_train_TinyModel_backward_Linear_backward_matmul.0.forward",
                 "Gelu.main_train_TinyModel_forward_Gelu_forward_gelu.0.forward",
                 "ApplyAdamWV2.main_train_AdamW_step_apply_adamw_v2.0.forward"):
        assert want in step0, sorted(step0)
    assert not any(s in n for n in names for s in ("_run", "_phase1", "__call__", "_module_"))


def test_names_and_stacks_are_the_same_with_the_gil_held(tmp_path, train_runs):
    # tiny_npu releases the GIL around op dispatch (ctypes.CDLL, as torch); TINY_NPU_HOLD_GIL=1 keeps it (PyDLL):
    # the kernels' names and Python frames must not depend on it.
    held = train(tmp_path, "held", env={"TASK_QUEUE_ENABLE": "1", "TINY_NPU_HOLD_GIL": "1"})
    released = train_runs["1"]
    for fa, fb in zip(held.dump.folders(), released.dump.folders(), strict=True):
        assert [n for n, _ in by_launch(fa)] == [n for n, _ in by_launch(fb)]
        sa, sb = stack_of(load_stacks(fa)), stack_of(load_stacks(fb))
        assert {n: python_frames(f) for n, f in sa.items()} == {n: python_frames(f) for n, f in sb.items()}


DRIVER = r'''
import json, os, runpy, sys
sys.path.insert(0, {examples!r})
from tiny_npu import acl

records = []
_init = acl.AclnnOp.__init__


def init(self, libs, name, signature):
    _init(self, libs, name, signature)
    real = self.phase1

    def phase1(*args):
        frames, f = [], sys._getframe(1)
        while f is not None:
            frames.append([f.f_code.co_filename, f.f_lineno, f.f_code.co_qualname])
            f = f.f_back
        records.append([name, frames])
        return real(*args)
    self.phase1 = phase1


acl.AclnnOp.__init__ = init
sys.argv = [{train!r}] + sys.argv[1:]
try:
    runpy.run_path({train!r}, run_name="__main__")
except SystemExit as e:
    code = e.code
else:
    code = 0
with open(os.environ["PHASE1_RECORDS"], "w") as f:
    json.dump(records, f)
sys.exit(code)
'''


@pytest.mark.parametrize("tq", ["1", "0"])
def test_train_stacks_are_the_frames_python_reports_at_phase_1(tmp_path, tq):
    """Kernel k of the run (launch order) has exactly the Python frames that the interpreter itself shows at the
    k-th aclnn phase 1, with phase 2 on the task-queue thread (tq=1) or inline (tq=0)."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(examples=EXAMPLES, train=TRAIN))
    records = tmp_path / "records.json"
    r = shimtest.run([PYTHON, driver, "--steps", STEPS], tmp_path / "run",
                     env={"TASK_QUEUE_ENABLE": tq, "PHASE1_RECORDS": records}).check()
    with open(records) as f:
        want = json.load(f)
    kernels = []
    for folder in r.dump.folders():
        per_kernel = stack_of(load_stacks(folder))
        kernels += [(e["launch"]["index"], n, per_kernel.get(n)) for n, e in folder.entries()]
    kernels.sort()
    assert [op_type(n) for _, n, _ in kernels] == [name for name, _ in want]
    problems = []
    for (_, name, frames), (_, ref) in zip(kernels, want):
        got = python_frames(frames or [])
        # The shim's innermost frame is the driver's wrapper, which made the ctypes call.
        if not got or got[0][2] != "init.<locals>.phase1":
            problems.append(f"{name}: innermost frame {got[:1]}")
            continue
        if [[f, ln, q] for f, ln, q, _ in got[1:]] != ref:
            problems.append(f"{name}: frames\n  {[(q, ln) for _, ln, q, _ in got[1:]]}\n  python says\n  "
                            f"{[(q, ln) for _, ln, q in ref]}")
    assert not problems, shimtest.fail_report(problems, 5)


# ---- stack.json in every mode, 1 and 2 ranks --------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["off", "native", "python", "mixed"])
def test_train_stack_json_groups_in_every_mode(tmp_path, mode, train_runs):
    r = train(tmp_path, mode, env={"MSPROBE_STACK": mode})
    # The names do not depend on the stack mode (the OpName always comes from the Python frames).
    assert r.dump.names_by_folder() == train_runs["1"].dump.names_by_folder()
    for folder in r.dump.folders():
        stacks = load_stacks(folder)
        if mode == "off":
            assert stacks == {}  # docs/stacks.md: nothing recorded, an empty object
            continue
        assert not group_problems(folder, stacks), shimtest.fail_report(group_problems(folder, stacks))
        for names, frames in stacks.values():
            n_py = len(python_frames(frames))
            if mode == "python":
                assert n_py == len(frames) > 0, frames
            elif mode == "native":
                assert n_py == 0 and all(NATIVE_FRAME.match(s) or re.match(r"^\S+\+0x[0-9a-f]+$|^0x[0-9a-f]+$", s)
                                         for s in frames), frames
            else:
                assert 0 < n_py < len(frames), frames
        if mode == "native":
            # Kernels launched from different Python lines through the same native path share a group.
            assert len(stacks) < len(folder.names())


def test_two_ranks_stack_json_groups(tmp_path):
    r = shimtest.run_train(tmp_path / "ranks", "--steps", STEPS, "--ranks", "2", timeout=600)
    assert r.dump.ranks() == [0, 1]
    hccl_seen = 0
    for folder in r.dump.folders():
        stacks = load_stacks(folder)
        assert not group_problems(folder, stacks), shimtest.fail_report(group_problems(folder, stacks))
        per_kernel = stack_of(stacks)
        problems = []
        for name, _ in by_launch(folder):
            if op_type(name).startswith("Hccl"):
                # tiny_npu calls HCCL through ctypes.CDLL, which releases the GIL (a collective blocks; torch does
                # the same): the calling thread's Python frames are read all the same, and give the scope.
                hccl_seen += 1
                py = python_frames(per_kernel[name])
                assert py and py[0][0].endswith("tiny_npu/distributed.py"), per_kernel[name]
                assert name.split(".")[1] != "Default", name
            else:
                problems += train_kernel_problems(name, per_kernel[name])
        assert not problems, shimtest.fail_report(problems)
    assert hccl_seen > 0
    # Every rank runs the same code: the same names, step by step.
    for step in r.dump.steps():
        assert r.dump.folder(step, 0).names() == r.dump.folder(step, 1).names()


# ---- acl_app: native frames ------------------------------------------------------------------------------------
def local_functions(path):
    """{demangled name without parameters: (start, end, is local)} of the program's functions (nm)."""
    out = {}
    text = subprocess.run(["nm", "-C", "-S", "--defined-only", path], capture_output=True, text=True,
                          check=True).stdout
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in "tT":
            start, size = int(parts[0], 16), int(parts[1], 16)
            out[parts[3].split("(")[0]] = (start, start + size, parts[2] == "t")
    return out


# The launch helper of each kernel acl_app makes (examples/acl_app.cpp), by op type.
ACL_APP_HELPERS = {"Add": "launch_aclop_add", "Mul": "launch_aclnn_mul", "HcclAllReduce": "launch_hccl_all_reduce",
                   "fake_vector_add": "launch_rt_vector_add"}


@pytest.mark.parametrize("mode", ["native", "mixed"])
def test_acl_app_native_frames_name_its_static_functions(tmp_path, mode):
    r = shimtest.run([ACL_APP], tmp_path, env={"MSPROBE_STACK": mode}).check()
    funcs = local_functions(ACL_APP)
    app = os.path.basename(ACL_APP)
    seen = set()
    for folder in r.dump.folders():
        stacks = load_stacks(folder)
        assert not group_problems(folder, stacks), shimtest.fail_report(group_problems(folder, stacks))
        per_kernel = stack_of(stacks)
        for name in folder.names():
            helper = ACL_APP_HELPERS[op_type(name)]
            frames = per_kernel[name]
            assert python_frames(frames) == []
            mine = []
            for s in frames:
                m = NATIVE_FRAME.match(s)
                if m and m.group(2) == app:
                    mine.append((m.group(1).split("(")[0], int(m.group(3), 16)))
            # The helper, then main (then _start), with offsets inside the functions nm reports.
            assert [f for f, _ in mine if f != "_start"] == [helper, "main"], frames
            for f, off in mine:
                start, end, _ = funcs[f]
                assert start <= off < end, (f, hex(off), hex(start), hex(end))
            assert funcs[helper][2], f"{helper} should be a static (local) function"
            seen.add(helper)
    assert seen == set(ACL_APP_HELPERS.values())


# ---- a host that throws C++ exceptions ------------------------------------------------------------------------
def test_exception_host_is_unchanged_while_stacks_are_taken(tmp_path):
    plain = shimtest.run([EXCEPTION_HOST], tmp_path / "plain", shim=False)
    shimmed = shimtest.run([EXCEPTION_HOST], tmp_path / "shim", env={"MSPROBE_STACK": "mixed"})
    assert plain.returncode == shimmed.returncode == 0, shimmed.stderr
    assert shimmed.stdout == plain.stdout and plain.stdout.count("caught DerivedError") == 9
    folder, = shimmed.dump.folders()
    stacks = load_stacks(folder)
    assert not group_problems(folder, stacks), shimtest.fail_report(group_problems(folder, stacks))
    # Two launches from the same line of launch_mul, called from two lines of main: two stacks.
    assert len(stacks) == 2
    for names, frames in stacks.values():
        assert any(s.startswith("(anonymous namespace)::launch_mul(") for s in frames), frames
        assert any(s.startswith("main (") for s in frames), frames


# ---- very deep scopes (docs/format.md, "Kernel names") ----------------------------------------------------------------
DEEP = """import sys
import numpy as np
import tiny_npu
from tiny_npu import ops


def level(n, x):
    return ops.gelu(x) if n == 0 else level(n - 1, x)


tiny_npu.init()
level(int(sys.argv[1]), tiny_npu.Tensor.from_numpy(np.ones((2, 2), np.float32))).numpy()
"""


@pytest.mark.parametrize("depth", [10, 200])
def test_a_very_deep_scope_keeps_its_innermost_frames(tmp_path, depth):
    """The OpName is made of the innermost kMaxPythonFrames (128) Python frames: a deeper stack loses its outermost
    ones. Nothing else shortens a name; a tensor file whose name would pass 255 characters is named at random and
    listed in mapping.csv."""
    script = tmp_path / "deep.py"
    script.write_text(DEEP)
    run = shimtest.run([PYTHON, script, depth], tmp_path / "run", env={"MSPROBE_TASK": "tensor"}).check()
    [(folder, name, entry)] = [k for k in run.dump.kernels() if op_type(k[1]) == "Gelu"]
    frames = python_frames(stack_of(load_stacks(folder))[name])
    # Innermost first: tiny_npu's 5 private dispatch frames, gelu, level x (depth + 1), <module>.
    assert len(frames) == min(depth + 8, 128), [q for _, _, q, _ in frames]
    assert name == f"Gelu.{expected_op_name(frames)}.0.forward"
    scope = name.split(".")[1].split("_")
    assert scope[-1] == "gelu" and scope[:-1] == ["level"] * min(depth + 1, 128 - 6), name
    data = os.path.join(folder.path, "dump_tensor_data")
    written = sorted(t.info["data_name"] for t in shimtest.tensors(entry))
    if len(name) + len(".output.0.npy") <= 255:
        assert not os.path.exists(os.path.join(data, "mapping.csv"))
        assert written == sorted(f"{name}.{io}.0.npy" for io in ("input", "output"))
        return
    with open(os.path.join(data, "mapping.csv")) as f:
        rows = dict(line.rstrip("\n").split(",", 1) for line in f)
    assert sorted(rows) == written == sorted(n for n in os.listdir(data) if n != "mapping.csv")
    assert sorted(rows.values()) == sorted(f"{name}.{io}.0.npy" for io in ("input", "output")), rows
    assert all(re.fullmatch(r"\d{32}\.npy", n) for n in written), written
