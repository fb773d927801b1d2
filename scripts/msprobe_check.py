#!/usr/bin/env python3
"""Runs examples/llm_train.py twice under the shim per configuration and task, then msprobe's own compare and graph
tools on each pair (per step and rank), and prints what they matched (scripts/msprobe_check.sh says how to run it).

Every number printed is read back from msprobe's own result files (its csv/xlsx and its graph's sqlite database) and
held against the kernels of our dump.json. Run by hand, never in CI: msprobe is not ours to ship or copy.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from dataclasses import dataclass

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> llm_train.py arguments; the same arguments for both runs of a pair
CONFIGS = {
    "1rank": ["--steps", "2"],
    "2rank-moe": ["--steps", "2", "--ranks", "2", "--moe"],
    "2rank-moe-seq": ["--steps", "2", "--ranks", "2", "--moe", "--tp-mode", "sequence"],
}
# mode -> the shim's environment
MODES = {
    "tensor": {"MSPROBE_TASK": "tensor"},
    "statistics": {"MSPROBE_TASK": "statistics"},
    "md5": {"MSPROBE_TASK": "statistics", "MSPROBE_SUMMARY_MODE": "md5"},
}
# What msprobe's compare and graph tools import (module -> Debian package); mindspore is stubbed (STUB below).
NEEDS = {"numpy": "python3-numpy", "pandas": "python3-pandas", "openpyxl": "python3-openpyxl",
         "yaml": "python3-yaml", "tqdm": "python3-tqdm", "matplotlib": "python3-matplotlib",
         "psutil": "python3-psutil", "packaging": "python3-packaging"}
MISSING = 2  # exit status when something this needs is not there

# An import-only stand-in for mindspore: msprobe's mindspore compare imports it and uses none of it on npy dumps.
STUB = '''"""Import-only stand-in for mindspore (written by msprobe_check.py): every name exists and does nothing."""
import importlib.abc
import importlib.machinery
import sys
import types


class _Any(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __call__(cls, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _make("instance")  # a decorator, or a value

    def __iter__(cls):
        return iter(())

    def __or__(cls, other):
        return cls

    __ror__ = __or__


def _make(name):
    return _Any(str(name), (object,), {})


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("mindspore."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Module(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__version__ = "2.7.0"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _make(name)
'''
RUNNER = '''"""msprobe's CLI (msprobe.msprobe) as its console script runs it (written by msprobe_check.py)."""
import concurrent.futures  # noqa: F401  msprobe 8.3.3 names concurrent.futures without importing it
import runpy
import sys

sys.argv[0] = "msprobe"
runpy.run_module("msprobe.msprobe", run_name="__main__", alter_sys=True)
'''


@dataclass
class Tool:
    """One fetched msprobe tree: the directory that holds its `msprobe` package, and which CLI it has."""
    label: str
    pythonpath: str
    cli2026: bool  # msprobe compare -tp/-gp (mindstudio-probe 26.x) or msprobe -f mindspore compare -i (mstt era)
    version: str = "?"
    commit: str = "?"


# ------------------------------------------------------------------------------------------------------ msprobe trees

def find_package(tree):
    for sub in ("python", os.path.join("debug", "accuracy_tools"), "."):
        if os.path.isfile(os.path.join(tree, sub, "msprobe", "msprobe.py")):
            return os.path.abspath(os.path.join(tree, sub))
    return None


def tree_version(tree, pkg):
    for path, pattern in ((os.path.join(tree, "pyproject.toml"), r'^version\s*=\s*"([^"]+)"'),
                          (os.path.join(pkg, "setup.py"), r"^__version__\s*=\s*'([^']+)'")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                m = re.search(pattern, f.read(), re.M)
            if m:
                return m.group(1)
    return "?"


def checkout(tree, out):
    """A bare git directory (what the fetch tool brings) is exported at its HEAD under out/src; (tree, commit)."""
    if not os.path.isdir(tree):
        sys.exit(f"msprobe_check: {tree}: no such directory (give a fetched msprobe tree)")
    git = ["git", "-C", tree]
    bare = subprocess.run([*git, "rev-parse", "--is-bare-repository"], capture_output=True, text=True)
    if bare.returncode != 0:
        return tree, "?"  # a plain copy without its history
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    if bare.stdout.strip() != "true":
        return tree, commit
    dest = os.path.join(out, "src", commit[:12])
    if not os.path.isdir(dest):
        archive = subprocess.run([*git, "archive", "--format=tar", "HEAD"], capture_output=True, check=True).stdout
        os.makedirs(dest)
        tar_path = dest + ".tar"
        with open(tar_path, "wb") as f:
            f.write(archive)
        with tarfile.open(tar_path) as t:
            t.extractall(dest)
        os.remove(tar_path)
    return dest, commit


def make_tool(tree, out):
    tree, commit = checkout(tree, out)
    pkg = find_package(tree)
    if pkg is None:
        sys.exit(f"msprobe_check: {tree}: no msprobe package (msprobe/msprobe.py under python/, "
                 "debug/accuracy_tools/ or the tree itself); give the root of a fetched msprobe or mstt tree")
    with open(os.path.join(pkg, "msprobe", "msprobe.py"), encoding="utf-8") as f:
        cli2026 = "--framework" not in f.read()
    version = tree_version(tree, pkg)
    return Tool(label=f"msprobe {version}", pythonpath=pkg, cli2026=cli2026, version=version, commit=commit)


def write_stubs(out):
    stubs = os.path.join(out, "stubs")
    os.makedirs(os.path.join(stubs, "mindspore"), exist_ok=True)
    for path, text in ((os.path.join(stubs, "mindspore", "__init__.py"), STUB),
                       (os.path.join(stubs, "run_msprobe.py"), RUNNER)):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return stubs


def check_dependencies(args, tools):
    """msprobe's Python modules, then each tree's CLI starting; exits MISSING saying what to install."""
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    r = subprocess.run([args.python, "-c", probe, *NEEDS], capture_output=True, text=True)
    missing = r.stdout.split()
    if r.returncode != 0:
        print(f"msprobe_check: {args.python} does not run: {r.stderr}", file=sys.stderr)
        sys.exit(MISSING)
    if missing:
        print(f"msprobe_check: msprobe's Python dependencies are missing in {args.python}: {', '.join(missing)} "
              f"(apt-get install {' '.join(NEEDS[m] for m in missing)})", file=sys.stderr)
        sys.exit(MISSING)
    for tool in tools:
        rc, log = msprobe_cmd(args, tool, ["-h"], os.path.join(args.out, "help", tool.label.replace(" ", "_")), "help")
        if rc != 0:
            with open(log, encoding="utf-8") as f:
                sys.stderr.write(f.read()[-2000:])
            print(f"msprobe_check: {tool.label} ({tool.pythonpath}) does not start: see {log}", file=sys.stderr)
            sys.exit(MISSING)


# --------------------------------------------------------------------------------------------------------------- runs

def run_dumps(args, config, mode):
    """Two runs of llm_train.py (a, b) plus, with --plant, a third (p) with the planted difference: {run: root}."""
    roots = {}
    env_base = dict(os.environ, ASCEND_HOME_PATH=os.path.join(args.build, "fake_cann"),
                    LD_PRELOAD=os.path.join(args.build, "lib", "libmsprobe_shim.so"),
                    HCCL_CONNECT_TIMEOUT="60", HCCL_EXEC_TIMEOUT="60")
    env_base.pop("FAKE_CANN_PERTURB_OP", None)
    for run in ["a", "b"] + (["p"] if args.plant else []):
        root = os.path.join(args.out, "dumps", f"{config}.{mode}.{run}")
        shutil.rmtree(root, ignore_errors=True)
        env = dict(env_base, MSPROBE_DUMP_PATH=root, **MODES[mode])
        if run == "p":
            env["FAKE_CANN_PERTURB_OP"] = args.plant
        cmd = [args.python, os.path.join(SOURCE, "examples", "llm_train.py"), *CONFIGS[config]]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            sys.exit(f"msprobe_check: {' '.join(cmd)} ({config}, {mode}, run {run}) failed:\n{r.stdout}{r.stderr}")
        roots[run] = root
    return roots


def rank_folders(root):
    """{(step, rank folder name): path} of every folder holding a dump.json."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root, "step*", "rank*", "dump.json"))):
        folder = os.path.dirname(path)
        found[(os.path.basename(os.path.dirname(folder)), os.path.basename(folder))] = folder
    return found


# ---------------------------------------------------------------------------------------------------- msprobe compare

def msprobe_cmd(args, tool, argv, outdir, tag):
    """Runs msprobe's CLI from its tree, with the stub on the path; (exit status, log path)."""
    os.makedirs(outdir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tool.pythonpath, args.stubs]))
    env.pop("LD_PRELOAD", None)
    log = os.path.join(outdir, f"{tag}.log")
    with open(log, "w", encoding="utf-8") as f:
        r = subprocess.run([args.python, os.path.join(args.stubs, "run_msprobe.py"), *argv], env=env, stdout=f,
                           stderr=subprocess.STDOUT, timeout=1800, cwd=outdir)
    return r.returncode, log


def run_compare(args, tool, npu, bench, outdir):
    npu_json, bench_json = os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json")
    if tool.cli2026:
        argv = ["compare", "-tp", npu_json, "-gp", bench_json, "-o", outdir]
    else:
        spec = os.path.join(outdir, "compare.json")
        os.makedirs(outdir, exist_ok=True)
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"npu_path": npu_json, "bench_path": bench_json, "stack_path": os.path.join(npu, "stack.json"),
                       "is_print_compare_log": False}, f)
        argv = ["-f", "mindspore", "compare", "-i", spec, "-o", outdir, "-s"]
    rc, log = msprobe_cmd(args, tool, argv, outdir, "compare")
    files = sorted(glob.glob(os.path.join(outdir, "compare_result*.xlsx")) +
                   glob.glob(os.path.join(outdir, "compare_result*.csv")))
    return rc, log, (files[-1] if files else None)


def read_table(path):
    import pandas as pd
    if path.endswith(".csv"):
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    return pd.read_excel(path, dtype=str, keep_default_na=False)


def kernel_of(row_name):
    """A result row's kernel: its name up to the direction token."""
    m = re.match(r"(.*?\.(?:forward|backward))(?:\.|$)", row_name)
    return m.group(1) if m else row_name


def verdict_column(df):
    for col in ("Result", "Accuracy Reached or Not"):
        if col in df.columns:
            return col
    return None


# Verdicts: 2026 says pass / warning / error; 8.3.3 Yes / No in tensor mode (None: a row it does not judge, a scalar
# argument, an absent tensor, a 0-d or one-element tensor, as on its own dumps), "" / Warning in statistics mode and
# pass / Different in md5 mode.
GOOD = {"pass", "Yes", ""}
UNJUDGED = {"None", "N/A"}


def count_compare(path, dump):
    """Rows, matched, unmatched, passed, not judged, flagged (name, verdict, message, launch index), and the kernels
    of dump.json seen in the rows."""
    df = read_table(path)
    names = df["NPU Name"].tolist()
    unmatched = int(df["Bench Name"].isin(["N/A", ""]).sum())
    col = verdict_column(df)
    verdicts = df[col].tolist() if col else [""] * len(df)
    messages = df["Err_message"].tolist() if "Err_message" in df.columns else [""] * len(df)
    flagged = [(n, v, m, dump.get(kernel_of(n), {}).get("launch", {}).get("index", -1))
               for n, v, m in zip(names, verdicts, messages) if v not in GOOD | UNJUDGED]
    seen = {kernel_of(n) for n in names}
    return {"rows": len(df), "matched": len(df) - unmatched, "unmatched": unmatched,
            "pass": sum(v in GOOD for v in verdicts), "unjudged": sum(v in UNJUDGED for v in verdicts),
            "flagged": sorted(flagged, key=lambda x: x[3]),
            "kernels": len(seen & set(dump)), "dump_kernels": len(dump), "missing": sorted(set(dump) - seen)}


# ------------------------------------------------------------------------------------------------------ msprobe graph

def run_graph(args, tool, npu, bench, outdir):
    """The graph tool's compare of two folders, or with bench None its build of one."""
    if tool.cli2026:
        argv = ["graph_visualize", "-tp", npu, "-o", outdir] + (["-gp", bench] if bench else [])
    else:
        spec = os.path.join(outdir, "graph.json")
        os.makedirs(outdir, exist_ok=True)
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"npu_path": npu, **({"bench_path": bench} if bench else {}), "is_print_compare_log": False}, f)
        argv = ["-f", "mindspore", "graph", "-i", spec, "-o", outdir]
    rc, log = msprobe_cmd(args, tool, argv, outdir, "graph")
    dbs = sorted(glob.glob(os.path.join(outdir, "*.vis.db")) + glob.glob(os.path.join(outdir, "*.vis")))
    return rc, log, (dbs[-1] if dbs else None)


def node_flagged(io_json):
    """Whether the graph put a failing verdict on one of the node's inputs or outputs. Its precision_index is not
    used: 8.3.3 gives it a meaning per mode (md5: 1 passed; tensor: a change of ratios) and 2026 leaves it 0."""
    for text in io_json:
        for item in (json.loads(text) if text else {}).values():
            if isinstance(item, dict) and any(str(item.get(k, "")) not in GOOD | UNJUDGED
                                              for k in ("Result", "Accuracy Reached or Not")):
                return True
    return False


def count_graph(path, dump):
    """The graph's NPU nodes that are our kernels: how many, matched to a bench node, flagged."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT node_name, matched_node_link, input_data, output_data FROM tb_nodes "
                          "WHERE data_source = 'NPU'").fetchall()
    finally:
        db.close()
    nodes = {name: (link, node_flagged((i, o))) for name, link, i, o in rows if name in dump}
    matched = sum(bool(link) and link != "[]" for link, _ in nodes.values())
    bad = sorted((name for name, (_, flagged) in nodes.items() if flagged),
                 key=lambda n: dump[n].get("launch", {}).get("index", -1))
    return {"nodes": len(nodes), "matched": matched, "missing": sorted(set(dump) - set(nodes)), "flagged": bad}


# ------------------------------------------------------------------------------------------------------------- report

def read_dump(folder):
    with open(os.path.join(folder, "dump.json"), encoding="utf-8") as f:
        return json.load(f)["data"]


def check_pair(args, tool, config, mode, run_a, run_b, build):
    """Compare and graph of every step and rank folder of two runs (with `build`, the graph of run_a's alone too):
    [(folder key, compare counts, graph counts)]."""
    lines, problems = [], []
    fa, fb = rank_folders(run_a), rank_folders(run_b)
    if set(fa) != set(fb):
        problems.append(f"{config} {mode}: the runs' folders differ: {sorted(set(fa) ^ set(fb))}")
    for key in sorted(set(fa) & set(fb)):
        where = f"{tool.label} {config} {mode} {os.path.basename(run_b)} {'/'.join(key)}"
        dump = read_dump(fa[key])
        if set(dump) != set(read_dump(fb[key])):
            problems.append(f"{where}: the two runs' kernel names differ")
        tag = os.path.join(args.out, tool.label.replace(" ", "_"), f"{config}.{mode}.{os.path.basename(run_b)}", *key)
        rc, log, result = run_compare(args, tool, fa[key], fb[key], os.path.join(tag, "compare"))
        if rc != 0 or result is None:
            problems.append(f"{where}: compare exit {rc}, no result ({log})")
            lines.append((key, None, None))
            continue
        c = count_compare(result, dump)
        rc, log, db = run_graph(args, tool, fa[key], fb[key], os.path.join(tag, "graph"))
        g = count_graph(db, dump) if rc == 0 and db is not None else None
        if g is None:
            problems.append(f"{where}: graph exit {rc}, no database ({log})")
        elif build:
            rc, log, db = run_graph(args, tool, fa[key], None, os.path.join(tag, "graph_build"))
            g["built"] = count_graph(db, dump)["nodes"] if rc == 0 and db is not None else None
            if g["built"] is None:
                problems.append(f"{where}: graph build exit {rc}, no database ({log})")
        lines.append((key, c, g))
    return lines, problems


def fmt_line(key, c, g):
    if c is None:
        return f"  {'/'.join(key):<12} compare FAILED"
    s = (f"  {'/'.join(key):<12} kernels {c['kernels']}/{c['dump_kernels']}  rows {c['rows']}  matched {c['matched']}"
         f"  unmatched {c['unmatched']}  pass {c['pass']}  not judged {c['unjudged']}  flagged {len(c['flagged'])}")
    if g is not None:
        s += f"  | graph nodes {g['nodes']}/{c['dump_kernels']} matched {g['matched']} flagged {len(g['flagged'])}"
        if "built" in g:
            s += f", built alone {g['built']}"
    return s


def identical_problem(where, c, g):
    """Why a compare of two identical runs is not a 100% match, or None."""
    if c["unmatched"] or c["flagged"] or c["missing"]:
        return f"{where}: missing {c['missing'][:3]} unmatched {c['unmatched']} flagged {c['flagged'][:3]}"
    if g is not None and (g["missing"] or g["matched"] != g["nodes"] or g["flagged"]
                          or g.get("built") != c["dump_kernels"]):
        return (f"{where}: graph missing {g['missing'][:3]} matched {g['matched']}/{g['nodes']} "
                f"flagged {g['flagged'][:3]} built alone {g.get('built')}")
    return None


def report_planted(c, g):
    """The flagged rows of a planted run, first in launch order."""
    kernels = []
    for _n, _v, _m, _i in c["flagged"]:
        if kernel_of(_n) not in kernels:
            kernels.append(kernel_of(_n))
    print(f"      compare flagged {len(c['flagged'])} rows of {len(kernels)} kernels; first: "
          + ("; ".join(f"{n} [{v}]" for n, v, _m, _i in c["flagged"][:2]) or "none"))
    if g is not None:
        print(f"      graph flagged {len(g['flagged'])} nodes; first: {', '.join(g['flagged'][:2]) or 'none'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", help="fetched msprobe trees (bare git directories or checked-out trees)")
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--out", default="/tmp/msprobe_check", help="scratch directory (dumps, msprobe's results)")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python with msprobe's dependencies")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    ap.add_argument("--plant", default="", help="FAKE_CANN_PERTURB_OP of a third run, compared with the first")
    args = ap.parse_args()
    for name, known in (("configs", CONFIGS), ("modes", MODES)):
        if unknown := set(getattr(args, name).split(",")) - set(known):
            ap.error(f"--{name}: unknown {', '.join(sorted(unknown))}")
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)
    args.stubs = write_stubs(args.out)
    tools = [make_tool(t, args.out) for t in args.trees]
    check_dependencies(args, tools)
    for tool in tools:
        print(f"{tool.label}: {tool.pythonpath} (commit {tool.commit})")
    problems, total = [], 0
    for config in args.configs.split(","):
        for mode in args.modes.split(","):
            roots = run_dumps(args, config, mode)
            for tool in tools:
                for other in ["b"] + (["p"] if args.plant else []):
                    what = "identical runs" if other == "b" else f"planted FAKE_CANN_PERTURB_OP={args.plant}"
                    print(f"{tool.label} | {config} | {mode} | {what}", flush=True)
                    lines, p = check_pair(args, tool, config, mode, roots["a"], roots[other], other == "b")
                    problems += p
                    for key, c, g in lines:
                        print(fmt_line(key, c, g), flush=True)
                        if c is None:
                            continue
                        total += 1
                        if other == "p":
                            report_planted(c, g)
                        elif (q := identical_problem(f"{tool.label} {config} {mode} {'/'.join(key)}", c, g)):
                            problems.append(q)
    print()
    if problems:
        print(f"msprobe_check: {len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"msprobe_check: every compare and graph of identical runs matched 100% ({total} folder compares)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
