"""torch_npu's executor-cache path (reference/cann_abi.md §6.4) end to end.

- train.py with TINY_NPU_PTA_CACHE=1 (hash keys, hit_cache) or =2 (byte keys, hit_cache_v2) prints the same
  losses and ends with the same parameters, bit for bit, as without it, and the cache really hits.
- Under libmsprobe_shim.so (MSPROBE_TASK=tensor) the cached run's dump equals the uncached run's: same
  kernel names, entries and tensor bytes. On a hit the host calls neither phase 1 nor aclCreateTensor, so
  this holds only if every hit is captured with the addresses reported for it.
- A small host whose every hit uses new buffers with new values, with addresses reported before the lookup
  (torch_npu's order) or after it: each launch's dumped tensors are that launch's values.
"""
import ctypes
import os
import re
import textwrap

import numpy as np
import pytest

import shimtest

STEPS = 3
STATS = re.compile(r"pta cache: (\d+) hits, (\d+) misses")


def pta_env(mode):
    return {"TINY_NPU_PTA_CACHE": mode, "TINY_NPU_PTA_CACHE_STATS": "1"} if mode else {}


def assert_cache_used(run):
    m = STATS.search(run.stderr)
    assert m, f"no cache statistics: the PTA path was not taken\n{run.stderr}"
    hits, misses = int(m.group(1)), int(m.group(2))
    assert hits > misses > 0, f"{hits} hits, {misses} misses"


def assert_same_npz(a, b):
    da, db = np.load(a), np.load(b)
    assert sorted(da.files) == sorted(db.files) and len(da.files) > 5
    for k in da.files:
        assert da[k].tobytes() == db[k].tobytes(), f"{k} differs"


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    """train(label, dtype, mode, shim) -> Run of train.py --steps 3, each configuration once."""
    root = tmp_path_factory.mktemp("pta")
    runs = {}

    def get(dtype="fp32", mode="", shim=False, inline=False):
        key = (dtype, mode, shim, inline)
        if key not in runs:
            work = root / f"{dtype}-{mode or 'plain'}-{'shim' if shim else 'noshim'}{'-inline' if inline else ''}"
            work.mkdir(parents=True, exist_ok=True)
            env = pta_env(mode)
            if inline:
                env["TASK_QUEUE_ENABLE"] = "0"  # phase 2 on the thread that looked the executor up
            runs[key] = shimtest.run_train(work, "--steps", str(STEPS), "--dtype", dtype, "--dump",
                                           str(work / "params.npz"), shim=shim, task="tensor" if shim else None,
                                           env=env)
        return runs[key]
    return get


def npz(run):
    return os.path.join(run.workdir, "params.npz")


# ---- the framework ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,mode", [("fp32", "1"), ("bf16", "1"), ("fp32", "2")])
def test_losses_and_parameters_are_bit_identical(train, dtype, mode):
    plain, cached = train(dtype), train(dtype, mode)
    assert_cache_used(cached)
    assert cached.losses() == plain.losses()
    assert_same_npz(npz(cached), npz(plain))
    # Every kernel still launched exactly once per op call.
    assert cached.launches() == plain.launches()


def test_missing_helpers_mean_the_normal_path():
    """A runtime without the helpers (dlsym finds none on the handle): PtaCache is unavailable."""
    from tiny_npu import ops

    class Libs:
        opapi = ctypes.CDLL("libc.so.6")

    class Rt:
        libs = Libs()

    assert not ops.PtaCache(Rt()).available
    assert not ops.PtaCache(Rt(), bytes_key=True).available


# ---- under the shim --------------------------------------------------------------------------------------
def same(a, b):
    """JSON equality where NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def differences(a, b, path=""):
    """Paths where two JSON values differ (NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path} keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path} length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if same(a, b) else [f"{path}: {a!r} != {b!r}"]


def assert_same_dump(got, want):
    problems = []
    assert got.names_by_folder() == want.names_by_folder(), "kernel names differ"
    for g in got.folders():
        w = want.folder(g.step, g.rank)
        for name in sorted(g.names()):
            diff = differences(shimtest.entry_without_time(g.data[name]), shimtest.entry_without_time(w.data[name]))
            if diff:
                problems.append(f"step {g.step} {name}: {'; '.join(diff[:4])}")
        if g.files() != w.files():
            problems.append(f"step {g.step}: tensor files differ: {sorted(set(g.files()) ^ set(w.files()))[:5]}")
            continue
        for f in g.files():
            with open(g.file_path(f), "rb") as a, open(w.file_path(f), "rb") as b:
                if a.read() != b.read():
                    problems.append(f"step {g.step}: {f} differs")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:10])


@pytest.mark.parametrize("dtype,mode,inline", [("fp32", "1", False), ("bf16", "1", False), ("fp32", "2", False),
                                               ("fp32", "1", True)])
def test_cached_run_dumps_like_the_uncached_run(train, dtype, mode, inline):
    base, cached = train(dtype, shim=True), train(dtype, mode, shim=True, inline=inline)
    assert_cache_used(cached)
    assert cached.losses() == base.losses() == train(dtype).losses()
    assert cached.launches() == base.launches()
    assert sum(cached.dump.op_counts().values()) == sum(cached.launches().values())
    assert_same_dump(cached.dump, base.dump)


# ---- every hit with its own buffers -------------------------------------------------------------------------
HOST = textwrap.dedent(r"""
    import ctypes, sys
    import numpy as np
    import tiny_npu
    from tiny_npu import acl, ops
    from tiny_npu.tensor import Tensor

    ORDER = sys.argv[1]  # "framework": tiny_npu's torch_npu path; "before"/"after": by hand
    rt = tiny_npu.init(0)
    rng = np.random.RandomState(0)
    keep = []  # every buffer stays alive: each call gets its own addresses
    values = []
    if ORDER == "framework":
        for i in range(4):
            x, y = rng.randn(3, 5).astype(np.float32), rng.randn(3, 5).astype(np.float32)
            tx, ty = Tensor.from_numpy(x), Tensor.from_numpy(y)
            out = ops.add(tx, ty, alpha=0.5)
            keep += [tx, ty, out]
            values.append((x, y))
    else:
        lib = rt.libs.opapi
        P, U64 = ctypes.c_void_p, ctypes.c_uint64
        for name, res, args in [("CanUsePTACache", ctypes.c_bool, [ctypes.c_char_p]),
                                ("InitPTACacheThreadLocal", None, []), ("UnInitPTACacheThreadLocal", None, []),
                                ("AddTensorAddrToCachedList", None, [P]), ("SetPTAHashKey", None, [U64]),
                                ("PTAGetExecCache", P, [U64, P])]:
            getattr(lib, name).restype, getattr(lib, name).argtypes = res, args
        op = ops._op(rt, "Add")
        for i in range(4):
            x, y = rng.randn(3, 5).astype(np.float32), rng.randn(3, 5).astype(np.float32)
            tx, ty, out = Tensor.from_numpy(x), Tensor.from_numpy(y), Tensor.empty((3, 5))
            keep += [tx, ty, out]
            values.append((x, y))
            args = (tx, ty, 0.5, out)
            assert lib.CanUsePTACache(b"aclnnAdd")
            lib.InitPTACacheThreadLocal()
            report = lambda: [lib.AddTensorAddrToCachedList(t.storage.ptr) for t in (tx, ty, out)]
            if ORDER == "before":
                report()
            lib.SetPTAHashKey(0x1234)
            ws = ctypes.c_uint64(0)
            ex = lib.PTAGetExecCache(0x1234, ctypes.byref(ws))
            assert bool(ex) == (i > 0), (i, ex)
            if ex:
                if ORDER == "after":
                    report()
                ops._launch(rt, op, ws.value, ex, [])
            else:
                ops._run_uncached(rt, op, args)
            lib.UnInitPTACacheThreadLocal()
    rt.synchronize()
    np.savez("values.npz", **{f"x{i}": x for i, (x, _) in enumerate(values)},
             **{f"y{i}": y for i, (_, y) in enumerate(values)})
    print("ok")
""")


@pytest.mark.parametrize("order", ["framework", "before", "after"])
def test_each_hit_is_captured_with_its_own_tensors(tmp_path, order):
    script = tmp_path / "host.py"
    script.write_text(HOST)
    r = shimtest.run([shimtest.PYTHON, script, order], tmp_path / "run",
                     env={"MSPROBE_TASK": "tensor", "TINY_NPU_PTA_CACHE": "1", "TINY_NPU_PTA_CACHE_STATS": "1"})
    r.check()
    if order == "framework":
        m = STATS.search(r.stderr)
        assert m and m.groups() == ("3", "1"), r.stderr
    assert r.launches() == {"Add": 4}
    values = np.load(os.path.join(r.workdir, "values.npz"))
    kernels = sorted(((f, n, e) for f, n, e in r.dump.kernels()), key=lambda k: shimtest.ordinal(k[1]))
    # One OpType.OpName (every call has the same Python scope), numbered 0..3.
    assert len({shimtest.base_name(n) for _, n, _ in kernels}) == 1, kernels
    assert [(shimtest.op_type(n), shimtest.ordinal(n)) for _, n, _ in kernels] == [("Add", i) for i in range(4)]
    for i, (folder, name, entry) in enumerate(kernels):
        x, y = values[f"x{i}"], values[f"y{i}"]
        args = entry["input_args"]
        assert len(args) == 3 and args[2] == {"type": "float", "value": 0.5}, args
        np.testing.assert_array_equal(folder.load(args[0]), x, err_msg=f"{name} self")
        np.testing.assert_array_equal(folder.load(args[1]), y, err_msg=f"{name} other")
        want = (x.astype(np.float64) + 0.5 * y.astype(np.float64)).astype(np.float32)
        (out,) = entry["output"]
        np.testing.assert_array_equal(folder.load(out), want, err_msg=f"{name} out")
