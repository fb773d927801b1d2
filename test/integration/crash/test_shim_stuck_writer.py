"""No wait without a bound (issue 38): a writer stuck on a file that never opens (a FIFO at the path of the first tensor
file: what a dead NFS mount or a full disk looks like to the writer thread) does not hold the host's end beyond
MSPROBE_WRITE_WAIT_S. The host's exit status (or the signal that ended it) is the one it has without the shim, one line
says what was not written, and once the file system answers again `msprobe-inspect repair` completes the dump.
"""
import os

import subprocess
import time

import pytest

from test_shim_crash import CRASH_HOST, INSPECT, N, run

WAIT_S = 2


def first_tensor_file(tmp_path):
    """The first tensor file crash_host's dump gets (step0/rank/dump_tensor_data/...), from a run that is not stuck."""
    r = run([CRASH_HOST, "return", str(N)], tmp_path / "clean", shim=True)
    folder = os.path.join(r.dump.root, "step0", "rank")
    first = sorted(os.listdir(os.path.join(folder, "dump_tensor_data")))[0]
    return os.path.relpath(os.path.join(folder, "dump_tensor_data", first), r.dump.root)


@pytest.mark.parametrize("mode", ["return", "exit", "sigterm"])
def test_a_stuck_writer_does_not_hold_the_host(tmp_path, mode):
    plain = run([CRASH_HOST, mode, str(N)], tmp_path / "plain", shim=False)
    fifo_rel = first_tensor_file(tmp_path)
    dump = tmp_path / "stuck" / "dump"
    fifo = dump / fifo_rel
    os.makedirs(fifo.parent)
    os.mkfifo(fifo)
    start = time.monotonic()
    r = run([CRASH_HOST, mode, str(N)], tmp_path / "stuck", shim=True,
            env={"MSPROBE_DUMP_PATH": str(dump), "MSPROBE_WRITE_WAIT_S": str(WAIT_S)}, timeout=60)
    elapsed = time.monotonic() - start
    assert r.returncode == plain.returncode and r.stdout == plain.stdout, (r.returncode, plain.returncode, r.stderr)
    # Waited once (aclFinalize, the exit handler and a signal's flush do not each wait again), well under the hang.
    assert elapsed < WAIT_S + 8, elapsed
    stuck = [line for line in r.stderr.splitlines() if "a writer thread is stuck" in line]
    assert len(stuck) == 1 and "MSPROBE_WRITE_WAIT_S" in stuck[0] and "msprobe-inspect repair" in stuck[0], r.stderr
    # The file system answers again: repair completes the dump, and verify accepts it.
    os.unlink(fifo)
    rep = subprocess.run([INSPECT, "repair", str(dump)], capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    ver = subprocess.run([INSPECT, "verify", str(dump)], capture_output=True, text=True, timeout=60)
    assert ver.returncode == 0, ver.stdout + ver.stderr


def test_a_bad_write_wait_is_refused_with_its_range(tmp_path):
    r = run([CRASH_HOST, "return", str(N)], tmp_path, shim=True, env={"MSPROBE_WRITE_WAIT_S": "0"})
    assert r.returncode == 4
    assert "MSPROBE_WRITE_WAIT_S" in r.stderr and "[1, 86400]" in r.stderr, r.stderr

