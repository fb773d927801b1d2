#!/usr/bin/env python3
"""msprobe-inspect report on large dumps (issue 31): does a 100,000-kernel rank render in under 3 s in Chromium, and
does the file grow linearly?

For each size it writes a synthetic statistics dump of one rank (one step folder: dump.json with 3 tensors per kernel,
stack.json with 64 distinct stacks, one NaN and one Inf planted late), runs `msprobe-inspect report` on it, loads the
report in Debian's headless chromium (--dump-dom) and reads what the page wrote when it had drawn: performance.now()
at the end of its drawing, from the start of navigation (<footer id="status" data-render-ms>), so the figure covers
reading the HTML, parsing the data, building the chart with Chart.js's min-max decimation and drawing it. Rounds are
interleaved over the sizes; medians are printed as markdown.

    /usr/bin/python3 bench/bench_report.py [--quick] [--sizes 10000,50000,100000] [--rounds 3]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent
sys.path.insert(0, str(SRC / "test" / "python"))
from browser import Browser  # noqa: E402

BUILD = Path(os.environ.get("MSPROBE_BUILD_DIR", SRC / "build"))
INSPECT = BUILD / "bin" / "msprobe-inspect"
OPS = ["Matmul", "Add", "Gelu", "LayerNorm", "Softmax", "Mul", "Cast", "ReduceSum", "HcclAllReduce", "ApplyAdamWV2"]


def write_dump(folder, n):
    """A statistics folder of n kernels: names from 10 op types in 64 scopes, 2 inputs and 1 output each, a NaN output
    at 70% of the launch order and an Inf at 80%."""
    folder.mkdir(parents=True)
    scopes = [f"main_train_Model_forward_Layer{i}_forward" for i in range(64)]
    counters, lines, groups, names = {}, [], {}, []
    nan_at, inf_at = int(n * 0.7), int(n * 0.8)
    for i in range(n):
        op, scope = OPS[i % len(OPS)], scopes[(i // len(OPS)) % len(scopes)]
        base = f"{op}.{scope}"
        k = counters.get(base, 0)
        counters[base] = k + 1
        name = f"{base}.{k}.forward"
        v = 1.0 + (i % 997) * 0.01 * (1 + i / n)

        def t(x, out=False):
            mx = float("nan") if out and i == nan_at else float("inf") if out and i == inf_at else x
            return {"type": "mindspore.Tensor", "dtype": "Float32", "shape": [64, 64], "Max": mx, "Min": -x / 2,
                    "Mean": x / 8, "Norm": x * 40, "format": "ND"}
        entry = {"input_args": [t(v), t(v / 2)], "output": [t(v * 1.5, out=True)],
                 "launch": {"index": i, "task_id": i, "stream_id": 0, "timestamp": 1_700_000_000 + i}}
        lines.append(json.dumps(name) + ": " + json.dumps(entry))
        groups.setdefault(scope, []).append(name)
        names.append(name)
    (folder / "dump.json").write_text('{"task": "statistics", "level": "L2", "framework": "mindspore", '
                                      '"host_framework": "acl", "dump_data_dir": null, "data": {\n' +
                                      ",\n".join(lines) + "\n}}\n")
    stacks = {str(g): [names, [f"File train.py, line {100 + g}, in forward", f"File model.py, line {g}, in {scope}"]]
              for g, (scope, names) in enumerate(groups.items())}
    (folder / "stack.json").write_text(json.dumps(stacks))
    (folder / "construct.json").write_text(json.dumps({name: None for name in names}))


def load_once(browser, html):
    t0 = time.perf_counter()
    dom = browser.dump_dom(html, width=1400, height=1000, timeout=300)
    wall = time.perf_counter() - t0
    status = dom.by_id("status")
    errors = dom.by_id("errors").text()
    if status.attrs.get("data-state") != "done" or errors:
        raise SystemExit(f"the page did not draw: state {status.attrs.get('data-state')}, errors: {errors!r}")
    return float(status.attrs["data-render-ms"]), int(status.attrs["data-points"]), wall, status.attrs["data-phases"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,50000,100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round")
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    sizes = [int(s) for s in args.sizes.split(",")]
    browser = Browser.find()
    if browser is None:
        raise SystemExit(f"bench_report: {Browser.why_not}")
    version = subprocess.run([browser.exe, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        tmp = Path(tmp)
        made = {}
        for n in sizes:
            root = tmp / f"dump{n}"
            write_dump(root / "step0" / "rank0", n)
            html = tmp / f"report{n}.html"
            t0 = time.perf_counter()
            r = subprocess.run([str(INSPECT), "report", str(root), "-o", str(html)], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"msprobe-inspect report failed: {r.stderr}")
            made[n] = {"write": time.perf_counter() - t0, "size": html.stat().st_size, "html": html,
                       "dump": (root / "step0" / "rank0" / "dump.json").stat().st_size, "render": [], "wall": []}
        for _ in range(rounds):
            for n in sizes:
                ms, points, wall, phases = load_once(browser, made[n]["html"])
                made[n]["render"].append(ms)
                made[n]["wall"].append(wall)
                made[n]["points"] = points
                made[n]["phases"] = phases
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end; "
          f"{version}, headless, --window-size=1400,1000. {rounds} interleaved round(s), medians.\n")
    print("| kernels in the rank | dump.json | report | bytes per kernel | `msprobe-inspect report` | render (page's "
          "performance.now() when drawn) | chromium process, start to exit | points drawn |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        m = made[n]
        print(f"| {n:,} | {m['dump'] / 2**20:.1f} MiB | {m['size'] / 2**20:.1f} MiB | {m['size'] / n:.0f} | "
              f"{m['write']:.2f} s | {statistics.median(m['render']) / 1000:.2f} s "
              f"(min {min(m['render']) / 1000:.2f}, max {max(m['render']) / 1000:.2f}) | "
              f"{statistics.median(m['wall']):.2f} s | {m['points']:,} |")
    n = sizes[-1]
    print(f"\nThe page's phases for {n:,} kernels, last round (ms from the start of navigation): {made[n]['phases']}")


if __name__ == "__main__":
    main()
