"""Shared helpers of the libmsprobe_shim.so integration tests: run a workload with or without the shim,
load the dump tree it leaves (spec §5), load tensors by data_name, iterate kernels and tensors.

    run = run_train(tmp_path / "a", "--steps", "3", task="tensor")     # under the shim
    plain = run_train(tmp_path / "b", "--steps", "3", shim=False)      # the same workload without it
    for folder in run.dump.folders():                                  # step{N}/rank{R}/
        for name, entry in folder.entries():
            for t in tensors(entry):                                   # every tensor, inputs then outputs
                data = folder.load(t)                                  # numpy array of its file (or None)

Runs are isolated from the caller's environment: every MSPROBE_* / FAKE_CANN_* / TINY_NPU_* variable,
LD_PRELOAD and the launcher's rank variables are removed first, then the test's own are set.
"""
import collections
import json
import math
import os
import re
import subprocess
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

SOURCE = os.path.abspath(os.environ.get("MSPROBE_SOURCE_DIR",
                                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
BUILD = os.path.abspath(os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
SHIM = os.path.join(BUILD, "lib", "libmsprobe_shim.so")
TRAIN = os.path.join(SOURCE, "examples", "train.py")
ASCEND_HOME = os.environ.get("ASCEND_HOME_PATH", os.path.join(BUILD, "fake_cann"))
PYTHON = sys.executable or "/usr/bin/python3"

LOSS_LINE = re.compile(r"^(?:\[rank (\d+)\] )?step (\d+) loss (-?\d+\.\d+)$")
STEP_DIR = re.compile(r"^step(\d+)$")
RANK_DIR = re.compile(r"^rank(\d*)$")
# Variables that would change what a run does if they leaked in from the caller.
_SCRUB_PREFIXES = ("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")
_SCRUB = {"LD_PRELOAD", "RANK_ID", "RANK", "RANK_SIZE", "TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING",
          "MS_ENABLE_RUNTIME_PROFILER", "MS_DEV_LAUNCH_BLOCKING"}
_KEEP = {"MSPROBE_BUILD_DIR", "MSPROBE_SOURCE_DIR"}


def is_run_marker(name):
    """A run's marker in the dump root (.msprobe_shim.<rank folder>.run.json, docs/lifecycle.md): it stays after the
    run, beside the step folders."""
    return name.startswith(".msprobe_shim.") and name.endswith(".run.json")


def root_entries(root):
    """What a dump root holds besides its runs' markers, sorted."""
    return sorted(n for n in os.listdir(root) if not is_run_marker(n))


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if k in _KEEP or not (k in _SCRUB or k.startswith(_SCRUB_PREFIXES))}
    env["ASCEND_HOME_PATH"] = ASCEND_HOME
    env["MSPROBE_BUILD_DIR"] = BUILD
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


@dataclass
class Run:
    args: list
    returncode: int
    stdout: str
    stderr: str
    workdir: str
    dump: "Dump" = None          # None when the run had no shim
    launch_log: str = None       # $FAKE_CANN_LAUNCH_LOG of the run

    def losses(self):
        """{rank: [loss strings exactly as printed]} (rank 0 for a single-process run)."""
        out = collections.defaultdict(list)
        for line in self.stdout.splitlines():
            m = LOSS_LINE.match(line)
            assert m, f"unexpected line on train.py's stdout: {line!r}"
            rank, step = int(m.group(1) or 0), int(m.group(2))
            assert step == len(out[rank]), f"rank {rank}: step {step} printed out of order"
            out[rank].append(m.group(3))
        return dict(out)

    def launches(self):
        """Counter of op types launched, from the stand-in's launch log (one line per aclnn or aclop kernel)."""
        with open(self.launch_log) as f:
            return collections.Counter(line.strip() for line in f if line.strip())

    def check(self):
        assert self.returncode == 0, (f"{' '.join(map(str, self.args))} exited {self.returncode}\n"
                                      f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")
        return self


# ---- the stand-in's two CANN library layouts (test/fake_cann/README.md "Two layouts") ------------------------------
LAYOUTS = {"8.x": os.path.join(BUILD, "fake_cann"), "9.x": os.path.join(BUILD, "fake_cann9")}


def layout_env(layout):
    """What CANN's set_env.sh sets for the install of `layout`: ASCEND_HOME_PATH, and its lib64 first on
    LD_LIBRARY_PATH (a program linked against the other layout then loads this one's libraries)."""
    home = LAYOUTS[layout]
    rest = os.environ.get("LD_LIBRARY_PATH")
    return {"ASCEND_HOME_PATH": home, "LD_LIBRARY_PATH": os.path.join(home, "lib64") + (":" + rest if rest else "")}


def program(name, layout="8.x"):
    """A C++ example as it is built on `layout` (examples/CMakeLists.txt): bin/<name>, bin/cann9/<name>."""
    return os.path.join(BUILD, "bin", *(["cann9"] if layout == "9.x" else []), name)


def run(cmd, workdir, shim=True, env=None, timeout=300):
    """Runs `cmd` (a list) in `workdir` (created), under the shim unless shim=False.

    The dump goes to workdir/dump unless env sets MSPROBE_DUMP_PATH; the stand-in's launch log to
    workdir/launches.log. `env` values override the defaults (MSPROBE_* included)."""
    workdir = str(workdir)
    os.makedirs(workdir, exist_ok=True)
    log = os.path.join(workdir, "launches.log")
    if os.path.exists(log):
        os.unlink(log)
    e = {"FAKE_CANN_LAUNCH_LOG": log}
    if shim:
        e["LD_PRELOAD"] = SHIM
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, "dump")
    e.update(env or {})
    p = subprocess.run([str(c) for c in cmd], env=clean_env(e), cwd=workdir, capture_output=True, text=True,
                       timeout=timeout)
    r = Run(list(cmd), p.returncode, p.stdout, p.stderr, workdir, launch_log=log)
    if shim:
        r.dump = Dump(e["MSPROBE_DUMP_PATH"])
    return r


def run_train(workdir, *args, shim=True, task=None, env=None, check=True, timeout=300):
    """examples/train.py with `args`; task sets MSPROBE_TASK."""
    e = dict(env or {})
    if task is not None:
        e["MSPROBE_TASK"] = task
    r = run([PYTHON, TRAIN, *args], workdir, shim=shim, env=e, timeout=timeout)
    return r.check() if check else r


# ---- the dump tree ----------------------------------------------------------------------------------------
def op_type(kernel_name):
    """{OpType}.{OpName}.{n}.forward -> OpType (both parts are sanitized: no dots inside)."""
    return kernel_name.split(".", 1)[0]


RANDOM_COMM_NAME = re.compile(r"^[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$")  # HcclGetRootInfo's identifier: pid, time, random
CODE_OFFSET = re.compile(r"\+0x[0-9a-f]+\)$")


def comparable(dump, offsets=True):
    """What two runs of the same workload must agree on in a dump: {path relative to the root: content} for every
    dump.json, stack.json and construct.json (parsed) and every tensor file (its bytes), without what differs from
    run to run by nature: the run's id and pid, launch time stamps, random communicator names (HcclGetRootInfo's),
    the dump root's own path, the run markers beside the step folders. offsets=False also drops the code offsets of
    native frames ("main (app+0x48e7)" -> "main (app)"), for two builds of one program."""
    out = {}
    for folder in dump.folders():
        rel = os.path.relpath(folder.path, dump.root)
        for name in ("dump.json", "stack.json", "construct.json"):
            with open(os.path.join(folder.path, name)) as f:
                out[f"{rel}/{name}"] = _run_independent(json.load(f), os.path.abspath(dump.root), offsets)
        for name in folder.files():
            with open(folder.file_path(name), "rb") as f:
                out[f"{rel}/dump_tensor_data/{name}"] = f.read()
    return out


def _run_independent(value, root, offsets):
    if isinstance(value, dict):
        return {k: ("<comm>" if k == "name" and isinstance(v, str) and RANDOM_COMM_NAME.match(v) else
                    _run_independent(v, root, offsets))
                for k, v in value.items() if k not in ("run", "timestamp")}
    if isinstance(value, list):
        return [_run_independent(v, root, offsets) for v in value]
    if isinstance(value, str):
        value = value.replace(root, "<dump>")
        return value if offsets else CODE_OFFSET.sub(")", value)
    return value


def differences(a, b, limit=10):
    """Readable differences between two comparable() results (empty when equal)."""
    out = [f"only in the first: {k}" for k in sorted(set(a) - set(b))]
    out += [f"only in the second: {k}" for k in sorted(set(b) - set(a))]
    for k in sorted(set(a) & set(b)):
        if a[k] != b[k]:
            shown = [json.dumps(x, sort_keys=True)[:400] if not isinstance(x, bytes) else f"{len(x)} bytes"
                     for x in (a[k], b[k])]
            out.append(f"{k} differs:\n  {shown[0]}\n  {shown[1]}")
    return out[:limit]


def entry_without_time(entry):
    """A dump.json entry without its launch time stamp (which differs between runs)."""
    out = dict(entry)
    if isinstance(out.get("launch"), dict):
        out["launch"] = {k: v for k, v in out["launch"].items() if k != "timestamp"}
    return out


def base_name(kernel_name):
    """{OpType}.{OpName}.{n}.forward -> {OpType}.{OpName}."""
    return kernel_name.split(".")[0] + "." + kernel_name.split(".")[1]


def ordinal(kernel_name):
    """{OpType}.{OpName}.{n}.forward -> n."""
    op, scope, n, direction = kernel_name.split(".")
    assert direction == "forward", kernel_name
    return int(n)


class Folder:
    """One step{N}/rank{R}/ folder."""

    def __init__(self, path, step, rank):
        self.path = path
        self.step = step
        self.rank = rank  # int, or None for the plain "rank" folder
        self._dump = self._construct = None
        self._arrays = {}  # data_name -> array: several checks read the same files

    def __repr__(self):
        return f"Folder({self.path})"

    @property
    def dump(self):
        if self._dump is None:
            with open(os.path.join(self.path, "dump.json")) as f:
                self._dump = json.load(f)  # NaN/Infinity tokens are accepted, as msprobe's readers do
        return self._dump

    @property
    def data(self):
        return self.dump["data"]

    @property
    def construct(self):
        if self._construct is None:
            with open(os.path.join(self.path, "construct.json")) as f:
                self._construct = json.load(f)
        return self._construct

    @property
    def tensor_dir(self):
        return os.path.join(self.path, "dump_tensor_data")

    def entries(self):
        return self.data.items()

    def names(self):
        return set(self.data)

    def op_counts(self):
        return collections.Counter(op_type(n) for n in self.data)

    def files(self):
        d = self.tensor_dir
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def file_path(self, tensor_or_name):
        name = tensor_or_name["data_name"] if isinstance(tensor_or_name, dict) else tensor_or_name
        return os.path.join(self.tensor_dir, name)

    def load(self, tensor_or_name):
        """The npy file of a tensor (dict with data_name) or of a data_name; None when not saved."""
        if isinstance(tensor_or_name, dict) and "data_name" not in tensor_or_name:
            return None
        name = tensor_or_name["data_name"] if isinstance(tensor_or_name, dict) else tensor_or_name
        a = self._arrays.get(name)
        if a is None:
            a = self._arrays[name] = np.load(self.file_path(name), allow_pickle=False)
            a.setflags(write=False)  # shared between callers
        return a


class Dump:
    """A dump root: {root}/step{N}/rank{R}/."""

    def __init__(self, root):
        self.root = root
        self._folders = {}  # path -> Folder, so that each dump.json and file is read once

    def exists(self):
        return os.path.isdir(self.root)

    def steps(self):
        if not self.exists():
            return []
        return sorted(int(m.group(1)) for m in (STEP_DIR.match(n) for n in os.listdir(self.root)) if m)

    def folders(self):
        out = []
        for s in self.steps():
            sd = os.path.join(self.root, f"step{s}")
            for n in sorted(os.listdir(sd)):
                m = RANK_DIR.match(n)
                assert m, f"unexpected entry {n} in {sd}"
                out.append(self._folder(os.path.join(sd, n), s, int(m.group(1)) if m.group(1) else None))
        return out

    def _folder(self, path, step, rank):
        f = self._folders.get(path)
        if f is None:
            f = self._folders[path] = Folder(path, step, rank)
        return f

    def folder(self, step, rank=None):
        name = "rank" if rank is None else f"rank{rank}"
        path = os.path.join(self.root, f"step{step}", name)
        assert os.path.isdir(path), f"no folder {path}; have {[f.path for f in self.folders()]}"
        return self._folder(path, step, rank)

    def ranks(self):
        return sorted({f.rank for f in self.folders()}, key=lambda r: -1 if r is None else r)

    def op_counts(self, rank="any"):
        """Kernels per op type summed over steps (and ranks unless `rank` picks one)."""
        c = collections.Counter()
        for f in self.folders():
            if rank == "any" or f.rank == rank:
                c += f.op_counts()
        return c

    def names_by_folder(self):
        """{(step, rank): set of kernel names}."""
        return {(f.step, f.rank): f.names() for f in self.folders()}

    def kernels(self):
        """(folder, name, entry) for every kernel, folder by folder."""
        for f in self.folders():
            for name, entry in f.entries():
                yield f, name, entry


# ---- entries ----------------------------------------------------------------------------------------------
def is_tensor(arg):
    return isinstance(arg, dict) and "dtype" in arg and "shape" in arg and "type" in arg and \
        arg["type"].endswith("Tensor")


@dataclass
class TensorRef:
    side: str          # "input" or "output"
    slot: str          # "0", "1", "2.0" (member 0 of a tensor list in slot 2) ...
    info: dict = field(repr=False)


def tensors(entry):
    """Every tensor of an entry: inputs in order, then outputs (tensor lists flattened with a.b slots)."""
    for side, key in (("input", "input_args"), ("output", "output")):
        for i, arg in enumerate(entry.get(key) or []):
            if isinstance(arg, list):
                for j, member in enumerate(arg):
                    if is_tensor(member):
                        yield TensorRef(side, f"{i}.{j}", member)
            elif is_tensor(arg):
                yield TensorRef(side, str(i), arg)


def arg_value(folder, arg):
    """A dumped argument as a reference function takes it: tensors loaded as float64 arrays (int dtypes
    kept as int64), tensor lists as lists, None for null, {"type","value"} as its value."""
    if arg is None:
        return None
    if isinstance(arg, list):
        return [arg_value(folder, a) for a in arg]
    if is_tensor(arg):
        a = folder.load(arg)
        assert a is not None, f"tensor without data_name: {arg}"
        return a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(np.float64)
    assert isinstance(arg, dict) and "value" in arg, f"unexpected argument form: {arg}"
    return arg["value"]


def arg_dtype(arg):
    return arg["dtype"] if is_tensor(arg) else None


# numpy dtype of an npy file for each dump.json dtype (bf16 widened to float32, spec §5).
NPY_DTYPE = {"Float32": np.float32, "Float16": np.float16, "BFloat16": np.float32, "Float64": np.float64,
             "Int8": np.int8, "Int16": np.int16, "Int32": np.int32, "Int64": np.int64, "UInt8": np.uint8,
             "UInt16": np.uint16, "UInt32": np.uint32, "UInt64": np.uint64, "Bool": np.bool_}
# Raw (bin) bytes per element of the original dtype.
ITEMSIZE = {"Float32": 4, "Float16": 2, "BFloat16": 2, "Float64": 8, "Int8": 1, "Int16": 2, "Int32": 4,
            "Int64": 8, "UInt8": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8, "Bool": 1}


# ---- statistics as msprobe computes them (reference/msprobe_formats.md §1.6, format/stats.h) -----------
def expected_stats(data, dtype):
    """(Max, Min, Mean, Norm) of a tensor's file data, float64 sums; Mean/Norm rounded to the statistics
    dtype (the tensor's own for Float32/Float16/BFloat16, float32 for integers and float64)."""
    import npu_refs
    a = np.asarray(data)
    if a.size == 0:
        return None, None, None, None
    if dtype == "Bool":
        return bool(a.any()), bool(a.all()), None, None
    if a.ndim == 0:  # msprobe clones a 0-d tensor's value into all four (a negative value: negative Norm)
        x = a.item()
        return x, x, x, x
    stat_dtype = dtype if dtype in ("Float32", "Float16", "BFloat16") else "Float32"
    v = npu_refs.round_to(a.astype(np.float64), stat_dtype) if stat_dtype != dtype else a.astype(np.float64)
    if np.isnan(v).any():
        return (float("nan"),) * 4
    mx, mn = float(np.max(v)), float(np.min(v))
    mean = float(npu_refs.round_to(np.mean(v), stat_dtype))
    norm = float(npu_refs.round_to(np.sqrt(np.sum(v * v)), stat_dtype))
    return mx, mn, mean, norm


def stat_close(got, want, dtype):
    """Mean/Norm: float64 sums (in another order than numpy's) rounded once to the statistics dtype (the
    tensor's own for floats, float32 for integers, format/stats.h): a value of that dtype, at most one
    unit in its last place from numpy's."""
    import npu_refs
    if want is None or got is None or isinstance(want, bool):
        return got == want
    if want != want:
        return got is not None and got != got
    if math.isinf(want):
        return got == want
    stat_dtype = dtype if dtype in ("Float32", "Float16", "BFloat16") else "Float32"
    if float(npu_refs.round_to(got, stat_dtype)) != got:
        return False  # not rounded to the dtype (msprobe's "low" precision)
    return abs(got - want) <= npu_refs.EPS[stat_dtype] * abs(want)


STAT_KEYS = ("Max", "Min", "Mean", "Norm")


# ---- whole-dump checks (each returns a list of problems, empty when all is well) -----------------------------
def check_files(dump):
    """Tensor task: every tensor's data_name is {kernel}.{input|output}.{slot}.npy, the file loads with
    numpy.load with dump.json's shape and the npy dtype of its dtype, and no file is left unnamed.
    Returns (problems, set of dtypes seen)."""
    problems, seen = [], set()
    for f in dump.folders():
        referenced = set()
        for name, e in f.entries():
            for t in tensors(e):
                want_name = f"{name}.{t.side}.{t.slot}.npy"
                dn = t.info.get("data_name")
                if dn != want_name:
                    problems.append(f"{f.path}: data_name {dn!r}, expected {want_name!r}")
                    continue
                referenced.add(dn)
                try:
                    a = f.load(t.info)
                except Exception as exc:  # noqa: BLE001 - reported with the file name
                    problems.append(f"{f.file_path(dn)}: numpy.load failed: {exc}")
                    continue
                seen.add(t.info["dtype"])
                if list(a.shape) != t.info["shape"]:
                    problems.append(f"{dn}: file shape {a.shape} != dump.json shape {t.info['shape']}")
                want = NPY_DTYPE.get(t.info["dtype"])
                if want is None or a.dtype != np.dtype(want):
                    problems.append(f"{dn}: file dtype {a.dtype} for dump.json dtype {t.info['dtype']}")
        extra = set(f.files()) - referenced
        if extra:
            problems.append(f"{f.path}: files no entry names: {sorted(extra)[:5]}")
    return problems, seen


def collective_members(dump, folder, name, entry):
    """The folders of this step holding the same collective (every rank runs the same program, so the same name is
    the same collective), in comm-rank order, and the comm rank of `folder`'s: the members of the entry's "comm",
    or every rank folder for an entry without one. (None, None) when a member's folder lacks it."""
    folders = [dump.folder(folder.step, r) for r in dump.ranks()]
    comm = entry.get("comm")
    if comm is None:
        return (folders, folders.index(folder)) if all(name in p.data for p in folders) else (None, None)
    members = {}
    for p in folders:
        c = p.data.get(name, {}).get("comm")
        if c is not None and c["name"] == comm["name"]:
            members[c["rank"]] = p
    if sorted(members) != list(range(comm["size"])):
        return None, None
    return [members[r] for r in range(comm["size"])], comm["rank"]


def check_recomputation(dump):
    """Tensor task: every kernel's outputs recomputed from its dumped inputs by npu_refs (collectives from
    the same-named kernel of every member, collective_members). Returns (problems, Counter of op types checked)."""
    import npu_refs
    problems, checked = [], collections.Counter()
    for f, name, e in dump.kernels():
        op = op_type(name)
        dtypes = [arg_dtype(a) for a in e["input_args"]]
        try:
            if op in npu_refs.COLLECTIVE_REFS:
                members, rank = collective_members(dump, f, name, e)
                if members is None:
                    problems.append(f"{name}: not in every member's step{f.step} folder")
                    continue
                per_rank = [[arg_value(p, a) for a in p.data[name]["input_args"]] for p in members]
                with np.errstate(all="ignore"):
                    expected = npu_refs.COLLECTIVE_REFS[op](per_rank, dtypes, rank)
            elif op in npu_refs.REFS:
                args = [arg_value(f, a) for a in e["input_args"]]
                with np.errstate(all="ignore"):
                    expected = npu_refs.REFS[op](args, dtypes)
            else:
                problems.append(f"{name}: op type {op} has no numpy reference in npu_refs")
                continue
        except Exception as exc:  # noqa: BLE001 - a dumped argument the reference cannot use
            problems.append(f"step{f.step}: {name}: the reference failed on the dumped arguments: {exc!r}")
            continue
        outs = e["output"]
        if len(expected) != len(outs):
            problems.append(f"{f.path}: {name}: {len(outs)} outputs dumped, the reference makes {len(expected)}")
            continue
        for i, (want, out) in enumerate(zip(expected, outs)):
            if want is npu_refs.UNSPECIFIED:
                continue
            if out is None or want is None:
                if (out is None) != (want is None):
                    problems.append(f"{f.path}: {name}: output {i} is {'absent' if out is None else 'present'}, "
                                    f"the reference says otherwise")
                continue
            # A tensor list output (aclTensorList out): one reference array per member.
            members = list(zip(want, out)) if isinstance(out, list) else [(want, out)]
            if isinstance(out, list) != isinstance(want, list) or (isinstance(out, list) and len(want) != len(out)):
                problems.append(f"{f.path}: {name}: output {i} and the reference's differ in form or length")
                continue
            for j, (w, o) in enumerate(members):
                where = f"{i}.{j}" if isinstance(out, list) else f"{i}"
                msg = npu_refs.compare(f.load(o), w, o["dtype"])
                if msg:
                    problems.append(f"step{f.step}/{os.path.basename(f.path)}: {name} output {where} ({o['dtype']}): "
                                    f"{msg}")
        checked[op] += 1
    return problems, checked


def tensor_data(dump, files=None):
    """(folder, kernel name, TensorRef, its data) for every tensor of `dump`, the data read from the same tensor's file
    in `files`: a tensor-task dump of the same deterministic program, for a dump without files (statistics, md5);
    `dump`'s own files by default. A kernel or tensor `files` lacks is a problem. Returns (problems, the tuples)."""
    problems, out = [], []
    files = files or dump
    for f, name, e in dump.kernels():
        try:
            other = files.folder(f.step, f.rank)
        except AssertionError as exc:
            problems.append(str(exc))
            continue
        w = other.data.get(name)
        if w is None:
            problems.append(f"step{f.step} {name}: not in {other.path}")
            continue
        ts, tw = list(tensors(e)), list(tensors(w))
        if [(t.side, t.slot) for t in ts] != [(t.side, t.slot) for t in tw]:
            problems.append(f"step{f.step} {name}: tensors {[(t.side, t.slot) for t in ts]}, the files' kernel has "
                            f"{[(t.side, t.slot) for t in tw]}")
            continue
        out += [(f, name, t, other.load(t2.info)) for t, t2 in zip(ts, tw)]
    return problems, out


def check_statistics(dump, files=None):
    """Max/Min (exact elements) and Mean/Norm (stat_close) of every tensor equal numpy's on its file (in `files`,
    tensor_data). Returns (problems, number of tensors checked)."""
    problems, found = tensor_data(dump, files)
    for f, name, t, data in found:
        want = expected_stats(data, t.info["dtype"])
        got = tuple(t.info.get(k) for k in STAT_KEYS)
        for k, g, w in zip(STAT_KEYS, got, want):
            ok = (g == w or (w != w and g != g)) if k in ("Max", "Min") else stat_close(g, w, t.info["dtype"])
            if not ok:
                problems.append(f"step{f.step} {name} {t.side}.{t.slot} ({t.info['dtype']} {t.info['shape']}): "
                                f"{k} {g!r}, numpy {w!r}")
    return problems, len(found)


def check_md5(dump, files=None):
    """MSPROBE_SUMMARY_MODE=md5: every tensor's "md5" is the CRC-32 (8 hex digits) of its data's bytes as its file
    holds them (in `files`, tensor_data; bf16 as float32, MindSpore's rule). Returns (problems, tensors checked)."""
    problems, found = tensor_data(dump, files)
    for f, name, t, data in found:
        want = f"{zlib.crc32(np.ascontiguousarray(data).tobytes()):08x}"
        if t.info.get("md5") != want:
            problems.append(f"step{f.step} {name} {t.side}.{t.slot} ({t.info['dtype']}): md5 {t.info.get('md5')!r}, "
                            f"CRC-32 of the data {want}")
    return problems, len(found)


def fail_report(problems, limit=15):
    return f"{len(problems)} problems:\n" + "\n".join(problems[:limit]) + ("\n..." if len(problems) > limit else "")
