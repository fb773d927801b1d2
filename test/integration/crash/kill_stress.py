"""SIGKILL at a random moment, then `msprobe-inspect repair`, then check the dump with independent readers.

Shared by test_shim_kill_stress.py (a handful of kills, in CI) and bench/kill_stress.py (many, by hand).
One kill: examples/train.py runs under the shim (tensor task, a random dtype, one or two ranks, a random stand-in
device delay) and its whole process group gets SIGKILL after a random delay drawn from a seeded generator. Then:
- `msprobe-inspect repair` exits 0 and a second repair finds nothing to do;
- every step{N}/rank{R} folder holds dump.json, construct.json, stack.json that Python's json loads, construct.json's
  keys are exactly dump.json's data keys in the same order, stack.json names no kernel dump.json lacks;
- the survivors of each rank are a prefix of its launch order (launch_index 0..n-1 across its steps; one rank: the
  stand-in's launch log);
- every data_name is a file numpy loads, with dump.json's shape and dtype, whose contents give dump.json's Max / Min /
  Mean / Norm; no file in dump_tensor_data/ is unnamed; mapping.csv (csv module) names only such files;
- `msprobe-inspect verify` passes.
"""
import collections
import csv
import json
import os
import random
import shutil
import signal
import subprocess
import time

import shimtest

INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")


def plan(rng, i):
    """The random choices of kill number i."""
    # The stand-in device's time per task: 0 lets train.py run ~250 steps a second (the writer lags most), so it
    # is killed sooner to keep the dump small; python itself takes ~0.3 s to start.
    task_delay_us = rng.choice([0, 300, 1000, 2000])
    return {
        # One kill in four at start-up (before the first kernel, or around it); the others a random time after the
        # first kernel's folder appeared, so that a slow start (ASan, a loaded machine) does not turn them into
        # kills of a process that had written nothing yet.
        "early": rng.random() < 0.25,
        "delay": round(rng.uniform(0.02, 1.0 if task_delay_us == 0 else 2.5), 3),
        "dtype": rng.choice(["fp32", "fp32", "fp16", "bf16"]),
        "ranks": rng.choice([1, 1, 1, 2]),
        "task_delay_us": task_delay_us,
        # Every third kill, the collector's test seam: a pause between a kernel's dump.json and construct.json
        # appends, so that the kill most likely lands between the two (the race of issue 17 item 3, a few µs wide
        # otherwise: 0 of 200 kills without the pause hit it).
        "journal_gap_us": 5000 if i % 3 == 1 else 0,
    }


def check_statistics(dump):
    """Max / Min of every tensor equal numpy's on its file; Mean / Norm within a few units of the statistics
    dtype's last place of numpy's float64 ones, Mean relative to the mean magnitude of the elements (a mean near
    0 is a cancellation whose last bits depend on the order of the sums). Returns (problems, tensors checked)."""
    import numpy as np
    import npu_refs
    problems, n = [], 0
    for f, name, e in dump.kernels():
        for t in shimtest.tensors(e):
            dtype = t.info["dtype"]
            a = f.load(t.info)
            want = shimtest.expected_stats(a, dtype)
            got = tuple(t.info.get(k) for k in shimtest.STAT_KEYS)
            n += 1
            for k, g, w in zip(shimtest.STAT_KEYS, got, want):
                if k in ("Max", "Min") or w is None or isinstance(w, bool) or a.ndim == 0:
                    ok = g == w or (w != w and g != g)
                elif w != w:
                    ok = g is not None and g != g
                else:
                    eps = npu_refs.EPS.get(dtype if dtype in ("Float32", "Float16", "BFloat16") else "Float32")
                    scale = abs(w) if k == "Norm" else max(abs(w), float(np.mean(np.abs(a.astype(np.float64)))))
                    ok = g is not None and abs(g - w) <= 4 * eps * scale
                if not ok:
                    problems.append(f"step{f.step} {name} {t.side}.{t.slot} ({dtype} {t.info['shape']}): "
                                    f"{k} {g!r} in dump.json, numpy {w!r}")
    return problems, n


def run_and_kill(work, p):
    """Runs train.py with plan `p` in `work`, kills its process group; returns the dump root."""
    os.makedirs(work)
    env = {"LD_PRELOAD": shimtest.SHIM, "MSPROBE_TASK": "tensor", "MSPROBE_DUMP_PATH": os.path.join(work, "dump"),
           "FAKE_CANN_TASK_DELAY_US": str(p["task_delay_us"]), "SHIM_TEST_JOURNAL_GAP_US": str(p["journal_gap_us"])}
    if p["ranks"] == 1:
        env["FAKE_CANN_LAUNCH_LOG"] = os.path.join(work, "launches.log")
    cmd = [shimtest.PYTHON, shimtest.TRAIN, "--steps", "100000", "--dtype", p["dtype"], "--ranks", str(p["ranks"])]
    with open(os.path.join(work, "out.txt"), "w") as out:
        proc = subprocess.Popen(cmd, env=shimtest.clean_env(env), cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            if p.get("early"):
                time.sleep(min(p["delay"], 0.3))
            else:
                wait_for_first_kernel(os.path.join(work, "dump"), proc)
                time.sleep(p["delay"])
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its rank processes at once
            proc.wait()
            wait_until_exited(proc.pid)
    return os.path.join(work, "dump")


def wait_for_first_kernel(dump, proc, timeout=120):
    """Until the run's first step folder exists (its first kernel is being written) or the process ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.isdir(dump) and any(n.startswith("step") for n in os.listdir(dump)):
            return
        time.sleep(0.01)


def task_state(pid, tid):
    """(state letter, process group) of thread `tid` of process `pid`, from /proc."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        state, _ppid, pgrp = f.read().rsplit(")", 1)[1].split()[:3]
    return state, int(pgrp)


def wait_until_exited(pgid, timeout=60):
    """Waits until no process of group `pgid` is still exiting. Only the launcher is our child: its rank processes
    die on their own time, and a dying process lets go of its files (its rank lock among them) only as it exits,
    so a repair started earlier rightly finds the rank still being written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exiting = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if task_state(pid, pid)[1] != pgid:
                    continue
                # The files go with the last thread: the leader can be a zombie while the others still exit.
                tasks = [task_state(pid, t)[0] for t in os.listdir(f"/proc/{pid}/task")]
            except (OSError, ValueError, IndexError):
                continue
            if any(state not in ("Z", "X") for state in tasks):
                exiting = True
                break
        if not exiting:
            return
        time.sleep(0.01)
    raise AssertionError(f"processes of group {pgid} still exiting {timeout} s after SIGKILL")


def inspect(*args):
    return subprocess.run([INSPECT, *args], capture_output=True, text=True, timeout=300)


def rank_folders(root):
    """(step, rank folder name, path) of every step{N}/<anything> folder under root."""
    out = []
    if not os.path.isdir(root):
        return out
    for s in os.listdir(root):
        m = shimtest.STEP_DIR.match(s)
        if not m:
            continue
        for r in os.listdir(os.path.join(root, s)):
            out.append((int(m.group(1)), r, os.path.join(root, s, r)))
    return sorted(out)


def holders(paths):
    """[(pid, command line)] of the processes with one of `paths` open, from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in paths for fd in fds):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    found.append((int(pid), f.read().replace(b"\0", b" ").decode(errors="replace")[:200]))
        except OSError:
            continue
    return found


def check(root, p, work):
    """Repairs the dump at `root` and checks it. Returns (problems, figures)."""
    problems, fig = [], collections.Counter()
    had_dump = any(os.path.isfile(os.path.join(path, "dump.json")) for _, _, path in rank_folders(root))
    rep = inspect("repair", root)
    fig["repair_lines"] += rep.stdout.count("\n")
    for key, needle in (("construct_rebuilt", "/construct.json: rebuilt"), ("dump_repaired", "/dump.json: repaired"),
                        ("stack_filtered", "/stack.json: dropped"), ("stack_missing", "/stack.json: missing"),
                        ("files_removed", "never reached dump.json moved to"), ("folders_removed", "begun as it was killed"),
                        ("construct_behind", "it lacked 1 kernel of dump.json")):
        fig[key] += rep.stdout.count(needle)
    # The killed run's rank lock is gone: the root holds only step folders (or nothing).
    others = [n for n in shimtest.root_entries(root) if not n.startswith("step")] if os.path.isdir(root) else []
    if others:
        # Who still has them open (a rank lock is left only while some process holds it): for the next diagnosis.
        problems.append(f"left in the dump root after repair: {others}; repair said: {rep.stdout[-600:]!r}; "
                        f"open in: {holders([os.path.join(root, n) for n in others])}")
    if not had_dump:
        # Killed before the first kernel was written: nothing, or folders begun with nothing in them.
        fig["no_dump"] += 1
        if rep.returncode not in (0, 2):
            problems.append(f"repair of a dump with no kernel: exit {rep.returncode}: {rep.stdout}{rep.stderr}")
        leftovers = [path for _, _, path in rank_folders(root)]
        if leftovers:
            problems.append(f"folders left after repair: {leftovers}")
        return problems, fig
    if rep.returncode != 0:
        return [f"repair exit {rep.returncode}: {rep.stdout[-2000:]}{rep.stderr}"], fig
    again = inspect("repair", root)
    if again.returncode != 0 or " 0 repaired, 0 cannot" not in again.stdout or "removed" in again.stdout:
        problems.append(f"a second repair did something: {again.stdout[-1000:]}")

    by_rank = collections.defaultdict(list)  # rank folder name -> (launch_index, kernel name)
    for step, rank, path in rank_folders(root):
        if not shimtest.RANK_DIR.match(rank):
            problems.append(f"{path}: not a rank folder")
            continue
        try:
            files = {}
            for name in ("dump.json", "construct.json", "stack.json"):
                with open(os.path.join(path, name)) as f:
                    files[name] = json.load(f)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        data = files["dump.json"]["data"]
        fig["folders"] += 1
        fig["kernels"] += len(data)
        if list(files["construct.json"]) != list(data):
            problems.append(f"step{step}/{rank}: construct.json keys {list(files['construct.json'])[-3:]} != "
                            f"dump.json data keys {list(data)[-3:]} (last three)")
        for key, (names, _frames) in files["stack.json"].items():
            if not set(names) <= set(data):
                problems.append(f"step{step}/{rank}: stack.json group {key} names {sorted(set(names) - set(data))}, "
                                "which dump.json lacks")
        by_rank[rank] += [(e["launch"]["index"], name) for name, e in data.items()]
        tdir = os.path.join(path, "dump_tensor_data")
        named = {t.info["data_name"] for e in data.values() for t in shimtest.tensors(e) if "data_name" in t.info}
        mapping = os.path.join(tdir, "mapping.csv")
        if os.path.exists(mapping):
            with open(mapping, newline="") as f:
                for row in csv.reader(f):
                    if len(row) != 2 or row[0] not in named or not os.path.isfile(os.path.join(tdir, row[0])):
                        problems.append(f"step{step}/{rank}: mapping.csv row {row} names no file of dump.json")
    for rank, rows in by_rank.items():
        rows.sort()
        if [i for i, _ in rows] != list(range(len(rows))):
            problems.append(f"{rank}: launch_index of the survivors is not 0..{len(rows) - 1}: "
                            f"{[i for i, _ in rows][:5]}...")
    if p["ranks"] == 1 and by_rank:
        with open(os.path.join(work, "launches.log")) as f:
            order = [line.strip() for line in f if line.strip()]
        ops = [shimtest.op_type(n) for _, n in sorted(next(iter(by_rank.values())))]
        if ops != order[:len(ops)]:
            problems.append(f"the survivors are not a prefix of the launch log ({len(ops)} kernels, "
                            f"{len(order)} launched)")
    dump = shimtest.Dump(root)
    file_problems, _ = shimtest.check_files(dump)
    stat_problems, fig["tensors"] = check_statistics(dump)
    problems += file_problems + stat_problems
    ver = inspect("verify", root)
    if ver.returncode != 0:
        problems.append(f"verify after repair: exit {ver.returncode}: {ver.stdout[-2000:]}{ver.stderr}")
    return problems, fig


def run_kills(n, seed, base, keep_failed=True, log=None):
    """n kills with the generator seeded by `seed`, under folder `base`. Returns (failures, figures), each
    failure a text naming the seed, the kill's number and its plan."""
    rng = random.Random(seed)
    failures, total = [], collections.Counter()
    for i in range(n):
        p = plan(rng, i)
        work = os.path.join(base, f"kill{i}")
        t0 = time.monotonic()
        root = run_and_kill(work, p)
        problems, fig = check(root, p, work)
        total += fig
        total["kills"] += 1
        if log:
            log(f"kill {i}: {p} -> {dict(fig)} in {time.monotonic() - t0:.1f}s" + (" FAILED" if problems else ""))
        if problems:
            failures.append(f"seed {seed}, kill {i} (of {n}), plan {p}, kept in {work}:\n" +
                            shimtest.fail_report(problems))
        if not problems or not keep_failed:
            shutil.rmtree(work, ignore_errors=True)
    return failures, total
