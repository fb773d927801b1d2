"""Hostile inputs and security rules of libmsprobe_shim.so (issue 8, points 3 and 5), beyond the configuration
values test_shim_config_errors.py already covers:

* config.json that is 1 GiB (sparse: refused by its size, never read), nests deeply, is binary garbage, a FIFO or
  a character device; configuration values holding printf conversions (%n);
* a dump directory on a "full disk" (RLIMIT_FSIZE: the shim's writes fail with EFBIG and SIGXFSZ must not kill
  the host), a dump path that is a symlink into another user's directory, symlinks and foreign folders planted
  inside the dump tree (never followed: the victim stays untouched);
* kernel names built from hostile Python scopes (`/`, `..`, control and non-ASCII bytes, 10 kB, `%n`) and aclop
  op types from a ctypes host: nothing is created outside the dump directory;
* API misuse by the host (null handles, double destroy, launches on destroyed streams, wrong sizes): the same
  return codes and output with and without the shim;
* files 0640 and folders 0750 under umask 000 and 077; no shell-out in the shim's imports; no format string taken
  from the environment or the host.
"""
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_helpers import (PYTHON, SHIM, SOURCE, TRAIN, clean_env, describe, dump_dirs, load_dump,  # noqa: E402
                          require_built, run, shim_lines, with_shim)

KERNEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*\.[A-Za-z0-9_][A-Za-z0-9_-]*\.\d+\.forward$")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    require_built(SHIM)
    cwd = tmp_path_factory.mktemp("baseline")
    p = run([PYTHON, TRAIN, "--steps", "2"], clean_env(), cwd=str(cwd))
    assert p.returncode == 0, describe(p)
    return p


def train(cwd, env_updates, steps=2, preexec_fn=None, timeout=300):
    """train.py --steps N under the shim in `cwd` with the given MSPROBE_* settings."""
    env = with_shim(clean_env())
    env.update(env_updates)
    os.makedirs(cwd, exist_ok=True)
    return subprocess.run([PYTHON, TRAIN, "--steps", str(steps)], env=env, cwd=str(cwd), capture_output=True,
                          timeout=timeout, preexec_fn=preexec_fn)


def snapshot(root, skip=()):
    """{path: (mode, size, mtime_ns, link target)} of everything under root (symlinks not followed)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            if any(p == s or p.startswith(s + os.sep) for s in skip):
                continue
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns, os.readlink(p) if os.path.islink(p) else None)
    return out


def host_unchanged(p, baseline):
    assert p.returncode == 0, describe(p)
    assert p.stdout == baseline.stdout, "the host's output changed:\n" + describe(p)


def one_error(p, *needles):
    """The msprobe-shim line naming every needle (at most one such line, plus at most a 'disabled' line)."""
    lines = shim_lines(p.stderr)
    hits = [line for line in lines if all(n in line for n in needles)]
    assert len(hits) == 1, f"want one msprobe-shim line naming {needles}:\n" + describe(p)
    assert len(lines) <= 2 and all(len(line) < 1100 for line in lines), lines
    return hits[0]


# ---- config.json ------------------------------------------------------------------------------------------------
READ_BYTES = textwrap.dedent("""
    import runpy, sys
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        with open("/proc/self/io") as f:
            rchar = [line.split()[1] for line in f if line.startswith("rchar:")][0]
        with open("rchar.txt", "w") as f:
            f.write(rchar)
""")


def test_one_gib_config_is_refused_by_size_without_reading_it(tmp_path, baseline):
    """A sparse 1 GiB config.json: one error naming MSPROBE_CONFIG and the size; the process reads far less than
    the file (/proc/self/io rchar counts every byte read(2) returned), so the shim never read it."""
    big = tmp_path / "config.json"
    with open(big, "wb") as f:
        f.truncate(1 << 30)
    wrapper = tmp_path / "read_bytes.py"
    wrapper.write_text(READ_BYTES)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = dict(with_shim(clean_env()), MSPROBE_CONFIG=str(big), MSPROBE_DUMP_PATH=str(tmp_path / "dump"))
    p = subprocess.run([PYTHON, str(wrapper), TRAIN, "--steps", "2"], env=env, cwd=str(cwd), capture_output=True,
                       timeout=300)
    host_unchanged(p, baseline)
    error = one_error(p, "MSPROBE_CONFIG", str(1 << 30))
    assert "16 MiB" in error, error
    rchar = int((cwd / "rchar.txt").read_text())
    assert rchar < 256 << 20, f"the process read {rchar} bytes: the 1 GiB config.json was read"
    assert not (tmp_path / "dump").exists()


def test_config_files_that_nest_deeply_or_are_not_json(tmp_path, baseline):
    deep_list = "[" * 200000
    deep_object = '{"a":' * 100000 + "1" + "}" * 100000  # valid JSON, too deep
    cases = {
        "deep-list": (deep_list.encode(), "nests"),
        "deep-object": (deep_object.encode(), "nests"),
        "binary": (bytes(range(256)) * 64, "not valid JSON"),
        "utf16": ('{"level": "L2"}'.encode("utf-16"), "not valid JSON"),
        "nul-inside": (b'{"level": "L2",\x00 "task": "tensor"}', "not valid JSON"),
        "top-level-list": (b'[{"level": "L2"}]', "not an object"),
    }
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # nobody writes: open or read would hang without O_NONBLOCK

    def work(item):
        key, value = item
        path = str(fifo) if key == "fifo" else "/dev/zero" if key == "chardev" else str(tmp_path / f"{key}.json")
        if key not in ("fifo", "chardev"):
            with open(path, "wb") as f:
                f.write(value[0])
        return train(tmp_path / key, {"MSPROBE_CONFIG": path, "MSPROBE_DUMP_PATH": str(tmp_path / key / "dump")},
                     timeout=120), path

    cases["fifo"] = (None, "not a regular file")
    cases["chardev"] = (None, "not a regular file")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(cases, pool.map(work, cases.items())))
    failures = []
    for key, (_, needle) in cases.items():
        p, path = results[key]
        try:
            host_unchanged(p, baseline)
            one_error(p, "MSPROBE_CONFIG", needle)
            assert not (tmp_path / key / "dump").exists()
        except AssertionError as e:
            failures.append(f"[{key}] {e}")
    assert not failures, "\n\n".join(failures)


# Values a variable's parser handles but test_shim_config_errors.py does not try (huge and garbage values of every
# keyword variable, printf conversions). Each must be one error naming the variable, the host unchanged.
PERCENT = "%n%s%x%n%p%99999999d"
MORE_BAD_VALUES = {
    "MSPROBE_FILE_FORMAT": ["npy" * 5000, b"\xff\xfe", PERCENT],
    "MSPROBE_STACK": ["mixed," * 3000, b"\x01\x02", PERCENT],
    "MSPROBE_COMPRESS": ["lz4" * 5000, PERCENT],
    "MSPROBE_DATA_MODE": ["all" * 5000, PERCENT],
    "MSPROBE_LOG_LEVEL": ["warn" * 5000, b"\xc3", PERCENT, "-1"],
    "MSPROBE_OVERFLOW_NUMS": ["9" * 20000, b"\xff", PERCENT],
    "MSPROBE_BUFFER_MB": ["1" * 20000, PERCENT],
    "MSPROBE_TASK": [PERCENT],
    "MSPROBE_STEP": [PERCENT, "0-1000000000000000000000"],
    "MSPROBE_RANK": [PERCENT],
    "MSPROBE_SCOPE": ["name-regex(" + "(" * 5000 + ")," + "Add"],
    "MSPROBE_LIST": ["name-regex(" + "a{1000}" * 100 + ")", "name-regex(" + "x" * 20000 + ")"],
    "MSPROBE_STEP_MARKER": ["a{1000}{1000}", "(" * 40 + "a" + ")" * 40],
    "MSPROBE_PRECISION": ["highest", "", PERCENT],
}


def test_more_bad_values_of_every_variable(tmp_path, baseline):
    items = [(f"{var}-{i}", var, v) for var, values in MORE_BAD_VALUES.items() for i, v in enumerate(values)]

    def work(item):
        key, var, value = item
        return train(tmp_path / key / "cwd", {var: value, "MSPROBE_DUMP_PATH": str(tmp_path / key / "dump")},
                     timeout=120)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(work, items))
    failures = []
    for (key, var, value), p in zip(items, results):
        try:
            host_unchanged(p, baseline)
            error = one_error(p, var)
            if value == PERCENT:
                assert PERCENT in error, f"the value is not shown literally: {error}"
            assert not (tmp_path / key / "dump").exists()
        except AssertionError as e:
            failures.append(f"[{key}] {e}")
    assert not failures, f"{len(failures)} of {len(items)} failed:\n\n" + "\n\n".join(failures)


def test_percent_conversions_in_a_valid_dump_path_are_just_characters(tmp_path, baseline):
    dump = tmp_path / "d%n%s%x%n"
    p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(dump)})
    host_unchanged(p, baseline)
    assert shim_lines(p.stderr) == [], describe(p)
    assert sorted(dump_dirs(dump)) == [("step0", "rank"), ("step1", "rank")]
    assert sorted(os.listdir(tmp_path)) == sorted(["cwd", dump.name])


# ---- the dump directory -------------------------------------------------------------------------------------------
def test_full_disk_fails_the_dump_not_the_host(tmp_path, baseline):
    """RLIMIT_FSIZE of 4 KiB: a tensor dump's dump.json and files grow past it, write(2) fails with EFBIG and the
    kernel sends SIGXFSZ to the writing thread. The host must exit 0 with its own output (no death by SIGXFSZ),
    and the shim must say the dump is incomplete; no file may exceed the limit."""
    limit = 4 << 10

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    dump = tmp_path / "dump"
    p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(dump), "MSPROBE_TASK": "tensor"}, steps=2,
              preexec_fn=small_disk)
    assert p.returncode != -signal.SIGXFSZ, "the host was killed by SIGXFSZ:\n" + describe(p)
    host_unchanged(p, baseline)
    lines = shim_lines(p.stderr)
    assert lines and any("incomplete" in line or "cannot" in line or "error" in line for line in lines), describe(p)
    assert len(lines) <= 12, "the shim floods stderr:\n" + "\n".join(lines)
    for path in snapshot(dump):
        if os.path.isfile(path):
            assert os.path.getsize(path) <= limit, path


def test_small_filesystem_fills_up(tmp_path, baseline):
    """A 64 KiB tmpfs of the test's own as the dump directory (ENOSPC, where RLIMIT_FSIZE gives EFBIG): the host
    runs unchanged and the shim says the dump is incomplete. Skipped where mounting is not permitted."""
    mnt = tmp_path / "small_fs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(mnt / "dump"), "MSPROBE_TASK": "tensor"}, steps=2)
        host_unchanged(p, baseline)
        lines = shim_lines(p.stderr)
        assert any("incomplete" in line for line in lines), describe(p)
        assert len(lines) <= 12, "the shim floods stderr:\n" + "\n".join(lines)
        assert os.statvfs(mnt).f_bfree == 0 or os.path.isdir(mnt / "dump"), "nothing was written"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_dump_path_symlinked_into_another_users_directory(tmp_path, baseline):
    other = tmp_path / "other_user"
    other.mkdir()
    os.chown(other, 65534, 65534)
    link = tmp_path / "dump"
    link.symlink_to(other)
    before = snapshot(tmp_path)
    p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(link)})
    host_unchanged(p, baseline)
    one_error(p, str(link), "another user")
    assert os.listdir(other) == []
    after = snapshot(tmp_path, skip=[str(tmp_path / "cwd")])
    assert {k: v for k, v in after.items()} == {k: v for k, v in before.items()}


def test_planted_symlinks_in_the_dump_tree_are_never_followed(tmp_path, baseline):
    """An attacker who could write in the dump tree before the run plants links to a victim: step0 -> a folder,
    step1/rank/dump.json and construct.json -> a file, step2/rank/dump_tensor_data -> a folder, and (as root) a
    step3 folder of another user. The victim must stay untouched, nothing may be created there, the host must run
    unchanged, and the shim must say why those steps are not dumped."""
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    dump = tmp_path / "dump"
    (dump / "step1" / "rank").mkdir(parents=True)
    (dump / "step2" / "rank").mkdir(parents=True)
    (dump / "step0").symlink_to(victim_dir)
    (dump / "step1" / "rank" / "dump.json").symlink_to(victim)
    (dump / "step1" / "rank" / "construct.json").symlink_to(victim)
    (dump / "step2" / "rank" / "dump_tensor_data").symlink_to(victim_dir)
    if os.geteuid() == 0:
        (dump / "step3").mkdir()
        os.chown(dump / "step3", 65534, 65534)
    before = snapshot(tmp_path)
    p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(dump), "MSPROBE_TASK": "tensor"}, steps=5)
    assert p.returncode == 0, describe(p)
    assert [line.split()[:2] for line in p.stdout.decode().splitlines()] == [["step", str(i)] for i in range(5)], \
        describe(p)
    assert victim.read_text() == "precious\n"
    assert os.listdir(victim_dir) == [], f"files created through a planted link: {os.listdir(victim_dir)}"
    after = snapshot(tmp_path, skip=[str(tmp_path / "cwd")])
    changed = [k for k in before if k != str(dump) and not k.startswith(str(dump) + os.sep) and after.get(k) != before[k]]
    assert not changed, changed
    outside = [k for k in after if k not in before and k != str(dump) and not k.startswith(str(dump) + os.sep)]
    assert not outside, f"created outside the dump directory: {outside}"
    if os.geteuid() == 0:
        assert os.listdir(dump / "step3") == [], os.listdir(dump / "step3")
    lines = shim_lines(p.stderr)
    assert lines, "the shim said nothing about the planted links:\n" + describe(p)
    # The step that was not tampered with is dumped as usual.
    assert ("step4", "rank") in dump_dirs(dump), describe(p)


# ---- hostile kernel and op names ----------------------------------------------------------------------------------
HOSTILE_SCOPES = ["../../escape", "/abs/olute", "..", ".", "a/../../b", "\x01\x1b[31m\x7f\u00ff\ufffe\u2028",
                  "x" * 10240, "%n%s%n", "-=+@leading", " spaced name ", "\\back\\slash"]

NAMES_HOST = textwrap.dedent('''
    """Launches one aclnn Add inside a Python function per hostile qualname (the OpName comes from the scope)."""
    import json, sys
    import numpy as np
    import tiny_npu
    from tiny_npu import ops

    names = json.loads(sys.argv[1])
    rt = tiny_npu.init(device=0)
    x = tiny_npu.Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))

    def body(t):
        return ops.add(t, t)

    for i, name in enumerate(names):
        f = type(body)(body.__code__.replace(co_name=name, co_qualname=name, co_filename=name + ".py"),
                       body.__globals__, name)
        y = f(x)
        print(i, y.numpy().sum(), flush=True)
    rt.synchronize()
    tiny_npu.shutdown()
''')


def test_hostile_python_scopes_stay_inside_the_dump(tmp_path):
    host = tmp_path / "names_host.py"
    host.write_text(NAMES_HOST)
    arg = json.dumps(HOSTILE_SCOPES)
    plain = run([PYTHON, str(host), arg], clean_env(), cwd=str(tmp_path))
    assert plain.returncode == 0, describe(plain)
    dump = tmp_path / "work" / "dump"
    (tmp_path / "work").mkdir()
    before = snapshot(tmp_path)
    p = run([PYTHON, str(host), arg], dict(with_shim(clean_env()), MSPROBE_DUMP_PATH=str(dump),
                                             MSPROBE_TASK="tensor", MSPROBE_STACK="python"), cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout == plain.stdout, describe(p)
    after = snapshot(tmp_path)
    outside = [k for k in after if k not in before and k != str(dump) and not k.startswith(str(dump) + os.sep)]
    assert not outside, f"created outside the dump directory: {outside}"
    dirs = dump_dirs(dump)
    assert dirs, describe(p)
    adds = 0
    for rank_dir in dirs.values():
        data = load_dump(rank_dir)["data"]
        tensor_dir = os.path.join(rank_dir, "dump_tensor_data")
        files = set(os.listdir(tensor_dir))
        mapped = {}
        if "mapping.csv" in files:
            with open(os.path.join(tensor_dir, "mapping.csv")) as f:
                mapped = dict(line.rstrip("\n").split(",", 1) for line in f if line.strip())
        for name, entry in data.items():
            assert KERNEL_NAME.match(name), f"unsafe kernel name {name[:200]!r}"
            adds += name.startswith("Add.")
            for side in ("input_args", "output"):
                for t in entry.get(side) or []:
                    if isinstance(t, dict) and "data_name" in t:
                        dn = t["data_name"]
                        assert "/" not in dn and dn not in (".", "..") and dn in files, dn[:200]
                        assert len(dn) <= 255, dn[:80]
                        if dn in mapped:
                            assert mapped[dn].startswith(name), mapped[dn][:100]
        with open(os.path.join(rank_dir, "stack.json"), encoding="utf-8") as f:
            json.load(f)
    assert adds == len(HOSTILE_SCOPES), f"{adds} Add kernels dumped, {len(HOSTILE_SCOPES)} launched"


ACLOP_HOST = textwrap.dedent('''
    """aclopCompileAndExecute / aclopExecuteV2 with hostile op types, and one real Add; prints every return code."""
    import ctypes, os, sys
    import numpy as np
    from aclop_ctypes import acl, compiler, P, I64, add_operands
    compiler.aclopCompileAndExecute.argtypes = [ctypes.c_char_p, ctypes.c_int, P, P, ctypes.c_int, P, P, P,
                                           ctypes.c_int, ctypes.c_int, ctypes.c_char_p, P]
    acl.aclopExecuteV2.argtypes = [ctypes.c_char_p, ctypes.c_int, P, P, ctypes.c_int, P, P, P, P]
    print("init", acl.aclInit(None), acl.aclrtSetDevice(0))
    stream = P()
    print("stream", acl.aclrtCreateStream(ctypes.byref(stream)))
    n = 4
    x, y, z, dims, descs, ins, outs = add_operands(n)
    attr = acl.aclopCreateAttr()
    op_types = [b"Add", b"../../x", b"/tmp/x", b"..", b"x" * 10240, bytes(range(1, 256)), b"%n%s%n", b"Add/../../y"]
    for t in op_types:
        rc1 = compiler.aclopCompileAndExecute(t, 2, descs(2), ins, 1, descs(1), outs, attr, 0, 0, None, stream)
        rc2 = acl.aclopExecuteV2(t, 2, descs(2), ins, 1, descs(1), outs, attr, stream)
        print(t[:16], rc1, rc2, acl.aclrtSynchronizeStream(stream))
    out = np.zeros(n, np.float32)
    acl.aclrtMemcpy(out.ctypes.data, out.nbytes, z, out.nbytes, 2)
    print("z", out.tolist())
''')


def test_hostile_aclop_op_types_pass_through_and_stay_inside_the_dump(tmp_path):
    host = tmp_path / "aclop_host.py"
    host.write_text(ACLOP_HOST)
    plain = run([PYTHON, str(host)], clean_env(), cwd=str(tmp_path))
    assert plain.returncode == 0, describe(plain)
    assert b"z [1.0, 2.0, 3.0, 4.0]" in plain.stdout, describe(plain)
    dump = tmp_path / "work" / "dump"
    (tmp_path / "work").mkdir()
    before = snapshot(tmp_path)
    p = run([PYTHON, str(host)], dict(with_shim(clean_env()), MSPROBE_DUMP_PATH=str(dump), MSPROBE_TASK="tensor"),
            cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout == plain.stdout, describe(p)  # every return code as without the shim
    after = snapshot(tmp_path)
    outside = [k for k in after if k not in before and k != str(dump) and not k.startswith(str(dump) + os.sep)]
    assert not outside, f"created outside the dump directory: {outside}"
    names = [n for d in dump_dirs(dump).values() for n in load_dump(d)["data"]]
    assert names and all(KERNEL_NAME.match(n) for n in names), names
    assert any(n.startswith("Add.") for n in names), names  # the shim was capturing


# ---- API misuse ---------------------------------------------------------------------------------------------------
MISUSE_HOST = textwrap.dedent('''
    """Wrong uses of the ACL API; prints each return code (and nothing else that could differ between runs)."""
    import ctypes, os
    import numpy as np
    home = os.environ["ASCEND_HOME_PATH"]
    L = lambda n: ctypes.CDLL(os.path.join(home, "lib64", n))
    acl, nn, opapi, hccl = L("libascendcl.so"), L("libnnopbase.so"), L("libopapi.so"), L("libhccl.so")
    P, S, I64, U64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_uint64
    for fn, args in [(acl.aclrtMalloc, [P, S, ctypes.c_int]), (acl.aclrtFree, [P]),
                     (acl.aclrtMemcpy, [P, S, P, S, ctypes.c_int]), (acl.aclrtMemcpyAsync, [P, S, P, S, ctypes.c_int, P]),
                     (acl.aclrtSynchronizeStream, [P]), (acl.aclrtDestroyStream, [P]), (acl.aclrtCreateStream, [P]),
                     (acl.aclrtMemsetAsync, [P, S, ctypes.c_int32, S, P]),
                     (nn.aclCreateTensor, [P, U64, ctypes.c_int, P, I64, ctypes.c_int, P, U64, P]),
                     (nn.aclDestroyTensor, [P]), (nn.aclDestroyAclOpExecutor, [P]),
                     (opapi.aclnnAddGetWorkspaceSize, [P, P, P, P, P]), (opapi.aclnnAdd, [P, U64, P, P]),
                     (hccl.HcclCommDestroy, [P])]:
        fn.argtypes = args
    nn.aclCreateTensor.restype = P
    nn.aclCreateScalar.restype = P
    nn.aclCreateScalar.argtypes = [P, ctypes.c_int]
    def show(what, rc):
        print(what, rc, flush=True)
    show("aclInit", acl.aclInit(None))
    show("aclrtSetDevice", acl.aclrtSetDevice(0))
    show("DestroyStream(NULL)", acl.aclrtDestroyStream(None))
    s = P()
    show("CreateStream", acl.aclrtCreateStream(ctypes.byref(s)))
    show("CreateStream(NULL out)", acl.aclrtCreateStream(None))
    dev = P()
    show("Malloc", acl.aclrtMalloc(ctypes.byref(dev), 64, 0))
    show("Malloc(0)", acl.aclrtMalloc(ctypes.byref(P()), 0, 0))
    show("Malloc(NULL out)", acl.aclrtMalloc(None, 64, 0))
    host = (ctypes.c_float * 16)()
    show("Memcpy count > destMax", acl.aclrtMemcpy(dev, 64, host, 128, 1))
    show("Memcpy bad kind", acl.aclrtMemcpy(dev, 64, host, 64, 99))
    show("Memcpy NULL dst", acl.aclrtMemcpy(None, 64, host, 64, 1))
    show("MemsetAsync too long", acl.aclrtMemsetAsync(dev, 64, 0, 128, s))
    dims = (I64 * 1)(16)
    strides = (I64 * 1)(1)
    t = nn.aclCreateTensor(dims, 1, 0, strides, 0, 2, dims, 1, dev)
    scalar_value = ctypes.c_float(1.0)
    alpha = nn.aclCreateScalar(ctypes.byref(scalar_value), 0)
    ws, ex = U64(), P()
    show("AddGetWorkspaceSize(NULL self)", opapi.aclnnAddGetWorkspaceSize(None, t, alpha, t, ctypes.byref(ws)))
    show("AddGetWorkspaceSize(NULL out)", opapi.aclnnAddGetWorkspaceSize(t, t, alpha, None, ctypes.byref(ws), ctypes.byref(ex)))
    show("aclnnAdd(NULL executor)", opapi.aclnnAdd(None, 0, None, s))
    show("AddGetWorkspaceSize", opapi.aclnnAddGetWorkspaceSize(t, t, alpha, t, ctypes.byref(ws), ctypes.byref(ex)))
    show("aclnnAdd", opapi.aclnnAdd(None, ws.value, ex, s))
    show("aclnnAdd(executor again)", opapi.aclnnAdd(None, ws.value, ex, s))
    show("Synchronize", acl.aclrtSynchronizeStream(s))
    show("DestroyTensor(NULL)", nn.aclDestroyTensor(None))
    show("DestroyExecutor(NULL)", nn.aclDestroyAclOpExecutor(None))
    show("DestroyStream", acl.aclrtDestroyStream(s))
    show("DestroyStream again", acl.aclrtDestroyStream(s))
    show("MemcpyAsync on destroyed stream", acl.aclrtMemcpyAsync(dev, 64, host, 64, 1, s))
    show("AddGetWorkspaceSize 2", opapi.aclnnAddGetWorkspaceSize(t, t, alpha, t, ctypes.byref(ws), ctypes.byref(ex)))
    show("aclnnAdd on destroyed stream", opapi.aclnnAdd(None, ws.value, ex, s))
    show("Synchronize destroyed stream", acl.aclrtSynchronizeStream(s))
    show("Free", acl.aclrtFree(dev))
    show("Free NULL", acl.aclrtFree(None))
    show("HcclCommDestroy(NULL)", hccl.HcclCommDestroy(None))
    show("aclFinalize", acl.aclFinalize())
''')


def test_api_misuse_passes_through_unchanged(tmp_path):
    host = tmp_path / "misuse_host.py"
    host.write_text(MISUSE_HOST)
    plain = run([PYTHON, str(host)], clean_env(), cwd=str(tmp_path))
    assert b"aclFinalize" in plain.stdout, describe(plain)
    for task in ("statistics", "tensor"):
        p = run([PYTHON, str(host)], dict(with_shim(clean_env()), MSPROBE_DUMP_PATH=str(tmp_path / task),
                                           MSPROBE_TASK=task), cwd=str(tmp_path))
        assert (p.returncode, p.stdout) == (plain.returncode, plain.stdout), (
            f"{task}: not as without the shim\n--- without\n{plain.stdout.decode()}\n--- with\n" + describe(p))
    # The misuse really was misuse: the runtime refused most of it.
    codes = [line.rsplit(b" ", 1)[1] for line in plain.stdout.splitlines()]
    assert sum(c != b"0" for c in codes) >= 10, plain.stdout.decode()


# ---- security -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_dump_permissions(tmp_path, baseline, umask):
    """msprobe's rule: folders 0750, files 0640; a stricter umask may only take more away."""
    dump = tmp_path / "dump"

    def set_umask():
        os.umask(umask)

    p = train(tmp_path / "cwd", {"MSPROBE_DUMP_PATH": str(dump), "MSPROBE_TASK": "tensor"}, preexec_fn=set_umask)
    host_unchanged(p, baseline)
    paths = [str(dump)] + list(snapshot(dump))
    assert len(paths) > 10, paths
    wrong = []
    for path in paths:
        st = os.lstat(path)
        want = (0o750 if stat.S_ISDIR(st.st_mode) else 0o640) & ~umask
        assert stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode), path
        if stat.S_IMODE(st.st_mode) != want:
            wrong.append(f"{path}: {oct(stat.S_IMODE(st.st_mode))}, want {oct(want)}")
    assert not wrong, "\n".join(wrong[:20])


SHELL_OUTS = re.compile(r"^(system|popen|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|posix_spawnp?|"
                        r"wordexp|fork|vfork|clone|clone3)$")


def test_no_shell_outs():
    """The shim imports nothing that runs another program (it is a guest in the host's process)."""
    out = subprocess.run(["nm", "-D", "--undefined-only", SHIM], capture_output=True, text=True, check=True).stdout
    imported = [line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()]
    assert imported, out
    bad = [s for s in imported if SHELL_OUTS.match(s)]
    assert not bad, f"libmsprobe_shim.so imports {bad}"
    with open(SHIM, "rb") as f:
        image = f.read()
    assert b"/bin/sh" not in image


PRINTF_FORMAT_ARG = {"printf": 0, "fprintf": 1, "dprintf": 1, "sprintf": 1, "snprintf": 2, "syslog": 1,
                     "log_error": 0, "log_warn": 0, "log_info": 0, "log_debug": 0}


def _args_of_call(text, start):
    """The top-level comma-separated arguments of the call whose '(' is at text[start]."""
    depth, args, cur, i, quote = 0, [], [], start, None
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\":
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur.append(c)
        elif c in "([{":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    return args


def test_every_format_string_is_a_literal():
    """No printf-family call in the shim or the collector takes its format from data (an environment value, a kernel
    name): the format argument of each call is a string literal. Together with the %n values above at run time."""
    call = re.compile(r"(?<![\w.>])(?:std::)?(" + "|".join(PRINTF_FORMAT_ARG) + r")\s*\(")
    bad, seen = [], 0
    sources = sorted(os.path.relpath(os.path.join(dirpath, name), SOURCE)
                     for top in ("shim", "collector", "format", "record")
                     for dirpath, _, names in os.walk(os.path.join(SOURCE, top)) for name in names)
    for path in sources:
        folder, name = os.path.split(path)
        if not name.endswith((".cpp", ".h")):
            continue
        text = open(os.path.join(SOURCE, path), encoding="utf-8").read()
        text = re.sub(r"//[^\n]*", "", text)
        for m in call.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[max(0, m.start() - 40):m.start()]
            if re.search(r"(void|int|bool)\s*$", before):
                continue  # a declaration or definition, not a call
            args = _args_of_call(text, m.end() - 1)
            k = PRINTF_FORMAT_ARG[m.group(1)]
            if len(args) <= k:
                continue
            seen += 1
            if not args[k].startswith('"'):
                bad.append(f"{folder}/{name}:{line}: {m.group(1)}(... {args[k][:60]} ...)")
    assert seen > 10, seen
    assert not bad, "format strings that are not literals:\n" + "\n".join(bad)
