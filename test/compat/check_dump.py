#!/usr/bin/env python3
"""Checks a dump made in the compat stage's Debian 11 chroot (scripts/test_compat.sh), with that system's own
python3 (3.9) and numpy. Python 3.9 syntax only.

    check_dump.py dump DIR statistics|tensor [--python-frames]   the dump is complete and self-consistent
    check_dump.py same A.npz B.npz                                 losses and parameters bit-identical
Prints one line; exit status 1 on a failure.
"""
import json
import math
import os
import sys

import numpy as np


def fail(msg):
    print("check_dump: FAIL: " + msg)
    sys.exit(1)


def tensors(record):
    for key in ("input_args", "output"):
        for t in record.get(key) or []:
            if isinstance(t, dict) and "dtype" in t:
                yield t


def check_dump(root, task, python_frames):
    ranks = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "dump.json" in filenames:
            ranks.append(dirpath)
    if not ranks:
        fail("no dump.json under %s" % root)
    records = checked = frames = 0
    for rank in sorted(ranks):
        with open(os.path.join(rank, "dump.json")) as f:
            dump = json.load(f)
        if dump.get("task") != task:
            fail("%s: task %r, expected %r" % (rank, dump.get("task"), task))
        for name, record in dump["data"].items():
            records += 1
            for t in tensors(record):
                for stat in ("Max", "Min", "Mean", "Norm"):
                    if stat not in t:
                        fail("%s: %s has no %s" % (rank, name, stat))
                if task != "tensor":
                    continue
                path = os.path.join(rank, "dump_tensor_data", t["data_name"])
                if not os.path.exists(path):
                    fail("%s: missing %s" % (rank, t["data_name"]))
                a = np.load(path)
                if list(a.shape) != list(t["shape"]):
                    fail("%s: shape %s, dump.json says %s" % (path, a.shape, t["shape"]))
                if a.dtype.kind == "f" and a.size > 0 and all(isinstance(t[s], (int, float)) for s in ("Max", "Min")):
                    x = a.astype(np.float64)
                    if not (math.isclose(x.max(), t["Max"], rel_tol=1e-5, abs_tol=1e-6)
                            and math.isclose(x.min(), t["Min"], rel_tol=1e-5, abs_tol=1e-6)):
                        fail("%s: max/min %r/%r, dump.json says %r/%r" % (path, x.max(), x.min(), t["Max"], t["Min"]))
                    checked += 1
        stack_path = os.path.join(rank, "stack.json")
        if os.path.exists(stack_path):
            with open(stack_path) as f:
                for entry in json.load(f).values():
                    frames += sum(1 for s in entry[1] if isinstance(s, str) and s.startswith("File "))
    if records == 0:
        fail("dump.json holds no records")
    if task == "tensor" and checked == 0:
        fail("no tensor file checked against dump.json")
    if python_frames and frames == 0:
        fail("no Python frame in stack.json")
    print("check_dump: ok: %d records, %d npy files match dump.json, %d Python frames (python %d.%d, numpy %s)"
          % (records, checked, frames, sys.version_info[0], sys.version_info[1], np.__version__))


def check_same(a, b):
    x, y = np.load(a), np.load(b)
    if sorted(x.files) != sorted(y.files):
        fail("%s and %s hold different arrays" % (a, b))
    for k in x.files:
        if x[k].dtype != y[k].dtype or x[k].shape != y[k].shape or x[k].tobytes() != y[k].tobytes():
            fail("%s differs between %s and %s" % (k, a, b))
    print("check_dump: ok: losses %s and %d arrays bit-identical" % (list(x["losses"]), len(x.files)))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "dump":
        check_dump(sys.argv[2], sys.argv[3], "--python-frames" in sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "same":
        check_same(sys.argv[2], sys.argv[3])
    else:
        fail(__doc__)
