"""libnnopbase's executor cache for torch_npu (reference/cann_abi.md §6.4), driven from ctypes the way
op-plugin's hit_cache / hit_cache_v2 drive it: helpers found by dlsym on the libopapi handle, the storage
address of every tensor argument reported with AddTensorAddrToCachedList, a key set, a lookup; a miss runs
phase 1 (which the runtime caches under the key) and phase 2; a hit runs phase 2 only, with an executor
the runtime hands out for that hit. Results are checked against numpy.
"""
import ctypes
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from tiny_npu import acl

INVALID = 161002
HELPERS = ["InitHugeMemThreadLocal", "UnInitHugeMemThreadLocal", "ReleaseHugeMem", "PTAGetExecCache",
           "PTAFindExecCache", "InitPTACacheThreadLocal", "UnInitPTACacheThreadLocal", "SetPTAHashKey",
           "SetPTACacheHashKey", "CanUsePTACache", "AddTensorAddrToCachedList"]
P, B, U64, S = ctypes.c_void_p, ctypes.c_bool, ctypes.c_uint64, ctypes.c_size_t


class Pta:
    """The helpers with their C signatures (cann_abi.md §6.4), from dlsym on `lib`."""

    SIGNATURES = {
        "InitHugeMemThreadLocal": (ctypes.c_int, [P, B]), "UnInitHugeMemThreadLocal": (None, [P, B]),
        "ReleaseHugeMem": (None, [P, B]), "PTAGetExecCache": (P, [U64, P]), "PTAFindExecCache": (P, [P, S, P]),
        "InitPTACacheThreadLocal": (None, []), "UnInitPTACacheThreadLocal": (None, []),
        "SetPTAHashKey": (None, [U64]), "SetPTACacheHashKey": (None, [P, S]), "CanUsePTACache": (B, [ctypes.c_char_p]),
        "AddTensorAddrToCachedList": (None, [P]),
    }

    def __init__(self, lib):
        for name, (res, args) in self.SIGNATURES.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
            setattr(self, name, f)

    def get(self, h):
        ws = ctypes.c_uint64(12345)
        ex = self.PTAGetExecCache(h, ctypes.byref(ws))
        return ex, ws.value

    def find(self, key):
        buf = ctypes.create_string_buffer(key, len(key))
        ws = ctypes.c_uint64(12345)
        ex = self.PTAFindExecCache(buf, len(key), ctypes.byref(ws))
        return ex, ws.value


class Device:
    """One device and stream; float32 device buffers and aclTensors over them."""

    def __init__(self):
        self.libs = acl.Libraries()
        self.a, self.n = self.libs.ascendcl, self.libs.nnopbase
        assert self.a.aclInit(None) in (0, 100002)
        acl.check(self.a.aclrtSetDevice(0), "aclrtSetDevice")
        s = ctypes.c_void_p()
        acl.check(self.a.aclrtCreateStream(ctypes.byref(s)), "aclrtCreateStream")
        self.stream = s.value
        self.pta = Pta(self.libs.opapi)  # op-plugin's GetOpApiFuncAddr: the libopapi handle
        self.ops = {}
        self.buffers = []

    def op(self, name, sig):
        if name not in self.ops:
            self.ops[name] = acl.AclnnOp(self.libs, name, sig)
        return self.ops[name]

    def put(self, values):
        v = np.ascontiguousarray(values, dtype=np.float32)
        p = ctypes.c_void_p()
        acl.check(self.a.aclrtMalloc(ctypes.byref(p), max(v.nbytes, 1), 0), "aclrtMalloc")
        self.buffers.append(p.value)
        acl.check(self.a.aclrtMemcpy(p.value, v.nbytes, v.ctypes.data, v.nbytes, acl.MEMCPY_H2D), "H2D")
        return p.value

    def get(self, ptr, n):
        out = np.empty(n, dtype=np.float32)
        acl.check(self.a.aclrtSynchronizeStream(self.stream), "aclrtSynchronizeStream")
        acl.check(self.a.aclrtMemcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, acl.MEMCPY_D2H), "D2H")
        return out

    def tensor(self, ptr, shape, storage):
        shape = tuple(shape)
        nd = len(shape)
        strides = [int(np.prod(shape[i + 1:])) for i in range(nd)]
        dims, st = (ctypes.c_int64 * max(nd, 1))(*shape), (ctypes.c_int64 * max(nd, 1))(*strides)
        h = self.n.aclCreateTensor(dims, nd, acl.FLOAT, st, 0, acl.FORMAT_ND, (ctypes.c_int64 * 1)(storage), 1, ptr)
        assert h
        return h

    def scalar(self, value):
        v = ctypes.c_double(value)
        h = self.n.aclCreateScalar(ctypes.byref(v), acl.DOUBLE)
        assert h
        return h

    def phase2(self, op, ex, ws):
        workspace = None
        if ws:
            workspace = self.put(np.zeros((ws + 3) // 4))
        return op.phase2(workspace, ws, ex, self.stream)

    def message(self):
        self.a.aclGetRecentErrMsg.restype = ctypes.c_char_p
        m = self.a.aclGetRecentErrMsg()
        return m.decode() if m else ""


@pytest.fixture(scope="module")
def dev():
    d = Device()
    yield d
    for p in d.buffers:
        d.a.aclrtFree(p)


_next_key = [1000]


def new_hash():
    _next_key[0] += 1
    return 0x9E3779B97F4A7C15 ^ _next_key[0]


class AddCall:
    """aclnnAdd(self, other, alpha, out) of n floats, torch_npu style, on fresh buffers."""

    def __init__(self, dev, n=6, alpha=2.0, seed=0):
        rng = np.random.RandomState(seed)
        self.dev, self.n, self.alpha = dev, n, alpha
        self.x, self.y = rng.randn(n).astype(np.float32), rng.randn(n).astype(np.float32)
        self.px, self.py, self.po = dev.put(self.x), dev.put(self.y), dev.put(np.full(n, np.nan, np.float32))
        self.op = dev.op("Add", "TTTT")

    @property
    def addrs(self):
        return [self.px, self.py, self.po]

    def report(self):
        for a in self.addrs:
            self.dev.pta.AddTensorAddrToCachedList(a)

    def phase1(self):
        d = self.dev
        hs = [d.tensor(self.px, (self.n,), self.n), d.tensor(self.py, (self.n,), self.n),
              d.scalar(self.alpha), d.tensor(self.po, (self.n,), self.n)]
        ws, ex = self.op.prepare(*hs)
        self.handles = hs
        return ws, ex

    def release(self):
        d = self.dev
        d.n.aclDestroyTensor(self.handles[0])
        d.n.aclDestroyTensor(self.handles[1])
        d.n.aclDestroyScalar(self.handles[2])
        d.n.aclDestroyTensor(self.handles[3])

    def out(self):
        return self.dev.get(self.po, self.n)


def want_add(c):
    """The kernel computes in double and rounds once to float32."""
    return (c.x.astype(np.float64) + c.alpha * c.y.astype(np.float64)).astype(np.float32)


def miss_then_cache(dev, call, h=None, key=None, api=b"aclnnAdd"):
    """hit_cache's miss path: lookup misses, phase 1 + phase 2 run and store the executor under the key."""
    p = dev.pta
    assert p.CanUsePTACache(api)
    p.InitPTACacheThreadLocal()
    call.report()
    if key is not None:
        buf = ctypes.create_string_buffer(key, len(key))
        p.SetPTACacheHashKey(buf, len(key))
        assert p.find(key)[0] is None
    else:
        p.SetPTAHashKey(h)
        assert p.get(h)[0] is None
    ws, ex = call.phase1()
    assert dev.phase2(call.op, ex, ws) == 0
    p.UnInitPTACacheThreadLocal()
    call.release()
    np.testing.assert_array_equal(call.out(), want_add(call))
    return ex


def hit(dev, call, h=None, key=None, report="before", api=b"aclnnAdd"):
    """hit_cache's hit path: addresses reported (before or after the lookup), phase 2 only."""
    p = dev.pta
    assert p.CanUsePTACache(api)
    p.InitPTACacheThreadLocal()
    if report == "before":
        call.report()
    if key is not None:
        buf = ctypes.create_string_buffer(key, len(key))
        p.SetPTACacheHashKey(buf, len(key))
        ex, ws = p.find(key)
    else:
        p.SetPTAHashKey(h)
        ex, ws = p.get(h)
    if ex and report == "after":
        call.report()
    rc = dev.phase2(call.op, ex, ws) if ex else None
    p.UnInitPTACacheThreadLocal()
    return ex, ws, rc


# ---- the helpers ------------------------------------------------------------------------------------------
def test_helpers_are_exported_by_nnopbase_and_found_through_opapi(dev):
    for name in HELPERS:
        assert getattr(dev.libs.nnopbase, name)  # defined there
        assert getattr(dev.libs.opapi, name)     # and reachable from the libopapi handle, as op-plugin looks
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(dev.libs.lib64, "libnnopbase.so")],
                         capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert set(HELPERS) <= exported
    assert not [n for n in exported if n.startswith("_ZN") and "PTA" in n], "helpers must be extern \"C\""


def test_huge_mem_helpers_are_harmless(dev):
    p = dev.pta
    assert p.InitHugeMemThreadLocal(None, False) == 0
    p.ReleaseHugeMem(None, False)
    p.UnInitHugeMemThreadLocal(None, False)


# ---- hits -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("report", ["before", "after"])
def test_hash_hit_runs_the_cached_executor_on_the_reported_addresses(dev, report):
    h = new_hash()
    first = AddCall(dev, seed=1)
    ex1 = miss_then_cache(dev, first, h=h)
    # The phase-1 executor was freed by its phase 2, as for any one-shot executor.
    assert first.op.phase2(None, 0, ex1, dev.stream) == INVALID
    for seed in (2, 3):
        now = AddCall(dev, seed=seed)
        ex, ws, rc = hit(dev, now, h=h, report=report)
        assert ex, "the lookup missed"
        assert ws == 0 and rc == 0, dev.message()
        np.testing.assert_array_equal(now.out(), want_add(now))
        # The hit's executor is one-shot too.
        assert now.op.phase2(None, 0, ex, dev.stream) == INVALID
    # The first call's output was not written again.
    np.testing.assert_array_equal(first.out(), want_add(first))


def test_bytes_key_hit_and_key_copied_at_set(dev):
    key = b"aclnnAdd|6|float32|" + os.urandom(8)
    first = AddCall(dev, seed=4)
    p = dev.pta
    assert p.CanUsePTACache(b"aclnnAdd")
    p.InitPTACacheThreadLocal()
    first.report()
    buf = ctypes.create_string_buffer(key, len(key))
    p.SetPTACacheHashKey(buf, len(key))
    ctypes.memset(buf, 0, len(key))  # the host reuses its hash buffer: the runtime must have copied the key
    assert p.find(key)[0] is None
    ws, ex = first.phase1()
    assert dev.phase2(first.op, ex, ws) == 0
    p.UnInitPTACacheThreadLocal()
    first.release()
    now = AddCall(dev, seed=5)
    ex, _, rc = hit(dev, now, key=key)
    assert ex and rc == 0, dev.message()
    np.testing.assert_array_equal(now.out(), want_add(now))
    assert p.find(key[:-1])[0] is None  # a different key


def test_absent_optional_tensors_take_no_address_and_lists_one_per_member(dev):
    """LayerNorm(input, shape, weight=NULL, bias=NULL, eps, out, mean=NULL, rstd=NULL): 2 addresses;
    Cat([a, b], 0, out): 3 addresses (list members one by one)."""
    p = dev.pta
    ln = dev.op("LayerNorm", "TTTTDTTT")
    cat = dev.op("Cat", "TLT")
    rng = np.random.RandomState(7)
    h_ln, h_cat = new_hash(), new_hash()

    def layer_norm(x, cached):
        px, po = dev.put(x), dev.put(np.full(x.size, np.nan, np.float32))
        assert p.CanUsePTACache(b"aclnnLayerNorm")
        p.InitPTACacheThreadLocal()
        p.AddTensorAddrToCachedList(px)
        p.AddTensorAddrToCachedList(po)
        p.SetPTAHashKey(h_ln)
        ex, ws = p.get(h_ln)
        assert bool(ex) == cached
        if not ex:
            shape = (ctypes.c_int64 * 1)(4)
            ia = dev.n.aclCreateIntArray(shape, 1)
            ws, ex = ln.prepare(dev.tensor(px, (3, 4), 12), ia, None, None, 1e-5, dev.tensor(po, (3, 4), 12),
                                None, None)
        assert dev.phase2(ln, ex, ws) == 0, dev.message()
        p.UnInitPTACacheThreadLocal()
        x64 = x.reshape(3, 4).astype(np.float64)
        want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(dev.get(po, 12).reshape(3, 4), want, rtol=2e-6, atol=2e-6)

    def concat(a, b, cached):
        pa, pb, po = dev.put(a), dev.put(b), dev.put(np.full(a.size + b.size, np.nan, np.float32))
        assert p.CanUsePTACache(b"aclnnCat")
        p.InitPTACacheThreadLocal()
        for addr in (pa, pb, po):
            p.AddTensorAddrToCachedList(addr)
        p.SetPTAHashKey(h_cat)
        ex, ws = p.get(h_cat)
        assert bool(ex) == cached
        if not ex:
            members = (ctypes.c_void_p * 2)(dev.tensor(pa, (2, 3), 6), dev.tensor(pb, (1, 3), 3))
            lst = dev.n.aclCreateTensorList(members, 2)
            ws, ex = cat.prepare(lst, 0, dev.tensor(po, (3, 3), 9))
        assert dev.phase2(cat, ex, ws) == 0, dev.message()
        p.UnInitPTACacheThreadLocal()
        np.testing.assert_array_equal(dev.get(po, 9).reshape(3, 3), np.concatenate([a, b]))

    for cached in (False, True, True):
        layer_norm(rng.randn(12).astype(np.float32), cached)
        concat(rng.randn(2, 3).astype(np.float32), rng.randn(1, 3).astype(np.float32), cached)


def test_wrong_number_of_addresses_fails_phase2(dev):
    h = new_hash()
    miss_then_cache(dev, AddCall(dev, seed=8), h=h)
    now = AddCall(dev, seed=9)
    p = dev.pta
    assert p.CanUsePTACache(b"aclnnAdd")
    p.InitPTACacheThreadLocal()
    p.AddTensorAddrToCachedList(now.px)  # two of three
    p.AddTensorAddrToCachedList(now.py)
    p.SetPTAHashKey(h)
    ex, ws = p.get(h)
    assert ex
    assert dev.phase2(now.op, ex, ws) == INVALID
    assert "AddTensorAddrToCachedList" in dev.message()
    p.UnInitPTACacheThreadLocal()
    assert np.isnan(now.out()).all()  # nothing ran


# ---- when nothing is cached -------------------------------------------------------------------------------
def test_no_key_or_no_lookup_caches_nothing(dev):
    p = dev.pta
    h = new_hash()
    # A key set outside Init/UnInit: phase 1 is not cached.
    p.SetPTAHashKey(h)
    c = AddCall(dev, seed=10)
    ws, ex = c.phase1()
    assert dev.phase2(c.op, ex, ws) == 0
    c.release()
    p.InitPTACacheThreadLocal()
    assert p.get(h)[0] is None
    # Inside a lookup but without a key: nothing to store under.
    c = AddCall(dev, seed=11)
    ws, ex = c.phase1()
    assert dev.phase2(c.op, ex, ws) == 0
    p.UnInitPTACacheThreadLocal()
    c.release()
    assert p.get(h)[0] is None and p.get(0)[0] is None


def test_entry_is_usable_only_after_its_first_phase2(dev):
    p = dev.pta
    h = new_hash()
    c = AddCall(dev, seed=12)
    assert p.CanUsePTACache(b"aclnnAdd")
    p.InitPTACacheThreadLocal()
    p.SetPTAHashKey(h)
    ws, ex = c.phase1()
    assert p.get(h)[0] is None  # stored, not yet launched
    assert dev.phase2(c.op, ex, ws) == 0
    p.UnInitPTACacheThreadLocal()
    c.release()
    now = AddCall(dev, seed=13)
    ex, _, rc = hit(dev, now, h=h)
    assert ex and rc == 0
    np.testing.assert_array_equal(now.out(), want_add(now))


def test_one_executor_per_key(dev):
    """The key names the first phase 1 after it was set; a second phase 1 in the same lookup is not cached."""
    p = dev.pta
    h = new_hash()
    a, b = AddCall(dev, n=6, seed=14), AddCall(dev, n=5, seed=15)
    assert p.CanUsePTACache(b"aclnnAdd")
    p.InitPTACacheThreadLocal()
    p.SetPTAHashKey(h)
    for c in (a, b):
        ws, ex = c.phase1()
        assert dev.phase2(c.op, ex, ws) == 0
        c.release()
    p.UnInitPTACacheThreadLocal()
    now = AddCall(dev, n=6, seed=16)
    ex, _, rc = hit(dev, now, h=h)
    assert ex and rc == 0, dev.message()
    np.testing.assert_array_equal(now.out(), want_add(now))


def test_another_api_under_the_same_key_misses(dev):
    h = new_hash()
    miss_then_cache(dev, AddCall(dev, seed=17), h=h)
    p = dev.pta
    assert p.CanUsePTACache(b"aclnnMul")
    p.InitPTACacheThreadLocal()
    p.SetPTAHashKey(h)
    assert p.get(h)[0] is None
    p.UnInitPTACacheThreadLocal()
    assert p.CanUsePTACache(b"aclnnAdd")
    ex = p.get(h)[0]
    assert ex  # still there for its own api (lookups need no Init)
    assert dev.n.aclDestroyAclOpExecutor(ex) == 0  # never launched: the host frees it


def test_each_thread_has_its_own_cache(dev):
    h = new_hash()
    miss_then_cache(dev, AddCall(dev, seed=18), h=h)
    seen = {}

    def other():
        p = dev.pta
        seen["can"] = p.CanUsePTACache(b"aclnnAdd")
        seen["ex"] = p.get(h)[0]

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"can": True, "ex": None}
    now = AddCall(dev, seed=19)
    ex, _, rc = hit(dev, now, h=h)
    assert ex and rc == 0


def test_bad_arguments_are_refused_without_crashing(dev):
    p = dev.pta
    h = new_hash()
    miss_then_cache(dev, AddCall(dev, seed=20), h=h)
    assert p.PTAGetExecCache(h, None) is None
    assert p.PTAFindExecCache(None, 0, None) is None
    ws = ctypes.c_uint64(0)
    assert p.PTAFindExecCache(None, 5, ctypes.byref(ws)) is None
    assert not p.CanUsePTACache(None)
    p.SetPTACacheHashKey(None, 0)
    p.AddTensorAddrToCachedList(None)
    p.InitPTACacheThreadLocal()
    p.UnInitPTACacheThreadLocal()


# ---- environment (read once per process: run in a child) ----------------------------------------------
CHILD = r"""
import sys
sys.path[:0] = {paths!r}
import test_pta_cache as t
t.{fn}(t.Device())
print("ok")
"""


def in_child(fn, **env):
    here = os.path.dirname(os.path.abspath(__file__))
    e = dict(os.environ)
    e.pop("DISABLE_L2_CACHE", None)
    e.pop("ACLNN_CACHE_LIMIT", None)
    e.update(env)
    p = subprocess.run([sys.executable, "-c", CHILD.format(paths=[here] + sys.path, fn=fn)], env=e,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def child_disabled(dev):
    p = dev.pta
    assert not p.CanUsePTACache(b"aclnnAdd")
    # A host that goes on regardless gets nothing cached.
    h = new_hash()
    c = AddCall(dev, seed=30)
    p.InitPTACacheThreadLocal()
    c.report()
    p.SetPTAHashKey(h)
    assert p.get(h)[0] is None
    ws, ex = c.phase1()
    assert dev.phase2(c.op, ex, ws) == 0
    p.UnInitPTACacheThreadLocal()
    np.testing.assert_array_equal(c.out(), want_add(c))
    p.InitPTACacheThreadLocal()
    p.SetPTAHashKey(h)
    assert p.get(h)[0] is None


@pytest.mark.parametrize("value", ["1", ""])
def test_disable_l2_cache_turns_the_cache_off(value):
    in_child("child_disabled", DISABLE_L2_CACHE=value)  # set, whatever its value


def child_limit_one(dev):
    # Hash keys: the second executor finds the cache full and is not cached; the first stays.
    h1, h2 = new_hash(), new_hash()
    miss_then_cache(dev, AddCall(dev, seed=31), h=h1)
    miss_then_cache(dev, AddCall(dev, seed=32), h=h2)
    assert hit(dev, AddCall(dev, seed=33), h=h2)[0] is None
    ex, _, rc = hit(dev, AddCall(dev, seed=34), h=h1)
    assert ex and rc == 0
    # Byte keys: the least recently used entry makes room.
    k1, k2 = b"first key", b"second key"
    miss_then_cache(dev, AddCall(dev, seed=35), key=k1)
    miss_then_cache(dev, AddCall(dev, seed=36), key=k2)
    assert hit(dev, AddCall(dev, seed=37), key=k1)[0] is None
    ex, _, rc = hit(dev, AddCall(dev, seed=38), key=k2)
    assert ex and rc == 0


def test_aclnn_cache_limit_bounds_the_cache():
    in_child("child_limit_one", ACLNN_CACHE_LIMIT="1")


def child_limit_zero(dev):
    h = new_hash()
    miss_then_cache(dev, AddCall(dev, seed=40), h=h)
    miss_then_cache(dev, AddCall(dev, seed=41), key=b"k")
    assert hit(dev, AddCall(dev, seed=42), h=h)[0] is None
    assert hit(dev, AddCall(dev, seed=43), key=b"k")[0] is None


def test_aclnn_cache_limit_zero_caches_nothing():
    in_child("child_limit_zero", ACLNN_CACHE_LIMIT="0")
