"""Process life under the shim (issue 8 point 4, docs/lifecycle.md): fork without exec, fork+exec of a child
that inherits LD_PRELOAD, many threads on many streams created and destroyed during capture, dlclose/dlopen and
RTLD_DEEPBIND loading of the op library, a host signal flooding the process during writes, and kernels launched
after the shim's exit handler (from an earlier atexit handler, from a static destructor).

Every check reads the dump with json/numpy and compares it with the stand-in's launch log and with the inputs the
host used (crash_host's kernel k has inputs the test recomputes, so a lost, duplicated or mixed-up kernel shows).
"""
import collections
import json
import os
import subprocess

import numpy as np
import pytest

import sanitizer_preload
import shimtest
from shimtest import fail_report, op_type, tensors
from test_shim_crash import CRASH_HOST, INSPECT, check_complete, check_crash_host_data, host_inputs, launch_order, run

HERE = os.path.dirname(os.path.abspath(__file__))
PY_SPAWN = os.path.join(HERE, "py_spawn.py")

# The child of fork() in a threaded parent may allocate (the shim's fork handler, the host). glibc's malloc takes its
# locks around fork; the ASan runtime of GCC 12 does not, so the child hangs whenever a parent thread (the stand-in's
# stream worker, a writer) was inside ASan's allocator at that instant (google/sanitizers#1814). The normal stage runs
# these tests.
fork_of_a_threaded_parent = pytest.mark.skipif(
    sanitizer_preload.ASAN,
    reason="GCC 12's ASan allocator is not fork-safe in a threaded process (google/sanitizers#1814)")


def kernel_index(folder, entry):
    """crash_host's k of a dumped kernel, from its first input (x[0] = 0.5 k - 1)."""
    x = folder.load(next(tensors(entry)).info)
    return int(round((float(x[0]) + 1.0) / 0.5))


@fork_of_a_threaded_parent
@pytest.mark.parametrize("child_exit", ["exit", "_exit"])
def test_fork_child_leaves_the_parent_dump_alone(tmp_path, child_exit):
    """The child launches kernels on its own stream and exits (running inherited exit handlers, or not): it
    does not hang, writes nothing, and the parent's dump holds exactly the parent's 2N kernels."""
    n = 10
    env = {"CRASH_HOST_CHILD_EXIT": child_exit}
    r = run([CRASH_HOST, "fork", n], tmp_path, shim=True, env=env, timeout=120)
    plain = run([CRASH_HOST, "fork", n], tmp_path / "plain", shim=False, env=env)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout == f"child launched {n}\nlaunched {2 * n}\n"
    assert collections.Counter(launch_order(r)) == collections.Counter({"Mul": 15, "Add": 15})  # parent + child
    folders = r.dump.folders()
    assert [(f.step, f.rank) for f in folders] == [(0, None)]
    ks = sorted(kernel_index(f, e) for f, _, e in r.dump.kernels())
    assert ks == list(range(2 * n)), f"the parent's dump holds kernels {ks}"
    problems = check_crash_host_data(r)
    assert not problems, fail_report(problems)
    for name in ("dump.json", "construct.json", "stack.json"):
        with open(os.path.join(folders[0].path, name)) as f:
            json.load(f)
    assert shimtest.root_entries(r.dump.root) == ["step0"], os.listdir(r.dump.root)


@fork_of_a_threaded_parent
def test_orphaned_fork_child_does_not_keep_the_rank_locked(tmp_path):
    """A fork child that outlives its killed parent (a data-loader worker after the OOM killer took the trainer)
    must not hold the parent's rank lock: a restarted run would be turned away from its rank folder and repair
    would leave the lock. With the child still alive, the lock can be taken and repair removes it."""
    import fcntl
    import signal

    r = run([CRASH_HOST, "fork-orphan", 4], tmp_path, shim=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    child = int(r.stdout.split("child ")[1].split()[0])
    try:
        os.kill(child, 0)  # still alive: the lock is tested while it runs
        locks = [n for n in os.listdir(r.dump.root) if n.endswith(".lock")]
        assert locks, os.listdir(r.dump.root)  # the killed parent's lock file, left behind
        for name in locks:
            fd = os.open(os.path.join(r.dump.root, name), os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if the child still held it
            finally:
                os.close(fd)
        rep = subprocess.run([INSPECT, "repair", r.dump.root], capture_output=True, text=True, timeout=120)
        assert rep.returncode == 0, rep.stdout + rep.stderr
        assert not [n for n in os.listdir(r.dump.root) if n.endswith(".lock")], os.listdir(r.dump.root)
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("child_rank", ["same", "other"])
def test_fork_exec_child_with_the_shim(tmp_path, child_rank):
    """Same rank: the child is refused with one warning and the parent's files stay whole (its kernels before
    and after the child are all there). Another rank: the child writes its own rank folder."""
    n = 5
    env = {"CHILD_ENV": f"FAKE_CANN_LAUNCH_LOG={tmp_path / 'child.log'}" + (",RANK_ID=1" if child_rank == "other" else "")}
    r = run([shimtest.PYTHON, PY_SPAWN, "parent", n], tmp_path, shim=True, env=env).check()
    assert "child exited 0" in r.stdout
    with open(tmp_path / "child.log") as f:
        child_launches = [line.strip() for line in f if line.strip()]
    assert child_launches == ["Muls"] * n
    warnings = [line for line in r.stderr.splitlines() if "are being written by" in line]
    parent_folder = r.dump.folder(0, None)
    with open(os.path.join(parent_folder.path, "stack.json")) as f:
        json.load(f)
    assert parent_folder.op_counts() == collections.Counter(launch_order(r)) == collections.Counter({"Muls": 2 * n})
    problems, checked = shimtest.check_recomputation(r.dump)
    assert not problems, fail_report(problems)
    if child_rank == "same":
        assert len(warnings) == 1 and "does not record its kernels there" in warnings[0], r.stderr
        assert [(f.step, f.rank) for f in r.dump.folders()] == [(0, None)]
    else:
        assert not warnings, r.stderr
        assert [(f.step, f.rank) for f in r.dump.folders()] == [(0, None), (0, 1)]
        assert r.dump.folder(0, 1).op_counts() == collections.Counter({"Muls": n})
        assert sum(checked.values()) == 3 * n
    # Both processes have ended: their rank locks are gone, the root holds only what msprobe expects.
    assert shimtest.root_entries(r.dump.root) == ["step0"], os.listdir(r.dump.root)


def test_many_threads_many_streams(tmp_path):
    """3 waves of 8 threads, each with its own stream, created while the previous wave still runs: every kernel
    once, with its own inputs and numpy's output."""
    per_thread = 12
    r = run([CRASH_HOST, "threads", per_thread], tmp_path, shim=True, timeout=300).check()
    total = 3 * 8 * per_thread
    assert r.stdout == f"launched {total}\n"
    assert len(launch_order(r)) == total
    assert r.dump.op_counts() == collections.Counter(launch_order(r))
    seen = collections.Counter()
    problems = []
    stream_ids = set()
    for f, name, e in r.dump.kernels():
        k = kernel_index(f, e)
        seen[k] += 1
        stream_ids.add(e["launch"]["stream_id"])
        x, y = host_inputs(k)
        got = [f.load(t.info) for t in tensors(e)]
        want = [x, y, x * y if k % 2 == 0 else x + y]
        if op_type(name) != ("Mul" if k % 2 == 0 else "Add") or not all(
                np.array_equal(g, w) for g, w in zip(got, want)):
            problems.append(f"{name}: kernel {k} has the wrong data")
    assert not problems, fail_report(problems)
    assert sorted(seen) == list(range(total)) and set(seen.values()) == {1}, "lost or duplicated kernels"
    # stream_id numbers streams by handle: a wave's stream may reuse the handle of a destroyed one.
    assert 8 <= len(stream_ids) <= 3 * 8, stream_ids


@pytest.mark.parametrize("mode", ["dlclose", "deepbind"])
def test_op_library_reloaded_or_deepbound(tmp_path, mode):
    """libopapi closed and opened again mid-run, or opened RTLD_DEEPBIND: every kernel captured."""
    if mode == "deepbind" and sanitizer_preload.ASAN:
        pytest.skip("ASan refuses dlopen(RTLD_DEEPBIND) of any library (google/sanitizers#611)")
    n = 20
    r = run([CRASH_HOST, mode, n], tmp_path, shim=True).check()
    assert r.stdout == f"launched {n}\n"
    problems = check_complete(r) + check_crash_host_data(r)
    assert not problems, fail_report(problems)
    assert len(launch_order(r)) == n


def test_host_signal_during_writes(tmp_path):
    """A host SIGUSR1 handler without SA_RESTART, signalled 100 times while kernels are captured and written (at
    least 200): every signal reaches the host's handler once, and the dump is whole and exact."""
    n = 200
    r = run([CRASH_HOST, "usr1", n], tmp_path, shim=True, timeout=300).check()
    lines = r.stdout.splitlines()
    launched = int(lines[0].split()[1])
    assert launched >= n and len(launch_order(r)) == launched, lines
    assert lines[1] == "signals sent 100 handled 100", lines[1]
    problems = check_complete(r) + check_crash_host_data(r)
    assert not problems, fail_report(problems)


@pytest.mark.parametrize("mode", ["atexit-late", "static-dtor"])
def test_launches_after_the_exit_handler(tmp_path, mode):
    """Kernels launched after the shim closed the dump (an atexit handler registered before the shim's, a static
    destructor): the host works as without the shim, the dump stays valid with every earlier kernel."""
    n = 10
    plain = run([CRASH_HOST, mode, n], tmp_path / "plain", shim=False)
    r = run([CRASH_HOST, mode, n], tmp_path / "shim", shim=True)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and "late launches from" in r.stdout
    assert len(launch_order(r)) == n + 2
    folder = r.dump.folder(0, None)
    for name in ("dump.json", "construct.json", "stack.json"):
        with open(os.path.join(folder.path, name)) as f:
            json.load(f)
    ks = sorted(kernel_index(folder, e) for _, e in folder.entries())
    assert ks in (list(range(n)), list(range(n + 2))), ks  # captured, or left out: never half
    problems = check_crash_host_data(r)
    assert not problems, fail_report(problems)
