#!/usr/bin/env python3
"""Prints a dump tree in brief: folders, kernel counts per op type, files, and a few entries."""
import collections
import json
import os
import sys


def main():
    root = sys.argv[1]
    for step in sorted(os.listdir(root), key=lambda s: (len(s), s)):
        for rank in sorted(os.listdir(os.path.join(root, step))):
            folder = os.path.join(root, step, rank)
            with open(os.path.join(folder, "dump.json")) as f:
                dump = json.load(f)
            data = dump["data"]
            files = os.listdir(os.path.join(folder, "dump_tensor_data")) if dump.get("dump_data_dir") else []
            types = collections.Counter(name.split(".")[0] for name in data)
            print(f"{step}/{rank}: {len(data)} kernels, {len(files)} tensor files, task={dump['task']}")
            print("    " + ", ".join(f"{t} x{n}" for t, n in sorted(types.items())))
    first = os.path.join(root, "step0", sorted(os.listdir(os.path.join(root, "step0")))[0])
    with open(os.path.join(first, "dump.json")) as f:
        data = json.load(f)["data"]
    print(f"\nfirst entries of {first}/dump.json:")
    shown = 0
    for name, entry in data.items():
        if name.startswith("InplaceZero"):
            continue
        print(f"  {name}:")
        for key in ("input_args", "output"):
            for arg in entry.get(key, []):
                if isinstance(arg, dict) and "shape" in arg:
                    print(f"    {key:10} {arg['dtype']:9} {str(arg['shape']):12} Max={arg['Max']:.6g} Min={arg['Min']:.6g}"
                          f" Mean={arg['Mean']:.6g} Norm={arg['Norm']:.6g} {arg.get('data_name', '')}")
                elif isinstance(arg, dict):
                    print(f"    {key:10} {arg.get('type')} = {arg.get('value')}")
        shown += 1
        if shown == 3:
            break


if __name__ == "__main__":
    main()
