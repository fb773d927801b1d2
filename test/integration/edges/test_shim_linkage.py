"""How libmsprobe_shim.so sits in somebody else's process (spec §3, issue 3 "Interposition"):

* it exports only the libc functions it interposes plus msprobe_* and MindSpore's hook interface, no CANN name
  (nm -D), and C++ exceptions thrown and caught by the host behave the same with the shim loaded;
* the PLT path: build/bin/acl_app, linked directly against the stand-in, has its aclnn kernel captured with
  correct data and prints the same results;
* another interposer that forwards aclCreateTensor with dlsym(RTLD_NEXT), preloaded before or after the shim:
  no recursion, the host's calls work and pass through that interposer once each, and the shim still records.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_helpers import (ACL_APP, FAKE_CANN, PYTHON, SHIM, TESTS_BIN, TRAIN, clean_env, describe,  # noqa: E402
                          dump_dirs, entries_of, load_dump, require_built, run, shim_lines, with_shim)

EXCEPTION_HOST = os.path.join(TESTS_BIN, "shim_exception_host")
WRAPPER = os.path.join(TESTS_BIN, "librtld_next_wrapper.so")
KN = 8  # acl_app's vectors: x[i] = 0.5 i - 1, y[i] = 2 + 0.25 i (float32)
ACL_APP_X = (0.5 * np.arange(KN) - 1.0).astype(np.float32)
ACL_APP_Y = (2.0 + 0.25 * np.arange(KN)).astype(np.float32)


def defined_dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2].split("@")[0])
    return names


def only_rank_dir(dump_root):
    dirs = dump_dirs(dump_root)
    assert list(dirs) == [("step0", "rank")], f"expected one step0/rank folder, got {sorted(dirs)}"
    return dirs[("step0", "rank")]


def launches(log_path):
    if not os.path.exists(log_path):
        return []
    with open(log_path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


@pytest.fixture(scope="module", autouse=True)
def built():
    require_built(SHIM, ACL_APP, EXCEPTION_HOST, WRAPPER)


@pytest.fixture(scope="module")
def acl_app_plain(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("plain")
    p = run([ACL_APP], clean_env(), cwd=str(cwd), timeout=60)
    assert p.returncode == 0, describe(p)
    assert p.stdout.decode().splitlines()[-1] == "acl_app: all results match"
    return p


# ---- 4. exported symbols, C++ exceptions -------------------------------------------------------------------

def test_exports_only_interposed_libc_names_and_msprobe_api():
    """No CANN name at all (issue 33): a program's `&aclrtMalloc` must stay CANN's (MindSpore's GetAscendPath runs
    dladdr on it); direct calls reach the hooks through redirected GOT entries instead (test_shim_dladdr.py)."""
    names = defined_dynamic_symbols(SHIM)
    stand_in = set()
    lib64 = os.path.join(FAKE_CANN, "lib64")
    for lib in os.listdir(lib64):
        if lib.endswith(".so"):
            stand_in |= defined_dynamic_symbols(os.path.join(lib64, lib))
    interposed_libc = {"dlsym", "dlvsym", "dlopen", "dlclose", "_exit", "_Exit", "sigaction", "signal"}  # docs/lifecycle.md
    interposed_libc |= {"MS_DbgOnStepBegin", "MS_DbgOnStepEnd"}  # MindSpore's hook-tool interface (shim/hooks/model.cpp)
    bad = []
    for n in sorted(names):
        if re.search(r"^_Z|ffi_|nlohmann|spdlog|fmt|lz4|LZ4|_Unwind|unw_|__cxa|__gxx|^std", n):
            bad.append(f"{n}: third-party or C++ runtime symbol")
        elif n in stand_in or re.match(r"^(acl|rt|Hccl)", n):
            bad.append(f"{n}: a CANN name (the shim must never export one)")
        elif not (n.startswith("msprobe_") or n in interposed_libc):
            bad.append(f"{n}: neither interposed libc nor msprobe_*")
    assert not bad, "libmsprobe_shim.so exports:\n" + "\n".join(bad)
    for must in ("dlsym", "dlopen", "msprobe_shim_step", "msprobe_shim_hooked_function"):
        assert must in names, f"{must} is not exported"


def test_no_unwinder_or_cxx_runtime_in_dt_needed():
    dyn = subprocess.run(["readelf", "-d", SHIM], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    for lib in needed:
        assert not lib.startswith(("libunwind", "libstdc++", "libgcc_s", "libpython")), needed


@pytest.mark.parametrize("stack", [None, "native", "off"])
def test_host_exceptions_work_with_the_shim(tmp_path, stack):
    plain = run([EXCEPTION_HOST], clean_env(), cwd=str(tmp_path), timeout=60)
    assert plain.returncode == 0, describe(plain)
    text = plain.stdout.decode()
    assert text.count("caught DerivedError") == 9 and "live=0" in text and text.count("mul ok") == 2, text
    env = dict(clean_env(MSPROBE_DUMP_PATH=str(tmp_path / "dump")), **({"MSPROBE_STACK": stack} if stack else {}))
    shimmed = run([EXCEPTION_HOST], with_shim(env), cwd=str(tmp_path), timeout=60)
    assert shimmed.returncode == 0, describe(shimmed)
    assert shimmed.stdout == plain.stdout, describe(shimmed)
    assert shim_lines(shimmed.stderr) == [], describe(shimmed)
    # The shim was really at work while the exceptions flew.
    assert len(entries_of(load_dump(only_rank_dir(tmp_path / "dump")), "Mul")) == 2


# ---- 5. the PLT path ---------------------------------------------------------------------------------------

def check_acl_app_mul(dump_root):
    """acl_app's aclnnMul: found once in the dump (the rank folder may change after acl_app's HCCL init, so every
    folder is searched), inputs are acl_app's vectors and the output their float32 product."""
    found = [(rank_dir, k, e) for rank_dir in dump_dirs(dump_root).values()
             for k, e in entries_of(load_dump(rank_dir), "Mul").items()]
    assert len(found) == 1, f"{len(found)} Mul entries in {sorted(dump_dirs(dump_root))}"
    (rank_dir, kernel, entry), = found
    x_arg, y_arg = entry["input_args"]
    z_arg, = entry["output"]
    tensor_dir = os.path.join(rank_dir, "dump_tensor_data")
    x, y, z = (np.load(os.path.join(tensor_dir, a["data_name"])) for a in (x_arg, y_arg, z_arg))
    for a in (x_arg, y_arg, z_arg):
        assert a["dtype"] == "Float32" and a["shape"] == [KN], a
    assert x.tobytes() == ACL_APP_X.tobytes() and y.tobytes() == ACL_APP_Y.tobytes(), (x, y)
    assert z.tobytes() == (x * y).tobytes(), (z, x * y)  # float32 products, as the kernel rounds them
    assert z_arg["Max"] == pytest.approx(float((x * y).max())) and z_arg["Min"] == pytest.approx(float((x * y).min()))
    return kernel


def test_acl_app_plt_calls_are_captured(tmp_path, acl_app_plain):
    log = tmp_path / "launches.log"
    env = with_shim(clean_env(MSPROBE_TASK="tensor", MSPROBE_DUMP_PATH=str(tmp_path / "dump"),
                              FAKE_CANN_LAUNCH_LOG=str(log)))
    p = run([ACL_APP], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, describe(p)
    assert p.stdout == acl_app_plain.stdout, describe(p)
    assert shim_lines(p.stderr) == [], describe(p)
    check_acl_app_mul(tmp_path / "dump")
    # Every aclnn and aclop kernel the stand-in launched has its entry.
    logged = launches(log)
    assert logged == ["Add", "Mul"], logged
    dirs = dump_dirs(tmp_path / "dump")
    assert all(step == "step0" for step, _ in dirs), sorted(dirs)
    for op in set(logged):
        n = sum(len(entries_of(load_dump(d), op)) for d in dirs.values())
        assert n == logged.count(op), (op, n, sorted(dirs))


# ---- 6. another interposer forwarding with dlsym(RTLD_NEXT) ------------------------------------------------

@pytest.mark.parametrize("order", ["wrapper-then-shim", "shim-then-wrapper"])
def test_rtld_next_interposer_with_the_shim(tmp_path, acl_app_plain, order):
    preload = [WRAPPER, SHIM] if order == "wrapper-then-shim" else [SHIM, WRAPPER]
    env = dict(clean_env(MSPROBE_TASK="tensor", MSPROBE_DUMP_PATH=str(tmp_path / "dump")), LD_PRELOAD=" ".join(preload))
    p = run([ACL_APP], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, f"LD_PRELOAD={env['LD_PRELOAD']}: " + describe(p)
    assert p.stdout == acl_app_plain.stdout, describe(p)
    # acl_app creates three tensors: each call passed through the wrapper exactly once.
    assert "rtld_next_wrapper: 3 calls" in p.stderr.decode(), describe(p)
    assert shim_lines(p.stderr) == [], describe(p)
    check_acl_app_mul(tmp_path / "dump")


def test_rtld_next_interposer_alone(tmp_path, acl_app_plain):
    """The control: the wrapper works without the shim."""
    p = run([ACL_APP], dict(clean_env(), LD_PRELOAD=WRAPPER), cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0 and p.stdout == acl_app_plain.stdout, describe(p)
    assert "rtld_next_wrapper: 3 calls" in p.stderr.decode(), describe(p)


@pytest.mark.parametrize("order", ["wrapper-then-shim", "shim-then-wrapper"])
def test_rtld_next_interposer_with_a_dlsym_host(tmp_path, order):
    """train.py reaches aclCreateTensor by dlsym on libnnopbase's handle, which never sees a global wrapper: with
    the shim in either order it must still get the same results, the wrapper no calls, and the shim its kernels."""
    preload = [WRAPPER, SHIM] if order == "wrapper-then-shim" else [SHIM, WRAPPER]
    plain = run([PYTHON, TRAIN, "--steps", "1"], dict(clean_env(), LD_PRELOAD=WRAPPER), cwd=str(tmp_path))
    assert plain.returncode == 0 and "rtld_next_wrapper: 0 calls" in plain.stderr.decode(), describe(plain)
    env = dict(clean_env(MSPROBE_DUMP_PATH=str(tmp_path / "dump")), LD_PRELOAD=" ".join(preload))
    p = run([PYTHON, TRAIN, "--steps", "1"], env, cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout == plain.stdout, describe(p)
    assert "rtld_next_wrapper: 0 calls" in p.stderr.decode(), describe(p)
    dirs = dump_dirs(tmp_path / "dump")
    assert ("step0", "rank") in dirs, sorted(dirs)
    assert sum(len(load_dump(d)["data"]) for d in dirs.values()) > 10
