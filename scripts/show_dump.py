#!/usr/bin/env python3
"""Prints a dump tree in brief: its step/rank folders, kernel counts per op type, tensor files, and the first
few entries of the first folder. Usage: show_dump.py DUMP_PATH

Only the step{N}/rank{R} folders are read: anything else in the dump root (a user's notes, the rank lock file
a SIGKILLed run leaves behind until `msprobe-inspect repair`) is not part of the dump (docs/lifecycle.md)."""
import collections
import json
import os
import re
import sys

STEP = re.compile(r"step(\d+)$")
RANK = re.compile(r"rank(\d*)$")
SHOWN_ENTRIES = 3


def folders(root):
    """(step folder name, rank folder name, path) of every dump folder, in step then rank order."""
    found = []
    for step in os.listdir(root):
        m = STEP.match(step)
        if not m or not os.path.isdir(os.path.join(root, step)):
            continue
        for rank in os.listdir(os.path.join(root, step)):
            r = RANK.match(rank)
            path = os.path.join(root, step, rank)
            if r and os.path.isdir(path):
                found.append((int(m.group(1)), int(r.group(1) or -1), step, rank, path))
    return [(step, rank, path) for _, _, step, rank, path in sorted(found)]


def number(v):
    return f"{v:.6g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def describe(arg):
    """One line for a slot of input_args/output: a tensor, a value leaf, a sequence of leaves, or null."""
    if isinstance(arg, list):
        return "[" + ", ".join(describe(a) for a in arg) + "]"
    if not isinstance(arg, dict):
        return str(arg)
    if "shape" in arg:
        stats = " ".join(f"{k}={number(arg[k])}" for k in ("Max", "Min", "Mean", "Norm", "md5") if k in arg)
        return f"{arg.get('dtype')} {arg['shape']} {stats} {arg.get('data_name', '')}".rstrip()
    return f"{arg.get('type')} = {arg.get('value')}"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: show_dump.py DUMP_PATH")
    root = sys.argv[1]
    if not os.path.isdir(root):
        sys.exit(f"show_dump.py: {root} is not a directory")
    found = folders(root)
    if not found:
        sys.exit(f"show_dump.py: no step{{N}}/rank{{R}} folders in {root}: nothing was dumped")
    for step, rank, path in found:
        with open(os.path.join(path, "dump.json")) as f:
            dump = json.load(f)
        data = dump["data"]
        tensor_dir = os.path.join(path, "dump_tensor_data")
        files = [n for n in os.listdir(tensor_dir) if n != "mapping.csv"] if os.path.isdir(tensor_dir) else []
        types = collections.Counter(name.split(".")[0] for name in data)
        print(f"{step}/{rank}: {len(data)} kernels, {len(files)} tensor files, task={dump['task']}")
        print("    " + ", ".join(f"{t} x{n}" for t, n in sorted(types.items())))
    step, rank, first = found[0]
    with open(os.path.join(first, "dump.json")) as f:
        data = json.load(f)["data"]
    print(f"\nfirst entries of {first}/dump.json:")
    shown = 0
    for name, entry in data.items():
        if name.startswith("InplaceZero"):
            continue
        print(f"  {name}:")
        for key in ("input_args", "output"):
            for arg in entry.get(key) or []:
                print(f"    {key:10} {describe(arg)}")
        shown += 1
        if shown == SHOWN_ENTRIES:
            break


if __name__ == "__main__":
    main()
