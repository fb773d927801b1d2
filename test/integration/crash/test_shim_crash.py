"""Nothing captured is lost when the process ends, however it ends (issue 6 point 4, docs/lifecycle.md).

A plain ACL host (crash/crash_host.cpp) launches N aclnn kernels and then ends by exit(), return from main,
_exit, _Exit, SIGTERM, SIGINT, SIGHUP, abort(), a SIGSEGV or a SIGBUS, or a host SIGTERM handler installed
before or after the shim; a Python host (crash/py_host.py) by os._exit, an uncaught or a caught
KeyboardInterrupt, faulthandler on a SIGSEGV, a Python SIGTERM handler. For each:
- the exit status (or killing signal), stdout and the host's own stderr lines are those of the same run without
  the shim;
- dump.json, construct.json and stack.json load with json (no repair), and dump.json holds one entry per kernel
  the stand-in launched (its launch log), in launch order;
- tensor task: every input and output file loads with numpy and equals the host's inputs and numpy's
  product/sum of them (C host) or numpy's recomputation (Python host).
A SIGKILL mid-run of train.py leaves journals that `msprobe-inspect repair` turns into valid files holding a
prefix of the launch order, every referenced tensor file loading.
"""
import collections
import glob
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import shimtest
from shimtest import fail_report, op_type, tensors

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH_HOST = os.path.join(shimtest.BUILD, "tests", "crash_host")
PY_HOST = os.path.join(HERE, "py_host.py")
INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")
N = 24


def run(cmd, workdir, shim, env=None, timeout=120):
    """shimtest.run with core dumps off (the default action of SIGABRT/SIGSEGV/SIGBUS is kept, the file is not)."""
    import resource

    workdir = str(workdir)
    os.makedirs(workdir, exist_ok=True)
    log = os.path.join(workdir, "launches.log")
    if os.path.exists(log):
        os.unlink(log)
    e = {"FAKE_CANN_LAUNCH_LOG": log, "MSPROBE_TASK": "tensor"}
    if shim:
        e["LD_PRELOAD"] = shimtest.SHIM
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, "dump")
    e.update(env or {})
    p = subprocess.run([str(c) for c in cmd], env=shimtest.clean_env(e), cwd=workdir, capture_output=True, text=True,
                       timeout=timeout, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    r = shimtest.Run(list(cmd), p.returncode, p.stdout, p.stderr, workdir, launch_log=log)
    if shim:
        r.dump = shimtest.Dump(e["MSPROBE_DUMP_PATH"])
    return r


def launch_order(r):
    with open(r.launch_log) as f:
        return [line.strip() for line in f if line.strip()]


def load_json_files(folder):
    """The three files of a folder, each loaded with json as msprobe would (no repair)."""
    out = {}
    for name in ("dump.json", "construct.json", "stack.json"):
        with open(os.path.join(folder.path, name)) as f:
            out[name] = json.load(f)
    return out


def folder_rows(folders, problems):
    """(launch_index, op type) of every dump.json entry in `folders`; appends to `problems` each folder whose
    files do not load or disagree (construct.json's kernels, stack.json's kernels)."""
    rows = []
    for f in folders:
        try:
            files = load_json_files(f)
        except (OSError, ValueError) as exc:
            problems.append(f"{f.path}: {exc}")
            continue
        data = files["dump.json"]["data"]
        if set(files["construct.json"]) != set(data):
            problems.append(f"{f.path}: construct.json and dump.json name different kernels")
        for key, (names, frames) in files["stack.json"].items():
            if not set(names) <= set(data):
                problems.append(f"{f.path}: stack.json group {key} names kernels dump.json lacks")
        rows += [(e["launch"]["index"], op_type(name)) for name, e in data.items()]
    return rows


def check_complete(r):
    """Problems with r's dump: valid files, one entry per launched kernel in launch order, stack.json's kernels
    known to dump.json."""
    problems = []
    folders = r.dump.folders()
    if not folders:
        return ["no dump folder"]
    rows = folder_rows(folders, problems)
    rows.sort()
    order = launch_order(r)
    if [op for _, op in rows] != order:
        problems.append(f"kernels in launch order {[op for _, op in rows][:8]}... ({len(rows)}) != launch log "
                        f"{order[:8]}... ({len(order)})")
    if [i for i, _ in rows] != list(range(len(rows))):
        problems.append("launch_index values are not 0..n-1")
    return problems


def host_inputs(k):
    j = np.arange(16, dtype=np.float32)
    x = np.float32(0.5) * np.float32(k) + np.float32(0.25) * j - np.float32(1.0)
    y = np.float32(1.5) - np.float32(0.125) * j + np.float32(0.01) * np.float32(k)
    return x.astype(np.float32), y.astype(np.float32)


def check_crash_host_data(r, first_k=0):
    """Tensor task, crash_host: kernel k (k-th Mul/Add in launch order) has the host's inputs and numpy's output."""
    problems = []
    kernels = sorted(((e["launch"]["index"], f, name, e) for f, name, e in r.dump.kernels()), key=lambda t: t[0])
    for k, (_, f, name, e) in enumerate(kernels, start=first_k):
        x, y = host_inputs(k)
        ts = list(tensors(e))
        if len(ts) != 3:
            problems.append(f"{name}: {len(ts)} tensors")
            continue
        got = [f.load(t.info) for t in ts]
        want = [x, y, x * y if op_type(name) == "Mul" else x + y]
        if op_type(name) != ("Mul" if k % 2 == 0 else "Add"):
            problems.append(f"{name}: kernel {k} should be {'Mul' if k % 2 == 0 else 'Add'}")
        for t, g, w in zip(ts, got, want):
            if g is None or g.dtype != np.float32 or not np.array_equal(g, w):
                problems.append(f"{name} {t.side}.{t.slot}: {g} != {w}")
    return problems


# mode -> the exit status without the shim (negative: killed by that signal).
C_MODES = {
    "exit": 3, "return": 4, "_exit": 5, "_Exit": 6,
    "sigterm": -signal.SIGTERM, "sigint": -signal.SIGINT, "sighup": -signal.SIGHUP,
    "abort": -signal.SIGABRT, "segv": -signal.SIGSEGV, "bus": -signal.SIGBUS,
    "handler-term-early": 7, "handler-term-late": 7,
}


@pytest.mark.parametrize("mode", sorted(C_MODES))
def test_c_host_end(tmp_path, mode):
    plain = run([CRASH_HOST, mode, N], tmp_path / "plain", shim=False)
    assert plain.returncode == C_MODES[mode], (plain.returncode, plain.stderr)
    r = run([CRASH_HOST, mode, N], tmp_path / "shim", shim=True)
    assert r.returncode == plain.returncode, f"exit status {r.returncode}, without the shim {plain.returncode}\n{r.stderr}"
    assert r.stdout == plain.stdout == f"launched {N}\n"
    host_lines = [line for line in r.stderr.splitlines() if line.startswith("crash_host")]
    assert host_lines == [line for line in plain.stderr.splitlines() if line.startswith("crash_host")]
    assert "msprobe-shim" not in r.stderr, r.stderr
    assert len(launch_order(r)) == N
    problems = check_complete(r) + check_crash_host_data(r)
    assert not problems, fail_report(problems)


# mode -> (exit status, a line the host prints on stderr, or None)
PY_MODES = {
    "os_exit": (9, None),
    "keyboard_interrupt": (-signal.SIGINT, "KeyboardInterrupt"),
    "keyboard_interrupt_caught": (0, None),
    "faulthandler_segv": (-signal.SIGSEGV, "Fatal Python error: Segmentation fault"),
    "sigterm_handler": (3, None),
    "sigterm": (-signal.SIGTERM, None),
}


@pytest.mark.parametrize("mode", sorted(PY_MODES))
def test_python_host_end(tmp_path, mode):
    status, stderr_line = PY_MODES[mode]
    cmd = [shimtest.PYTHON, PY_HOST, mode, 6]
    plain = run(cmd, tmp_path / "plain", shim=False)
    assert plain.returncode == status, (plain.returncode, plain.stderr)
    r = run(cmd, tmp_path / "shim", shim=True)
    assert r.returncode == status, f"exit status {r.returncode}, without the shim {status}\n{r.stderr}"
    assert r.stdout == plain.stdout
    if stderr_line:
        assert stderr_line in plain.stderr and stderr_line in r.stderr, r.stderr
    assert "msprobe-shim" not in r.stderr, r.stderr
    problems = check_complete(r)
    checked_problems, checked = shimtest.check_recomputation(r.dump)
    problems += checked_problems
    assert not problems, fail_report(problems)
    assert checked == collections.Counter(launch_order(r))
    assert sum(checked.values()) == (24 if mode == "keyboard_interrupt_caught" else 12)


def test_sigkill_then_repair(tmp_path):
    """train.py killed with SIGKILL after a few steps: repair makes every file valid, the entries are a prefix
    of the launch order, every tensor file they name loads and equals numpy's recomputation."""
    work = tmp_path / "kill"
    os.makedirs(work)
    log = str(work / "launches.log")
    env = shimtest.clean_env({"FAKE_CANN_LAUNCH_LOG": log, "LD_PRELOAD": shimtest.SHIM, "MSPROBE_TASK": "tensor",
                              "MSPROBE_DUMP_PATH": str(work / "dump")})
    p = subprocess.Popen([shimtest.PYTHON, shimtest.TRAIN, "--steps", "100000"], env=env, cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 6 and time.monotonic() < deadline:
            line = p.stdout.readline()
            assert line, p.stderr.read()
            seen += line.startswith("step ")
        time.sleep(1.5)  # a few more steps, and at least one refresh of stack.json
        # A repair while the run is still going leaves its folders alone (its rank lock is held) and says so.
        live = subprocess.run([INSPECT, "repair", str(work / "dump")], capture_output=True, text=True, timeout=120)
        assert p.poll() is None, "train.py ended before it was killed"
        assert live.returncode == 1 and "being written by a running process (pid %d)" % p.pid in live.stdout, (
            live.stdout + live.stderr)
        assert not glob.glob(str(work / "dump" / "step*" / "rank" / "*.bak*")), "repair touched a live folder"
        p.send_signal(signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == -signal.SIGKILL
    dump = shimtest.Dump(str(work / "dump"))
    # Valid even before the repair (issue 39: the journals are valid JSON at every moment), unless the kill tore the
    # very write of an entry; every finished step is whole.
    for folder in dump.folders()[:-1]:
        with open(os.path.join(folder.path, "dump.json")) as f:
            json.load(f)
    assert os.path.exists(work / "dump" / ".msprobe_shim.rank.lock"), "the killed run's rank lock"
    rows, out = repaired_rows(str(work / "dump"))
    assert "repaired" in out and ".msprobe_shim.rank.lock: a killed run's rank lock" in out, out
    assert all(n.startswith("step") for n in shimtest.root_entries(work / "dump")), os.listdir(work / "dump")
    r = shimtest.Run([], 0, "", "", str(work), dump=shimtest.Dump(str(work / "dump")), launch_log=log)
    order = launch_order(r)
    # How many survive depends on how far the writer lagged behind (bounded by MSPROBE_BUFFER_MB), not asserted.
    assert rows, "nothing survived"
    assert [i for i, _ in rows] == list(range(len(rows))), "the entries are not a prefix of the launch order"
    assert [op for _, op in rows] == order[:len(rows)]
    problems, checked = shimtest.check_recomputation(r.dump)
    assert not problems, fail_report(problems)
    assert sum(checked.values()) == len(rows)


def repaired_rows(dump_root):
    """(launch_index, op type) of every entry after `msprobe-inspect repair`, each file loaded with json."""
    rep = subprocess.run([INSPECT, "repair", dump_root], capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    problems = []
    rows = folder_rows(shimtest.Dump(dump_root).folders(), problems)
    assert not problems, fail_report(problems)
    return sorted(rows), rep.stdout


def test_bounded_wait_when_the_device_never_finishes(tmp_path):
    """SIGTERM while the device is far behind (every stream task takes 1.5 s): the dying thread waits a bounded
    time, says so in one line, and the process dies of SIGTERM; repair then closes what was written."""
    env = {"FAKE_CANN_TASK_DELAY_US": "1500000"}
    r = run([CRASH_HOST, "sigterm", 6], tmp_path, shim=True, env=env, timeout=120)
    assert r.returncode == -signal.SIGTERM, r.stderr
    assert "the dump could not be finished in time" in r.stderr, r.stderr
    rows, _ = repaired_rows(r.dump.root)
    assert len(rows) < 6
    assert [i for i, _ in rows] == list(range(len(rows)))
    assert [op for _, op in rows] == launch_order(r)[:len(rows)]
    problems = check_crash_host_data(r)
    assert not problems, fail_report(problems)
