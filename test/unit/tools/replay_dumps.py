"""Hand-written tensor dumps for the tests of replay's CPU references (test_replay_refs*.py): a dump.json in msprobe's
layout (task tensor, level L2) and one npy file per tensor, kernels given as Python values, and replay run on them with
its CSVs read back. Holds no tests and no reference: the expected outputs are the tests' own numpy formulas."""
import csv
import json
from pathlib import Path

import numpy as np

from inspect_support import inspect

NUMPY_DTYPE = {"Float64": np.float64, "Float32": np.float32, "BFloat16": np.float32, "Float16": np.float16,
               "Int64": np.int64, "Int32": np.int32, "UInt8": np.uint8, "Bool": np.bool_}


def bf16(x):
    """float64 -> the nearest bfloat16 (ties to even), as float64."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64).reshape(f.shape)


class T:
    """A tensor argument or output: its values and the dtype dump.json gives it (Float64 unless said)."""

    def __init__(self, values, dtype="Float64"):
        self.dtype = dtype
        self.values = np.asarray(values, dtype=NUMPY_DTYPE[dtype])


def value(v):
    """A non-tensor argument as the shim writes it: a scalar leaf, or a list of leaves for an int / bool array."""
    kind = {bool: "bool", int: "int", float: "float", str: "str"}
    if isinstance(v, (list, tuple)):
        return [value(x) for x in v]
    return {"type": kind[type(v)], "value": v}


class Dump:
    """One step's rank folders under `root`; kernels are added in launch order, then close() writes dump.json."""

    def __init__(self, root):
        self.root = Path(root)
        self.folders = {}
        self.expected = {}  # kernel name -> its expected outputs (arrays, None where nothing is judged)

    def _folder(self, rank):
        if rank not in self.folders:
            path = self.root / "step0" / f"rank{rank}"
            (path / "dump_tensor_data").mkdir(parents=True)
            self.folders[rank] = {"path": path, "data": {}}
        return self.folders[rank]

    def _tensor(self, folder, t, file_name):
        v = t.values
        f = v.astype(np.float64)
        entry = {"type": "mindspore.Tensor", "dtype": t.dtype, "shape": list(v.shape),
                 "Max": float(f.max()) if f.size else None, "Min": float(f.min()) if f.size else None,
                 "Mean": float(f.mean()) if f.size else None, "Norm": float(np.sqrt((f * f).sum())),
                 "data_name": file_name}
        np.save(folder["path"] / "dump_tensor_data" / file_name, v)
        return entry

    def _arg(self, folder, name, side, slot, a):
        if a is None:
            return None
        if isinstance(a, T):
            return self._tensor(folder, a, f"{name}.{side}.{slot}.npy")
        if isinstance(a, list) and a and all(isinstance(x, T) for x in a):
            return [self._tensor(folder, x, f"{name}.{side}.{slot}.{i}.npy") for i, x in enumerate(a)]
        return value(a)

    def kernel(self, op, case, inputs, outputs, rank=0, comm=None, name=None):
        """Adds kernel `{op}.{case}.0.forward` to rank `rank`'s folder; returns its name."""
        folder = self._folder(rank)
        name = name or f"{op}.{case}.0.forward"
        entry = {"input_args": [self._arg(folder, name, "input", i, a) for i, a in enumerate(inputs)],
                 "output": [self._arg(folder, name, "output", i, a) for i, a in enumerate(outputs)],
                 "launch": {"index": len(folder["data"]), "task_id": 0, "stream_id": 0, "timestamp": 0}}
        if comm is not None:
            entry["comm"] = comm
        folder["data"][name] = entry
        return name

    def close(self):
        for folder in self.folders.values():
            doc = {"task": "tensor", "level": "L2", "framework": "mindspore", "host_framework": "acl",
                   "dump_data_dir": str(folder["path"] / "dump_tensor_data"), "data": folder["data"]}
            (folder["path"] / "dump.json").write_text(json.dumps(doc))
        return self.root


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class Replay:
    """replay DIR: its exit status, stdout, result rows by (rank, kernel) and detail rows by (rank,
    kernel.output.slot). msprobe's MaxAbsErr shortcut stays on: an output that is exactly 0 by the definition comes out
    of a float64 computation as +-1e-17, whose relative error means nothing; expect_close's absolute bound is the
    stricter check."""

    def __init__(self, root, out, *extra):
        r = inspect("replay", root, "--out", out, *extra)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        self.returncode, self.stdout = r.returncode, r.stdout
        self.results = {(x["Rank"], x["API name"]): x for x in read_csv(next(Path(out).glob("accuracy_checking_result_*")))}
        self.details = {(x["Rank"], x["API Name"]): x for x in read_csv(next(Path(out).glob("accuracy_checking_details_*")))}

    def status(self, name, rank=0):
        return self.results[(f"rank{rank}", name)]["Forward Test Success"]

    def message(self, name, rank=0):
        return self.results[(f"rank{rank}", name)]["Message"]

    def output(self, name, slot, rank=0):
        return self.details[(f"rank{rank}", f"{name}.output.{slot}")]

    def max_abs_err(self, name, slot, rank=0):
        return float(self.output(name, slot, rank)["最大绝对误差"])

    def expect_close(self, name, slots, tol=1e-9, rank=0):
        """The kernel passes, and each listed output is within `tol` (absolute, relative to the output's scale) of the
        formula's value: both are float64 computations of one definition."""
        assert self.status(name, rank) == "pass", (name, self.message(name, rank))
        for slot in slots:
            row = self.output(name, slot, rank)
            assert row["Status"] == "pass", (name, slot, row["Message"])
            if row["DEVICE Dtype"] in ("Float64", "Float32", "BFloat16", "Float16"):
                assert self.max_abs_err(name, slot, rank) <= tol, (name, slot, row["最大绝对误差"])
            else:
                assert float(row["二进制一致错误率"]) == 0.0, (name, slot, row["Message"])
