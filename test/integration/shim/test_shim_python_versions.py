"""Python frames read without the GIL (issue 18), under every CPython interpreter found on the machine.

python_versions/ctypes_host.py (ctypes only, no numpy) launches aclnnAdd from nested functions, methods, a property,
a generator, an asyncio coroutine and a second thread while another thread spins in Python, and records at each
phase 1, on the call's own line, traceback.extract_stack() and the frames' qualified names. Each kernel's Python
frames in stack.json must be exactly those (file, line, qualname; co_name before 3.11), innermost first, with the
GIL released (ctypes.CDLL) and held (ctypes.PyDLL), and the kernel names (scopes) must be the same both ways.
Interpreters that are absent are skipped, and the skip says which. A faked CPython 3.14 (a preloaded Py_Version
over 3.13, whose _Py_DebugOffsets then name another version) must give the same dump without Python frames, with
one warning, and never crash or hang.

From 3.13 on the layout comes from the interpreter's own _Py_DebugOffsets (issue 32): CPython 3.14 (a build from
CPython's source, if one is installed under /var/cache/msprobe-shim/cpython-3.14 or by pyenv) must give the same
frames as 3.8-3.13 without a layout of its own in the shim. A layout the shim cannot read (here: the interpreter's
table marked free-threaded by the host before the first launch) gives the C API's frames where the GIL is held,
exactly traceback.extract_stack()'s, none where it is released, and one warning.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

import shimtest
from test_shim_stacks import load_stacks, python_frames, stack_of, by_launch

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "python_versions", "ctypes_host.py")
WANTED = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
# CPython 3.14: no layout of its own in the shim (read from its _Py_DebugOffsets). Not in pyenv here: a build from
# CPython's source installed outside the repository, when there is one.
CPYTHON_314 = ["/var/cache/msprobe-shim/cpython-3.14/bin/python3.14", "/root/.pyenv/versions/3.14.*/bin/python3.14"]


def elf_machine(path):
    """e_machine of an ELF file (following symlinks), None if unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    return int.from_bytes(head[18:20], "little") if head[:4] == b"\x7fELF" else None


def interpreters():
    """[(label, path or None)]: pyenv's 3.8 to 3.13 and Debian's python3, those of the shim's architecture only
    (under qemu the tests' own arm64 python3 stands for Debian's)."""
    arch = elf_machine(shimtest.SHIM)
    usable = lambda p: p if p and elf_machine(os.path.realpath(p)) == arch else None
    out = []
    for minor in WANTED:
        found = sorted(glob.glob(f"/root/.pyenv/versions/{minor}.*/bin/python{minor}"))
        out.append((f"pyenv-{minor}", usable(found[-1]) if found else None))
    found = sorted(p for pattern in CPYTHON_314 for p in glob.glob(pattern))
    out.append(("cpython-3.14", usable(found[0]) if found else None))
    debian = usable("/usr/bin/python3") or usable(sys.executable)
    out.append(("debian-python3", debian))
    return out


INTERPRETERS = interpreters()


def run_host(tmp_path, python, kind, env=None, preload=None):
    work = tmp_path / kind
    rec = work / "records.json"
    e = dict(env or {})
    e["MSPROBE_STACK"] = "python"
    e["MSPROBE_TASK"] = "statistics"
    if preload:
        e["LD_PRELOAD"] = f"{preload} {shimtest.SHIM}"
    r = shimtest.run([python, HOST, kind, str(rec)], work, env=e, timeout=300).check()
    with open(rec) as f:
        return r, json.load(f)


def kernels(r):
    """[(name, python frames as (file, line, qualname))] of the Add kernels, in launch order."""
    out = []
    for folder in r.dump.folders():
        per_kernel = stack_of(load_stacks(folder))
        for name, _ in by_launch(folder):
            if shimtest.op_type(name) == "Add":
                out.append((name, [(f, l, q) for f, l, q, _ in python_frames(per_kernel.get(name, []))]))
    return out


@pytest.mark.parametrize("label,python", INTERPRETERS, ids=[k for k, _ in INTERPRETERS])
def test_frames_match_the_interpreters_own(tmp_path, label, python):
    if python is None:
        where = f" (looked for {' and '.join(CPYTHON_314)})" if label == "cpython-3.14" else ""
        pytest.skip(f"{label}: no such interpreter on this machine{where} (or not of the shim's architecture)")
    names = {}
    for kind in ("CDLL", "PyDLL"):
        r, rec = run_host(tmp_path, python, kind)
        got = kernels(r)
        launches = rec["launches"]
        assert len(launches) == 8, (label, kind, len(launches))
        assert len(got) == len(launches), (label, kind, len(got), len(launches))
        for i, ((name, frames), want) in enumerate(zip(got, launches)):
            # extract_stack's name is co_name; the dump shows co_qualname from 3.11 (co_name before).
            assert [(f, l) for f, l, _ in frames] == [(w[0], w[1]) for w in want], (label, kind, i, frames, want)
            assert [q for _, _, q in frames] == [w[3] for w in want], (label, kind, i, frames, want)
            assert all(q.split(".")[-1] == w[2] for (_, _, q), w in zip(frames, want)), (label, kind, i)
            assert name.split(".")[1] != "Default", (label, kind, name)
        names[kind] = [n for n, _ in got]
        assert "Python frames" not in r.stderr, r.stderr
    assert names["CDLL"] == names["PyDLL"], (label, names)
    assert any("nested_outer_nested_middle" in n or "nested_outer" in n for n in names["CDLL"]), names["CDLL"]


FAKE_VERSION = r'''
/* Claims CPython 3.14, a version whose layout the shim does not know, before the real interpreter's symbols. */
const unsigned long Py_Version = 0x030E00F0UL;
const char *Py_GetVersion(void) { return "3.14.0 (fake)"; }
'''


def test_unsupported_version_gives_no_python_frames_and_one_warning(tmp_path):
    # Needs an interpreter whose symbols come from a shared libpython (a preloaded object comes before it; Debian's
    # python3 exports them from the executable, which comes first).
    shared = [p for label, p in INTERPRETERS if p and label.startswith("pyenv-")]
    if not shared:
        pytest.skip("no pyenv interpreter (shared libpython) on this machine: the fake cannot take precedence")
    python = shared[-1]
    src = tmp_path / "fake.c"
    src.write_text(FAKE_VERSION)
    fake = tmp_path / "libfake_py_version.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(src)], check=True)
    for kind in ("CDLL", "PyDLL"):
        plain, rec_plain = run_host(tmp_path / "known", python, kind)
        faked, rec = run_host(tmp_path / "faked", python, kind, preload=str(fake))
        got = kernels(faked)
        assert len(got) == len(rec["launches"]) == len(rec_plain["launches"]) == 8
        assert all(frames == [] for _, frames in got), got
        assert all(name.split(".")[1] == "Default" for name, _ in got), got
        warnings = [l for l in faked.stderr.splitlines() if "Python frames" in l]
        assert len(warnings) == 1 and "3.14" in warnings[0], faked.stderr
        # Same results otherwise: the same kernels with the same statistics.
        a = [e for f in plain.dump.folders() for _, e in by_launch(f)]
        b = [e for f in faked.dump.folders() for _, e in by_launch(f)]
        strip = lambda e: json.dumps(shimtest.entry_without_time(e), sort_keys=True)
        assert [strip(e) for e in a] == [strip(e) for e in b]


# The host marks its interpreter's _Py_DebugOffsets free-threaded before its first launch: a table the shim does not
# read. CPython itself never reads the table (it is there for debuggers and profilers), so the run is unchanged.
SPOIL_TABLE = r'''
import ctypes, runpy, sys
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
assert ctypes.string_at(rt, 8) == b"xdebugpy", ctypes.string_at(rt, 8)
ctypes.c_uint64.from_address(rt + 16).value = 1  # _Py_DebugOffsets.free_threaded
host = sys.argv.pop(1)
sys.argv[0] = host
runpy.run_path(host, run_name="__main__")
'''


@pytest.mark.parametrize("label,python", [(k, p) for k, p in INTERPRETERS if k in ("pyenv-3.13", "cpython-3.14")],
                         ids=["pyenv-3.13", "cpython-3.14"])
def test_unreadable_layout_gives_the_c_apis_frames_with_the_gil(tmp_path, label, python):
    if python is None:
        pytest.skip(f"{label}: no such interpreter on this machine (or not of the shim's architecture)")
    wrapper = tmp_path / "spoil_table.py"
    wrapper.write_text(SPOIL_TABLE)
    for kind in ("CDLL", "PyDLL"):
        work = tmp_path / kind
        rec = work / "records.json"
        r = shimtest.run([python, str(wrapper), HOST, kind, str(rec)], work,
                         env={"MSPROBE_STACK": "python", "MSPROBE_TASK": "statistics"}, timeout=300).check()
        with open(rec) as f:
            launches = json.load(f)["launches"]
        got = kernels(r)
        assert len(got) == len(launches) == 8, (label, kind, len(got), len(launches))
        warnings = [l for l in r.stderr.splitlines() if "Python frames" in l]
        assert len(warnings) == 1 and "free-threaded" in warnings[0] and "C API" in warnings[0], r.stderr
        for i, ((name, frames), want) in enumerate(zip(got, launches)):
            if kind == "CDLL":  # the GIL released: the C API cannot be used, and nothing else is trusted
                assert frames == [] and name.split(".")[1] == "Default", (label, i, name, frames)
                continue
            assert [(f, l) for f, l, _ in frames] == [(w[0], w[1]) for w in want], (label, i, frames, want)
            assert [q for _, _, q in frames] == [w[3] for w in want], (label, i, frames, want)
            assert name.split(".")[1] != "Default", (label, name)
