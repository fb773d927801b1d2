"""The collector's writer (issue 6 points 1-3) on real runs under libmsprobe_shim.so:

- MSPROBE_COMPRESS=lz4: every tensor file is {name}.npy.lz4, an LZ4 frame that the `lz4` tool (Debian's,
  independent of our code) decompresses to exactly the npy file of an uncompressed run of the same program;
  msprobe-inspect verify checks it, convert turns it back into that npy file, compare reads it.
- Bounded staging: with a budget far below what a fast producer stages, launches wait for the writer (the wait is
  counted and reported at exit) and nothing is lost: the dump equals an unbounded run's, byte for byte. Pinned
  buffers are pooled: far fewer aclrtMallocHost calls than copies.
- Writer threads: dump.json and construct.json list kernels in launch order.
"""
import io
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import shimtest
from shimtest import tensors

INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")
WORKLOAD = os.path.join(shimtest.SOURCE, "bench", "bench_writer_workload.py")
STEPS = "3"


def lz4_cli():
    path = shutil.which("lz4")
    if path is None:
        pytest.fail("the lz4 command line tool is missing (Debian package lz4, installed by scripts/setup.sh)")
    return path


def decompress(path):
    """The file through Debian's lz4 tool, not through our code."""
    return subprocess.run([lz4_cli(), "-d", "-c", path], capture_output=True, check=True).stdout


def inspect(*args):
    return subprocess.run([INSPECT, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("writer")
    plain = shimtest.run_train(root / "plain", "--steps", STEPS, "--dtype", "bf16", task="tensor")
    packed = shimtest.run_train(root / "lz4", "--steps", STEPS, "--dtype", "bf16", task="tensor",
                                env={"MSPROBE_COMPRESS": "lz4"})
    return plain, packed


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_lz4_files_decompress_to_the_uncompressed_npy(runs):
    plain, packed = runs
    assert plain.losses() == packed.losses()
    problems, compared = [], 0
    for f in plain.dump.folders():
        g = packed.dump.folder(f.step, f.rank)
        assert list(f.data) == list(g.data), f"{f.path}: kernels differ"
        for name, e in f.entries():
            for t, u in zip(tensors(e), tensors(g.data[name])):
                want_name = t.info["data_name"]
                got_name = u.info.get("data_name")
                if got_name != want_name + ".lz4":
                    problems.append(f"{name} {t.side}.{t.slot}: data_name {got_name!r}, expected {want_name}.lz4")
                    continue
                for k in ("dtype", "shape", "Max", "Min", "Mean", "Norm"):
                    if not same(t.info.get(k), u.info.get(k)):
                        problems.append(f"{name} {t.side}.{t.slot}: {k} {u.info.get(k)!r} != {t.info.get(k)!r}")
                raw = decompress(g.file_path(got_name))
                with open(f.file_path(want_name), "rb") as fh:
                    want = fh.read()
                if raw != want:
                    problems.append(f"{got_name}: decompresses to {len(raw)} bytes, not the {len(want)} of the npy")
                    continue
                a = np.load(io.BytesIO(raw), allow_pickle=False)
                if list(a.shape) != u.info["shape"]:
                    problems.append(f"{got_name}: shape {a.shape}")
                compared += 1
        assert sorted(g.files()) == sorted(n + ".lz4" for n in f.files()), f"{g.path}: file set differs"
    assert not problems, fail_report(problems)
    assert compared > 100
    assert any(u.info["dtype"] == "BFloat16" for _, _, e in packed.dump.kernels() for u in tensors(e))


def fail_report(problems):
    return shimtest.fail_report(problems)


def test_verify_convert_and_compare_read_lz4(runs, tmp_path):
    plain, packed = runs
    p = inspect("verify", packed.dump.root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"tensor files checked: OK", p.stdout), p.stdout
    p = inspect("compare", packed.dump.root, plain.dump.root, "--out", tmp_path / "cmp")
    assert p.returncode == 0, p.stdout + p.stderr
    # A damaged frame is found by verify.
    copy = tmp_path / "copy"
    shutil.copytree(packed.dump.root, copy)
    folder = shimtest.Dump(str(copy)).folders()[0]
    victim = folder.file_path(folder.files()[0])
    with open(victim, "r+b") as fh:
        fh.truncate(os.path.getsize(victim) // 2)
    p = inspect("verify", copy)
    assert p.returncode == 1 and os.path.basename(victim) in p.stdout and "lz4" in p.stdout, p.stdout
    # convert: back to the npy files of the plain run, dump.json updated, verify passes again.
    converted = tmp_path / "converted"
    shutil.copytree(packed.dump.root, converted)
    p = inspect("convert", converted)
    assert p.returncode == 0, p.stdout + p.stderr
    dump = shimtest.Dump(str(converted))
    n = 0
    for f in plain.dump.folders():
        g = dump.folder(f.step, f.rank)
        assert not [x for x in g.files() if x.endswith(".lz4")], g.files()
        for name, e in f.entries():
            for t, u in zip(tensors(e), tensors(g.data[name])):
                assert u.info["data_name"] == t.info["data_name"]
                with open(f.file_path(t.info), "rb") as a, open(g.file_path(u.info), "rb") as b:
                    assert a.read() == b.read(), u.info["data_name"]
                n += 1
    assert n > 100
    p = inspect("verify", converted)
    assert p.returncode == 0, p.stdout + p.stderr


def staging_report(stderr):
    """The exit report's numbers (MSPROBE_LOG_LEVEL=info)."""
    m = re.search(r"staging high water (\d+) of (\d+) bytes \(pool (\d+)\), (\d+) copies, (\d+) pinned allocations, "
                  r"(\d+) budget waits", stderr)
    assert m, stderr
    keys = ("high_water", "budget", "pool", "copies", "allocations", "waits")
    return dict(zip(keys, map(int, m.groups())))


def workload(workdir, shim=True, env=None, *args):
    r = shimtest.run([shimtest.PYTHON, WORKLOAD, "--kernels", "24", "--elements", str(256 * 1024), *args], workdir,
                     shim=shim, env=env)
    return r.check()


def test_backpressure_loses_nothing(tmp_path):
    """1 MiB tensors, 3 per kernel, through a 2 MiB budget: the launching thread has to wait for the writer."""
    free = workload(tmp_path / "free", env={"MSPROBE_TASK": "tensor", "MSPROBE_LOG_LEVEL": "info"})
    tight = workload(tmp_path / "tight", env={"MSPROBE_TASK": "tensor", "MSPROBE_LOG_LEVEL": "info",
                                              "MSPROBE_BUFFER_MB": "2", "FAKE_CANN_TASK_DELAY_US": "500"})
    plain = workload(tmp_path / "plain", shim=False)
    checksum = [line for line in plain.stdout.splitlines() if line.startswith("checksum")]
    assert checksum and all(checksum[0] in r.stdout for r in (free, tight)), "the host's results changed"
    s = staging_report(tight.stderr)
    assert s["budget"] == 2 << 20
    assert s["waits"] > 0, tight.stderr
    assert re.search(r"MSPROBE_BUFFER_MB=2: kernel launches waited \d+ times", tight.stderr), tight.stderr
    # Nothing lost: the same kernels, statistics and files as without the limit.
    (fa,), (fb,) = free.dump.folders(), tight.dump.folders()
    assert list(fa.data) == list(fb.data) and len(fa.data) == 24
    for name, e in fa.entries():
        assert same(e["input_args"], fb.data[name]["input_args"]) and same(e["output"], fb.data[name]["output"]), name
    for n in fa.files():
        with open(fa.file_path(n), "rb") as a, open(fb.file_path(n), "rb") as b:
            assert a.read() == b.read(), n
    # The output really is x + alpha*y (an independent check that the staged bytes were the right ones).
    for name, e in fa.entries():
        x, y = (fa.load(a) for a in e["input_args"][:2])
        alpha = e["input_args"][2]["value"]
        np.testing.assert_allclose(fa.load(e["output"][0]), x + np.float32(alpha) * y, rtol=1e-6, atol=1e-6)


def test_pinned_buffers_are_pooled(tmp_path):
    """At width 16 train.py's tensors all fit the smallest size class (4 KiB): under a 1 MiB budget the pool can
    hold 256 of them, so every later copy must reuse a buffer instead of calling aclrtMallocHost."""
    r = shimtest.run_train(tmp_path / "t", "--steps", "10", "--hidden", "16", task="tensor",
                           env={"MSPROBE_LOG_LEVEL": "info", "MSPROBE_BUFFER_MB": "1"})
    s = staging_report(r.stderr)
    assert s["copies"] > 1000, s
    slack = 8  # a kernel whose own tensors are all that is in use may go over the budget (docs/configuration.md)
    assert s["allocations"] <= (1 << 20) // 4096 + slack, s
    assert s["pool"] <= s["budget"] + slack * 4096, s
    files = sum(len(f.files()) for f in r.dump.folders())
    assert files == s["copies"], "every staged tensor became a file"


def test_entries_in_launch_order(runs):
    plain, _ = runs
    n = 0
    for f in plain.dump.folders():
        order = [e["launch"]["index"] for _, e in f.entries()]
        assert order == sorted(order), f"{f.path}: dump.json not in launch order"
        assert list(f.construct) == list(f.data)
        n += len(order)
    assert n > 100
