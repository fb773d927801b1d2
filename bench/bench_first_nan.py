#!/usr/bin/env python3
"""msprobe-inspect first-nan at scale: a synthetic statistics dump of N ranks x K kernels (bench/gen_multirank.py,
one planted origin that spreads through group and world all-reduces), then first-nan alone (P=1) and under
`mpirun -n 2` (P=2), alternated round by round. Prints wall time and peak RSS per configuration, checks that every
run gives the same answer and that it is the planted origin.

    python3 bench/bench_first_nan.py [--ranks 256] [--kernels 6000] [--rounds 3] [--scratch DIR] [--keep] [--quick]
                                     [--llm]

--llm: an LLM step's shape (gen_multirank.py --llm: MC2 and all-to-all kernels in every tensor-parallel group of 8;
issue 42's figure is `--llm --kernels 20000`, run outside CI: 2.7 GiB of dump.json).

The dump is big (0.81 GiB of dump.json for 256 x 6,000, about 1 GB with stack.json and construct.json): it goes to
--scratch (default: a folder in /tmp), never the repo, and is removed at the end unless --keep (a kept dump of the
same shape is reused). --quick: 64 ranks, one round. Each measured process is started by a small wrapper (this
script with --measure) that reports its peak RSS (getrusage of its child).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent
BUILD = Path(os.environ.get("MSPROBE_BUILD_DIR", SRC / "build"))
INSPECT = BUILD / "bin" / "msprobe-inspect"


def measured(argv, rss_file):
    """Runs argv, then writes its peak RSS (KiB), CPU seconds and exit status to rss_file, and exits 0: mpirun
    stops the job's other processes as soon as one exits nonzero (first-nan's 1, "found"), before they could write."""
    r = subprocess.run(argv)
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(rss_file).write_text(f"{u.ru_maxrss} {u.ru_utime + u.ru_stime} {r.returncode}")
    sys.exit(0)


def mpi_env():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,tcp",
               OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo", OMPI_MCA_pml="ob1")
    return env


def run_once(p, root, out_dir):
    """first-nan with P processes; (seconds, [(peak RSS MiB, CPU seconds) per process], JSON answer)."""
    rss = Path(out_dir) / f"rss-p{p}"
    # Each process writes rss-pP.<its rank> (the wrapper names its file by OMPI_COMM_WORLD_RANK).
    inner = [sys.executable, __file__, "--measure", str(rss) + ".{rank}", "--", str(INSPECT), "first-nan", str(root),
             "--json", "--no-replay"]
    if p == 1:
        argv, env = inner, dict(os.environ, MSPROBE_INSPECT_ALONE="1")
    else:
        argv, env = [shutil.which("mpirun"), "-n", str(p), "--oversubscribe", *inner], mpi_env()
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    files = sorted(Path(out_dir).glob(f"rss-p{p}.*"))
    rows = [f.read_text().split() for f in files]
    if r.returncode != 0 or len(rows) != p or any(row[2] not in ("0", "1") for row in rows):
        sys.exit(f"first-nan P={p} failed ({r.returncode}, {rows}):\n{r.stderr}")
    peaks = [(int(row[0]) / 1024, float(row[1])) for row in rows]
    for f in Path(out_dir).glob(f"rss-p{p}.*"):
        f.unlink()
    return wall, peaks, json.loads(r.stdout)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
        measured(sys.argv[4:], sys.argv[2].replace("{rank}", rank))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--kernels", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scratch", default=None, help="where the dump goes (default: a folder in /tmp)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quick", action="store_true", help="64 ranks, one round")
    ap.add_argument("--llm", action="store_true", help="MC2 and all-to-all kernels in every group (an LLM's step)")
    a = ap.parse_args()
    if a.quick:
        a.ranks, a.rounds = 64, 1
    if not INSPECT.exists():
        sys.exit(f"{INSPECT} is not built")
    mpi = shutil.which("mpirun") and (BUILD / "bin" / "msprobe-inspect-mpi").exists()
    shape = "-llm" if a.llm else ""
    scratch = Path(a.scratch or tempfile.gettempdir()) / f"msprobe-first-nan-{a.ranks}x{a.kernels}{shape}"
    origin = (a.ranks * 5 // 8, 0, a.kernels * 2 // 3 + 1)  # a compute kernel two thirds into the step
    if not (scratch / "done").exists():
        shutil.rmtree(scratch, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(HERE / "gen_multirank.py"), str(scratch / "dump"), "--ranks",
                        str(a.ranks), "--kernels", str(a.kernels), "--group", "8", "--every", "12",
                        "--world-every", "4", "--origin", "%d:%d:%d" % origin] + (["--llm"] if a.llm else []),
                       check=True)
        (scratch / "done").write_text("")
        print(f"generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    root = scratch / "dump"
    size = sum(f.stat().st_size for f in root.rglob("dump.json"))
    print(f"dump{' (LLM shape)' if a.llm else ''}: {a.ranks} ranks x {a.kernels} kernels = "
          f"{a.ranks * a.kernels:,} kernels, dump.json "
          f"{size / 2**30:.2f} GiB, planted origin rank {origin[0]} step {origin[1]} kernel {origin[2]}")
    configs = [1, 2] if mpi else [1]
    results = {p: [] for p in configs}
    answers = []
    with tempfile.TemporaryDirectory() as out:
        for rnd in range(a.rounds):
            for p in configs:
                wall, peaks, doc = run_once(p, root, out)
                results[p].append((wall, peaks))
                answers.append(doc)
                print(f"round {rnd} P={p}: {wall:.1f} s, per process: "
                      + ", ".join(f"{m:.0f} MiB peak RSS, {c:.1f} s CPU" for m, c in peaks), file=sys.stderr)
    first = answers[0]
    same = all(d == first for d in answers)
    found = (first["rank"], first["step"], first["launch_index"]) == origin
    print(f"answer: rank {first['rank']} step {first['step']} {first['kernel']} (launch_index "
          f"{first['launch_index']}), reached {len(first['reached'])} ranks; planted origin found: {found}; "
          f"identical in every run: {same}")
    print("| P | wall (median of %d) | min | CPU, all processes (median) | peak RSS per process (max over rounds) |"
          % a.rounds)
    print("|---|---|---|---|---|")
    for p in configs:
        walls = sorted(w for w, _ in results[p])
        cpus = sorted(sum(c for _, c in pk) for _, pk in results[p])
        peaks = [max(pk[i][0] for _, pk in results[p]) for i in range(len(results[p][0][1]))]
        print(f"| {p} | {walls[len(walls) // 2]:.1f} s | {walls[0]:.1f} s | {cpus[len(cpus) // 2]:.1f} s | "
              + ", ".join(f"{m:.0f} MiB" for m in peaks) + " |")
    if not mpi:
        print("(no mpirun or msprobe-inspect-mpi: P=2 not run)")
    if not a.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if same and found else 1


if __name__ == "__main__":
    sys.exit(main())
