"""aclnn op dispatch, the way torch_npu's EXEC_NPU_CMD does it, plus the functional ops.

`_run(name, *args)`: on the calling thread, convert the arguments (aclCreateTensor with torch_npu's
conventions, aclCreateScalar/IntArray/BoolArray/TensorList), call aclnnXGetWorkspaceSize (found by
dlsym on libopapi) and allocate the workspace; then queue phase 2 and the aclDestroy* of the
converted arguments on the native launch thread.

Kernel names carry the Python scope of the launch (the capture shim's OpName: the qualnames of the calling
frames, leaving out private `_x` functions and special methods, docs/stacks.md). The dispatch machinery here
is therefore private (`_run`, `_phase1`...), as torch_npu's is native code: a kernel launched by
`Linear.forward` through `matmul` is named after `...TinyModel.forward/Linear.forward/matmul`.

With TINY_NPU_EXECUTOR_CACHE=1 ops reuse repeatable executors as MindSpore's aclnn kernels do: a miss
runs phase 1 and aclSetAclOpExecutorRepeatable; a hit skips phase 1 and queues aclSetTensorAddr for
every tensor parameter followed by phase 2. Cached executors are destroyed on eviction and at exit.

With TINY_NPU_PTA_CACHE=1 ops take torch_npu's executor-cache path (op-plugin's hit_cache, reference
cann_abi.md §6.4) when libnnopbase exports its helpers: CanUsePTACache, InitPTACacheThreadLocal, the
storage address of every tensor argument reported with AddTensorAddrToCachedList while the arguments are
hashed, SetPTAHashKey + PTAGetExecCache. A hit skips conversion and phase 1 and queues phase 2 of the
executor the runtime returned; a miss runs the normal path, whose phase 1 the runtime caches under the key.
TINY_NPU_PTA_CACHE=2 keys by bytes instead (hit_cache_v2: SetPTACacheHashKey + PTAFindExecCache).
TINY_NPU_PTA_CACHE_STATS=1 prints "pta cache: H hits, M misses" on stderr at exit.
"""
import atexit
import collections
import ctypes
import hashlib
import os
import sys

import numpy as np

from . import acl
from . import runtime as _rt
from .runtime import TNQ_PHASE2, TNQ_RELEASE, TNQ_SET_ADDR, TNQ_SET_DYN_ADDR
from .tensor import Tensor, torch_format

# Phase-1 parameters of every op used here, in CANN 8.1.RC1 declaration order (aclnnop/*.h):
#   T aclTensor*  L aclTensorList*  S aclScalar*  I aclIntArray*  A aclBoolArray*
#   d double  f float  l int64_t  c int8_t  b bool  e aclDataType  u uint64_t  s char * (a str)
SIGNATURES = {
    "Add": "TTST", "Adds": "TSST", "InplaceAdd": "TTS", "Sub": "TTST", "Mul": "TTT", "Muls": "TST",
    "Div": "TTT", "Matmul": "TTTc", "Mm": "TTTc", "BatchMatMul": "TTTc",
    "Relu": "TT", "Gelu": "TT", "Silu": "TT", "Exp": "TT", "Log": "TT", "Sqrt": "TT", "Neg": "TT",
    "Softmax": "TlT", "LogSoftmax": "TlT", "LayerNorm": "TITTdTTT", "RmsNorm": "TTdTT", "Cast": "TeT",
    "Cat": "LlT", "Permute": "TIT", "Embedding": "TTT", "ReduceSum": "TIbeT", "Mean": "TIbeT",
    "MseLoss": "TTlT", "InplaceCopy": "TT", "InplaceZero": "T", "ApplyAdamWV2": "TTTTTTfffffbb",
    "GeluBackward": "TTT", "SoftmaxBackward": "TTlT", "LayerNormBackward": "TTITTTTATTT",
    "EmbeddingDenseBackward": "TTuubT", "MseLossBackward": "TTTlT", "SiluBackward": "TTT",
    "ThresholdBackward": "TTST",
    "Amax": "TIbT", "Amin": "TIbT", "AminmaxAll": "TTT", "Norm": "TSIbT", "LinalgVectorNorm": "TSIbeT",
    "ForeachNorm": "LSL",
    "IsFinite": "TT", "IsPosInf": "TT", "IsNegInf": "TT",
    # The transformer, MoE and MC2 ops of llm_train.py (CANN's ops-transformer / ops-nn prototypes).
    "FlashAttentionScore": "TTTTTTTIddlllsllTTTT", "FlashAttentionScoreGrad": "TTTTTTTTTTTTIddlllsllTTTT",
    "RotaryPositionEmbedding": "TTTlT", "RotaryPositionEmbeddingGrad": "TTTTlTTT",
    "SwiGlu": "TlT", "SwiGluGrad": "TTlT", "RmsNormGrad": "TTTTTT",
    "LogSoftmaxBackward": "TTlT", "NLLLoss": "TTTllTT", "NLLLossBackward": "TTTTllTT",
    "MoeGatingTopKSoftmaxV2": "TTllbTTT", "MoeInitRoutingV2": "TTlllllbTTTT", "MoeInitRoutingV2Grad": "TTlllT",
    "MoeFinalizeRoutingV2": "TTTTTTTlT", "MoeFinalizeRoutingV2Grad": "TTTTTTllllTT",
    "GroupedMatmulV5": "LLLLLLLLTLLLllllILLL",
    "MatmulAllReduce": "TTTssllT", "AllGatherMatmul": "TTTslllTT", "MatmulReduceScatter": "TTTssllT",
}
_ACL_LETTER = {"T": "T", "L": "T", "S": "T", "I": "T", "A": "T", "d": "D", "f": "F", "l": "L", "c": "C",
               "b": "B", "e": "E", "u": "U", "s": "Z"}
_BY_VALUE_CTYPE = {"d": ctypes.c_double, "f": ctypes.c_float, "l": ctypes.c_int64, "c": ctypes.c_int8,
                   "b": ctypes.c_bool, "e": ctypes.c_int, "u": ctypes.c_uint64}

REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2
KEEP_DTYPE = 0  # cubeMathType


class IntArray(tuple):
    pass


class BoolArray(tuple):
    pass


def _addr(cfn):
    return ctypes.cast(cfn, ctypes.c_void_p).value


class _Op:
    def __init__(self, rt, name):
        sig = SIGNATURES[name]
        self.name = name
        self.kinds = sig
        self.op = acl.AclnnOp(rt.libs, name, "".join(_ACL_LETTER[k] for k in sig))
        self.phase2 = self.op.phase2_address()

    @property
    def phase1_address(self):
        return _addr(self.op.phase1)


def _op(rt, name):
    cache = rt.__dict__.setdefault("_ops", {})
    op = cache.get(name)
    if op is None:
        op = cache[name] = _Op(rt, name)
    return op


# ---- argument conversion (phase 1, Python thread) -------------------------------------------------
def _create_tensor(rt, t):
    dims = (ctypes.c_int64 * max(t.ndim, 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.ndim, 1))(*t.strides)
    storage = (ctypes.c_int64 * 1)(t.storage_elements())
    h = rt.libs.nnopbase.aclCreateTensor(dims, t.ndim, t.dtype, strides, t.offset, torch_format(t.ndim),
                                         storage, 1, t.storage.ptr)
    if not h:
        raise acl.AclError(f"aclCreateTensor failed for {t!r}")
    return h


def _scalar_value(v):
    # torch_npu passes Python scalars as double / int64 / bool.
    if isinstance(v, bool):
        return ctypes.c_bool(v), acl.BOOL
    if isinstance(v, (int, np.integer)):
        return ctypes.c_int64(int(v)), acl.INT64
    return ctypes.c_double(float(v)), acl.DOUBLE


class _Converted:
    """The handles created for one call: argument values, releases and tensor slots."""

    def __init__(self):
        self.values = []
        self.releases = []   # (destroy fn address, handle)
        self.slots = []      # per tensor-typed parameter: None (absent), (handle, tensor) or (list, [(h, t)])


def _convert(rt, op, args):
    c = _Converted()
    n = rt.libs.nnopbase
    d = rt.destroy_fn
    for i, (kind, v) in enumerate(zip(op.kinds, args)):
        if kind == "T":
            if v is None:
                c.values.append(None)
                c.slots.append(None)
                continue
            if not isinstance(v, Tensor):
                raise TypeError(f"aclnn{op.name}: parameter {i} must be a Tensor, got {type(v).__name__}")
            h = _create_tensor(rt, v)
            c.values.append(h)
            c.releases.append((d["tensor"], h))
            c.slots.append((h, v))
        elif kind == "L":
            v = v or []  # an absent list is passed as NULL, as an empty one
            hs = [_create_tensor(rt, t) for t in v]
            arr = (ctypes.c_void_p * max(len(hs), 1))(*hs)
            lh = n.aclCreateTensorList(arr, len(hs)) if hs else None
            c.values.append(lh)
            if lh:
                c.releases.append((d["tensor_list"], lh))  # destroys its members too
            c.slots.append((lh, list(zip(hs, v))))
        elif kind == "S":
            if v is None:
                c.values.append(None)
                continue
            val, dt = _scalar_value(v)
            h = n.aclCreateScalar(ctypes.byref(val), dt)
            c.values.append(h)
            c.releases.append((d["scalar"], h))
        elif kind == "I":
            if v is None:
                c.values.append(None)
                continue
            vals = (ctypes.c_int64 * max(len(v), 1))(*v)
            h = n.aclCreateIntArray(vals, len(v))
            c.values.append(h)
            c.releases.append((d["int_array"], h))
        elif kind == "A":
            vals = (ctypes.c_bool * max(len(v), 1))(*v)
            h = n.aclCreateBoolArray(vals, len(v))
            c.values.append(h)
            c.releases.append((d["bool_array"], h))
        elif kind == "s":
            c.values.append(ctypes.c_char_p(v.encode()))  # alive as long as the call's _Converted
        else:
            c.values.append(_BY_VALUE_CTYPE[kind](v))
    return c


def _cache_key(op, args):
    key = [op.name]
    for kind, v in zip(op.kinds, args):
        if kind == "T":
            key.append(None if v is None else (v.shape, v.strides, v.offset, v.dtype, v.storage_elements()))
        elif kind == "L":
            key.append(tuple((t.shape, t.strides, t.offset, t.dtype, t.storage_elements()) for t in v or []))
        elif kind == "S":
            key.append(None if v is None else (type(v).__name__, v))
        elif kind in "IA":
            key.append(None if v is None else tuple(v))
        else:
            key.append(v)
    return tuple(key)


def _release_now(rt, releases):
    for fn, h in releases:
        ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(fn)(h)


def _phase1(rt, op, args):
    conv = _convert(rt, op, args)
    ws, ex = ctypes.c_uint64(0), ctypes.c_void_p(0)
    rc = op.op.phase1(*conv.values, ctypes.byref(ws), ctypes.byref(ex))  # the GIL released (CDLL), as in torch
    if rc != 0:
        _release_now(rt, conv.releases)
        msg = rt.libs.ascendcl.aclGetRecentErrMsg()
        raise acl.AclError(f"aclnn{op.name}GetWorkspaceSize failed with error {rc}: "
                           f"{msg.decode(errors='replace') if msg else ''}")
    return conv, ws.value, ex.value


_planted_nan = []  # plant_nan(): op names whose next launch computes a NaN


def plant_nan(name):
    """Test seam (a planted wrong kernel): the next launch of aclnn<name> has the stand-in write a NaN into its first
    floating-point output (FAKE_CANN_NAN_OP, read at that launch's phase 1 only). Not with the executor caches, whose
    hits skip phase 1."""
    _planted_nan.append(name)


def planted_nan_pending():
    """The plant_nan() ops not launched since."""
    return tuple(_planted_nan)


def planted_nan_clear():
    _planted_nan.clear()


def _run(name, *args):
    """Runs aclnn<name> on the current stream (asynchronously, through the launch queue)."""
    rt = _rt.current()
    op = _op(rt, name)
    if len(args) != len(op.kinds):
        raise TypeError(f"aclnn{name} takes {len(op.kinds)} parameters, got {len(args)}")
    if name not in _planted_nan:
        _dispatch(rt, op, args)
        return
    _planted_nan.remove(name)
    os.environ["FAKE_CANN_NAN_OP"] = name
    try:
        _dispatch(rt, op, args)
        rt.drain()  # TASK_QUEUE_ENABLE=2 runs phase 1 on the queue thread: let it read the variable first
    finally:
        os.environ.pop("FAKE_CANN_NAN_OP", None)


def _dispatch(rt, op, args):
    if rt.pynative is not None:  # MindSpore's PyNative pipeline (pynative.py)
        rt.pynative._dispatch(op, args)
        return
    if rt.executor_cache is not None:
        rt.executor_cache._run(op, args)
        return
    pta = _pta_cache(rt)
    if pta is not None:
        pta._run(op, args)
        return
    if rt.queue_level == 2:
        _run_v2(rt, op, args)
        return
    _run_uncached(rt, op, args)


def _launch(rt, op, ws, ex, releases):
    workspace = None
    if ws:
        workspace, block = rt.allocator.malloc(ws)
    rt.launch("aclnn" + op.name, op.phase2, workspace, ws, ex, releases)
    if ws:
        rt.allocator.free(workspace, block)  # stream-ordered reuse: later launches only


def _run_uncached(rt, op, args):
    conv, ws, ex = _phase1(rt, op, args)
    _launch(rt, op, ws, ex, conv.releases)


def _tensor_words(t):
    return [t.ndim, *t.shape, *t.strides, t.offset, t.dtype, torch_format(t.ndim), t.storage_elements(), t.storage.ptr]


def _describe(op, args):
    """The words of a level-2 op (taskqueue.cpp OpV2): the arguments as data, nothing converted on this thread."""
    words = []
    for i, (kind, v) in enumerate(zip(op.kinds, args)):
        if kind == "T":
            if v is not None and not isinstance(v, Tensor):
                raise TypeError(f"aclnn{op.name}: parameter {i} must be a Tensor, got {type(v).__name__}")
            words += [0] if v is None else [1, *_tensor_words(v)]
        elif kind == "L":
            words.append(len(v or []))
            for t in v or []:
                words += _tensor_words(t)
        elif kind == "S":
            if v is None:
                words.append(0)
            else:
                val, dt = _scalar_value(v)
                raw = ctypes.c_int64(0)
                ctypes.memmove(ctypes.byref(raw), ctypes.byref(val), ctypes.sizeof(val))
                words += [1, dt, raw.value]
        elif kind in "IA":
            words += [-1] if v is None else [len(v), *[int(x) for x in v]]
        elif kind == "s":
            raw = v.encode()
            padded = raw + b"\0" * (-len(raw) % 8)
            words += [len(raw), *np.frombuffer(padded, dtype="<i8").tolist()]
        elif kind in "df":
            words.append(ctypes.c_int64.from_buffer(ctypes.c_double(float(v))).value)
        else:
            words.append(int(v))
    return words


def _run_v2(rt, op, args):
    """torch_npu's EXEC_NPU_CMD_V2 (TASK_QUEUE_ENABLE=2): conversion, phase 1, workspace, phase 2 and destruction on
    the queue thread; errors surface at the next synchronization, as there."""
    rt.launch_v2("aclnn" + op.name, op.phase1_address, op.phase2, op.kinds, _describe(op, args))


class PtaCache:
    """torch_npu's executor cache (op-plugin hit_cache / hit_cache_v2 around EXEC_NPU_CMD).

    The helpers are looked up like op-plugin's GetOpApiFuncAddr does (dlsym on the libopapi handle, which
    reaches its dependency libnnopbase); `available` is false when any is missing, and ops then take the
    normal path."""

    def __init__(self, rt, bytes_key=False):
        self.rt = rt
        self.bytes_key = bytes_key
        lib = rt.libs.opapi
        P, B, U64, S = ctypes.c_void_p, ctypes.c_bool, ctypes.c_uint64, ctypes.c_size_t

        def sym(name, restype, argtypes):
            try:
                f = getattr(lib, name)
            except AttributeError:
                return None
            f.restype, f.argtypes = restype, argtypes
            return f

        self.can_use = sym("CanUsePTACache", B, [ctypes.c_char_p])
        self.init = sym("InitPTACacheThreadLocal", None, [])
        self.uninit = sym("UnInitPTACacheThreadLocal", None, [])
        self.add_addr = sym("AddTensorAddrToCachedList", None, [P])
        if bytes_key:
            self.set_key = sym("SetPTACacheHashKey", None, [P, S])
            self.lookup_fn = sym("PTAFindExecCache", P, [P, S, P])
        else:
            self.set_key = sym("SetPTAHashKey", None, [U64])
            self.lookup_fn = sym("PTAGetExecCache", P, [U64, P])
        # Optional in torch_npu too: around conversion and phase 1 on a miss.
        self.init_mem = sym("InitHugeMemThreadLocal", ctypes.c_int, [P, B])
        self.uninit_mem = sym("UnInitHugeMemThreadLocal", None, [P, B])
        self.available = all(f is not None for f in (self.can_use, self.init, self.uninit, self.add_addr,
                                                      self.set_key, self.lookup_fn))
        self.hits = self.misses = 0

    def _lookup(self, op, args):
        """Returns (executor, workspace size) on a hit, None on a miss (the key stays set for phase 1)."""
        self.init()
        # The storage address of every tensor argument, in declaration order (absent ones skipped, lists
        # member by member), reported while hashing as op-plugin's add_param_to_buf does.
        for kind, v in zip(op.kinds, args):
            if kind == "T" and v is not None:
                self.add_addr(v.storage.ptr)
            elif kind == "L":
                for t in v or []:
                    self.add_addr(t.storage.ptr)
        data = repr(("deterministic", False, "aclnn" + op.name, _cache_key(op, args))).encode()
        ws = ctypes.c_uint64(0)
        if self.bytes_key:
            buf = ctypes.create_string_buffer(data, len(data))
            self.set_key(buf, len(data))
            ex = self.lookup_fn(buf, len(data), ctypes.byref(ws))
        else:
            h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") or 1  # 0 is no key
            self.set_key(h)
            ex = self.lookup_fn(h, ctypes.byref(ws))
        return (ex, ws.value) if ex else None

    def _run(self, op, args):
        rt = self.rt
        if not self.can_use(("aclnn" + op.name).encode()):
            _run_uncached(rt, op, args)
            return
        try:
            hit = self._lookup(op, args)
            if hit is not None:
                self.hits += 1
                ex, ws = hit
                _launch(rt, op, ws, ex, [])  # nothing was converted: nothing to destroy
                return
            self.misses += 1
            if self.init_mem is not None:
                self.init_mem(None, False)
            try:
                _run_uncached(rt, op, args)
            finally:
                if self.uninit_mem is not None:
                    self.uninit_mem(None, False)
        finally:
            self.uninit()


def _pta_cache(rt):
    """The runtime's PtaCache when TINY_NPU_PTA_CACHE is on and the helpers exist, else None."""
    c = rt.__dict__.get("_pta_cache", False)
    if c is False:
        c = None
        mode = os.environ.get("TINY_NPU_PTA_CACHE", "0")
        if mode not in ("", "0"):
            c = PtaCache(rt, bytes_key=mode == "2")
            if not c.available:
                c = None
            elif os.environ.get("TINY_NPU_PTA_CACHE_STATS", "0") not in ("", "0"):
                atexit.register(lambda c=c: print(f"pta cache: {c.hits} hits, {c.misses} misses", file=sys.stderr))
        rt._pta_cache = c
    return c


def _call_site():
    """Where the op was called from: (code, line) of every Python frame outside this dispatch, inner to outer."""
    f = sys._getframe(4)  # _call_site <- ExecutorCache._run <- _dispatch <- _run <- the op function
    site = []
    while f is not None:
        site.append((f.f_code, f.f_lineno))
        f = f.f_back
    return tuple(site)


class ExecutorCache:
    """LRU of repeatable executors keyed by everything but the tensor addresses, per call site: as MindSpore's
    kernels, an executor belongs to one place of the model (and a kernel launched through it keeps the call
    stack of that place's phase 1, since a hit has no phase 1)."""

    def __init__(self, rt, capacity=256):
        self.rt = rt
        self.capacity = capacity
        self.entries = collections.OrderedDict()
        n = rt.libs.nnopbase
        self.set_addr = _addr(n.aclSetTensorAddr)
        self.set_dyn_addr = _addr(n.aclSetDynamicTensorAddr)
        self.hits = self.misses = 0

    def _run(self, op, args):
        rt = self.rt
        key = _cache_key(op, args) + (_call_site(),)
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
            conv, ws, ex = _phase1(rt, op, args)
            rt.check(rt.libs.nnopbase.aclSetAclOpExecutorRepeatable(ex), f"aclSetAclOpExecutorRepeatable(aclnn{op.name})")
            entry = self.entries[key] = (ex, ws, conv)
            calls = []
            if len(self.entries) > self.capacity:
                self._evict(*self.entries.popitem(last=False))
        else:
            self.hits += 1
            self.entries.move_to_end(key)
            ex, ws, conv = entry
            calls = self._rebind_calls(ex, conv, op, args)
        workspace = None
        if ws:
            workspace, block = rt.allocator.malloc(ws)
        calls.append((TNQ_PHASE2, op.phase2, workspace, ws, ex, rt.stream))
        rt.submit("aclnn" + op.name, calls)
        if ws:
            rt.allocator.free(workspace, block)

    def _rebind_calls(self, ex, conv, op, args):
        """aclSetTensorAddr for each tensor parameter: slot index = position among tensor params."""
        calls = []
        tensors = [v for kind, v in zip(op.kinds, args) if kind in "TL"]
        for idx, (slot, now) in enumerate(zip(conv.slots, tensors)):
            if slot is None:
                continue
            handle, then = slot
            if isinstance(then, list):  # tensor list: one dynamic slot, members by relative index
                for rel, ((h, _), t) in enumerate(zip(then, now or [])):
                    calls.append((TNQ_SET_DYN_ADDR, self.set_dyn_addr, ex, idx, rel, handle, t.storage.ptr))
            else:
                calls.append((TNQ_SET_ADDR, self.set_addr, ex, idx, handle, now.storage.ptr))
        return calls

    def _evict(self, key, entry):
        ex, _, conv = entry
        calls = [(TNQ_RELEASE, self.rt.destroy_fn["executor"], ex)]
        calls += [(TNQ_RELEASE, fn, h) for fn, h in conv.releases]
        self.rt.submit("evict aclnn" + key[0], calls)

    def clear(self):
        while self.entries:
            self._evict(*self.entries.popitem(last=False))


def enable_executor_cache(rt, capacity=None):
    if capacity is None:
        capacity = int(os.environ.get("TINY_NPU_EXECUTOR_CACHE_SIZE", "256"))
    rt.executor_cache = ExecutorCache(rt, capacity)
    return rt.executor_cache


# ---- shapes --------------------------------------------------------------------------------------
def broadcast_shape(a, b):
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + tuple(a)), reversed((1,) * (len(a) - len(b)) + tuple(b))):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(reversed(out))


def _out(out, shape, dtype):
    return out if out is not None else Tensor.empty(shape, dtype)


# ---- functional ops ------------------------------------------------------------------------------
def add(x, y, alpha=1.0, out=None):
    out = _out(out, broadcast_shape(x.shape, y.shape), x.dtype)
    _run("Add", x, y, alpha, out)
    return out


def adds(x, scalar, alpha=1.0, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("Adds", x, scalar, alpha, out)
    return out


def inplace_add(x, y, alpha=1.0):
    _run("InplaceAdd", x, y, alpha)
    return x


def sub(x, y, alpha=1.0, out=None):
    out = _out(out, broadcast_shape(x.shape, y.shape), x.dtype)
    _run("Sub", x, y, alpha, out)
    return out


def mul(x, y, out=None):
    out = _out(out, broadcast_shape(x.shape, y.shape), x.dtype)
    _run("Mul", x, y, out)
    return out


def muls(x, scalar, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("Muls", x, scalar, out)
    return out


def div(x, y, out=None):
    out = _out(out, broadcast_shape(x.shape, y.shape), x.dtype)
    _run("Div", x, y, out)
    return out


def matmul(x, y, out=None, cube_math_type=KEEP_DTYPE):
    """2-D @ 2-D (aclnnMatmul); either side may be a strided view such as W.T."""
    out = _out(out, x.shape[:-1] + y.shape[-1:], x.dtype)
    _run("Matmul", x, y, out, cube_math_type)
    return out


def mm(x, y, out=None, cube_math_type=KEEP_DTYPE):
    out = _out(out, (x.shape[0], y.shape[1]), x.dtype)
    _run("Mm", x, y, out, cube_math_type)
    return out


def bmm(x, y, out=None, cube_math_type=KEEP_DTYPE):
    out = _out(out, (x.shape[0], x.shape[1], y.shape[2]), x.dtype)
    _run("BatchMatMul", x, y, out, cube_math_type)
    return out


def _unary(name, x, out):
    out = _out(out, x.shape, x.dtype)
    _run(name, x, out)
    return out


# One def each (not made by a factory): the function's qualname is the scope kernel names show.
def relu(x, out=None):
    return _unary("Relu", x, out)


def gelu(x, out=None):
    return _unary("Gelu", x, out)


def silu(x, out=None):
    return _unary("Silu", x, out)


def exp(x, out=None):
    return _unary("Exp", x, out)


def log(x, out=None):
    return _unary("Log", x, out)


def sqrt(x, out=None):
    return _unary("Sqrt", x, out)


def neg(x, out=None):
    return _unary("Neg", x, out)


def softmax(x, dim=-1, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("Softmax", x, dim, out)
    return out


def log_softmax(x, dim=-1, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("LogSoftmax", x, dim, out)
    return out


def layer_norm(x, normalized_shape, weight, bias, eps=1e-5):
    """Returns (out, mean, rstd); mean/rstd have the shape of x with the normalized dims set to 1."""
    k = len(normalized_shape)
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    out = Tensor.empty(x.shape, x.dtype)
    mean = Tensor.empty(stat_shape, acl.FLOAT)
    rstd = Tensor.empty(stat_shape, acl.FLOAT)
    _run("LayerNorm", x, IntArray(normalized_shape), weight, bias, eps, out, mean, rstd)
    return out, mean, rstd


def rms_norm(x, gamma, eps=1e-6):
    k = gamma.ndim
    out = Tensor.empty(x.shape, x.dtype)
    rstd = Tensor.empty(x.shape[:x.ndim - k] + (1,) * k, acl.FLOAT)
    _run("RmsNorm", x, gamma, eps, out, rstd)
    return out, rstd


def cast(x, dtype, out=None):
    out = _out(out, x.shape, dtype)
    _run("Cast", x, dtype, out)
    return out


def cat(tensors, dim=0, out=None):
    d = dim % tensors[0].ndim
    shape = list(tensors[0].shape)
    shape[d] = sum(t.shape[d] for t in tensors)
    out = _out(out, shape, tensors[0].dtype)
    _run("Cat", list(tensors), dim, out)
    return out


def permute(x, dims, out=None):
    out = _out(out, tuple(x.shape[d] for d in dims), x.dtype)
    _run("Permute", x, IntArray(dims), out)
    return out


def embedding(weight, indices, out=None):
    out = _out(out, indices.shape + weight.shape[1:], weight.dtype)
    _run("Embedding", weight, indices, out)
    return out


def _reduced_shape(shape, dims, keepdim):
    dims = {d % len(shape) for d in dims}
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def reduce_sum(x, dims, keepdim=False, dtype=None, out=None):
    dtype = x.dtype if dtype is None else dtype
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), dtype)
    _run("ReduceSum", x, IntArray(dims), keepdim, dtype, out)
    return out


def mean(x, dims, keepdim=False, dtype=None, out=None):
    dtype = x.dtype if dtype is None else dtype
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), dtype)
    _run("Mean", x, IntArray(dims), keepdim, dtype, out)
    return out


def amax(x, dims, keepdim=False, out=None):
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), x.dtype)
    _run("Amax", x, IntArray(dims), keepdim, out)
    return out


def amin(x, dims, keepdim=False, out=None):
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), x.dtype)
    _run("Amin", x, IntArray(dims), keepdim, out)
    return out


def aminmax_all(x):
    """(min, max) of every element, each a 0-d tensor of x's dtype."""
    lo, hi = Tensor.empty((), x.dtype), Tensor.empty((), x.dtype)
    _run("AminmaxAll", x, lo, hi)
    return lo, hi


def norm(x, p, dims, keepdim=False, out=None):
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), x.dtype)
    _run("Norm", x, float(p), IntArray(dims), keepdim, out)
    return out


def linalg_vector_norm(x, ord, dims, keepdim=False, dtype=None, out=None):
    dtype = x.dtype if dtype is None else dtype
    out = _out(out, _reduced_shape(x.shape, dims, keepdim), dtype)
    _run("LinalgVectorNorm", x, float(ord), IntArray(dims), keepdim, dtype, out)
    return out


def foreach_norm(xs, ord=2.0):
    """The ord-norm of each tensor of xs (1 or 2), each a 0-d tensor of the list's dtype (format ND: every x must be
    ND too, i.e. of at most 2 dims, as aclnnForeachNorm wants out's format to be x's)."""
    outs = [Tensor.empty((), xs[0].dtype) for _ in xs]
    _run("ForeachNorm", list(xs), float(ord), outs)
    return outs


def _predicate(name, x, out):
    out = _out(out, x.shape, acl.BOOL)
    _run(name, x, out)
    return out


def is_finite(x, out=None):
    return _predicate("IsFinite", x, out)


def is_pos_inf(x, out=None):
    return _predicate("IsPosInf", x, out)


def is_neg_inf(x, out=None):
    return _predicate("IsNegInf", x, out)


def mse_loss(x, target, reduction=REDUCTION_MEAN, out=None):
    out = _out(out, x.shape if reduction == REDUCTION_NONE else (), x.dtype)
    _run("MseLoss", x, target, reduction, out)
    return out


def inplace_copy(dst, src):
    _run("InplaceCopy", dst, src)
    return dst


def inplace_zero(x):
    _run("InplaceZero", x)
    return x


def zeros(shape, dtype=acl.FLOAT):
    return inplace_zero(Tensor.empty(shape, dtype))


def apply_adamw_v2(var, m, v, grad, step, lr, beta1, beta2, weight_decay, eps, amsgrad=False, maximize=False,
                   max_grad_norm=None):
    _run("ApplyAdamWV2", var, m, v, max_grad_norm, grad, step, lr, beta1, beta2, weight_decay, eps, amsgrad,
        maximize)


def gelu_backward(grad, x, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("GeluBackward", grad, x, out)
    return out


def silu_backward(grad, x, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("SiluBackward", grad, x, out)
    return out


def relu_backward(grad, x, out=None):
    """ReLU's gradient, as torch_npu computes it: threshold_backward(grad, x, 0)."""
    out = _out(out, x.shape, x.dtype)
    _run("ThresholdBackward", grad, x, 0.0, out)
    return out


def softmax_backward(grad, y, dim=-1, out=None):
    out = _out(out, y.shape, y.dtype)
    _run("SoftmaxBackward", grad, y, dim, out)
    return out


def layer_norm_backward(grad, x, normalized_shape, mean, rstd, weight, bias, mask=(True, True, True)):
    dx = Tensor.empty(x.shape, x.dtype) if mask[0] else None
    dw = Tensor.empty(weight.shape, weight.dtype) if mask[1] and weight is not None else None
    db = Tensor.empty(bias.shape, bias.dtype) if mask[2] and bias is not None else None
    _run("LayerNormBackward", grad, x, IntArray(normalized_shape), mean, rstd, weight, bias, BoolArray(mask),
        dx, dw, db)
    return dx, dw, db


NO_PADDING = (1 << 64) - 1  # paddingIdx -1 as the uint64_t it is declared as


def embedding_dense_backward(grad, indices, num_weights, padding_idx=NO_PADDING, scale_grad_by_freq=False,
                             out=None):
    out = _out(out, (num_weights, grad.shape[-1]), grad.dtype)
    _run("EmbeddingDenseBackward", grad, indices, num_weights, padding_idx, scale_grad_by_freq, out)
    return out


def mse_loss_backward(grad, x, target, reduction=REDUCTION_MEAN, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("MseLossBackward", grad, x, target, reduction, out)
    return out


# ---- transformer ops (torch_npu's npu_fusion_attention, npu_rotary_mul, npu_swiglu, npu_rms_norm, F.cross_entropy) --
def flash_attention_score(q, k, v, head_num, layout, scale, atten_mask=None, sparse_mode=0, pre_tokens=2147483647,
                          next_tokens=2147483647):
    """npu_fusion_attention's forward (keepProb 1, no pse): (out, softmax max, softmax sum), the two [B, N, Sq, 8]
    FLOAT statistics the backward rebuilds the probabilities from."""
    b, sq = (q.shape[0], q.shape[1]) if layout == "BSND" else (q.shape[0], q.shape[2])
    stats = (b, head_num, sq, 8)
    smax, ssum = Tensor.empty(stats, acl.FLOAT), Tensor.empty(stats, acl.FLOAT)
    out = Tensor.empty(q.shape[:-1] + v.shape[-1:], q.dtype)
    _run("FlashAttentionScore", q, k, v, None, None, None, atten_mask, None, scale, 1.0, pre_tokens, next_tokens,
         head_num, layout, 0, sparse_mode, smax, ssum, None, out)
    return out, smax, ssum


def flash_attention_score_grad(q, k, v, dy, out, smax, ssum, head_num, layout, scale, atten_mask=None,
                               sparse_mode=0, pre_tokens=2147483647, next_tokens=2147483647):
    """(dq, dk, dv) from the forward's inputs, output and softmax statistics."""
    dq, dk, dv = Tensor.empty(q.shape, q.dtype), Tensor.empty(k.shape, k.dtype), Tensor.empty(v.shape, v.dtype)
    _run("FlashAttentionScoreGrad", q, k, v, dy, None, None, None, atten_mask, smax, ssum, None, out, None, scale,
         1.0, pre_tokens, next_tokens, head_num, layout, 0, sparse_mode, dq, dk, dv, None)
    return dq, dk, dv


ROPE_HALF = 0  # npu_rotary_mul's rotary_mode "half"


def rotary_position_embedding(x, cos, sin, mode=ROPE_HALF, out=None):
    out = _out(out, x.shape, x.dtype)
    _run("RotaryPositionEmbedding", x, cos, sin, mode, out)
    return out


def rotary_position_embedding_grad(dy, cos, sin, x, mode=ROPE_HALF):
    """(dx, dcos, dsin), as torch_npu's npu_rotary_mul_backward asks for them: with the forward's x, dcos and dsin
    shaped like cos."""
    dx = Tensor.empty(dy.shape, dy.dtype)
    dcos, dsin = Tensor.empty(cos.shape, cos.dtype), Tensor.empty(sin.shape, sin.dtype)
    _run("RotaryPositionEmbeddingGrad", dy, cos, sin, x, mode, dx, dcos, dsin)
    return dx, dcos, dsin


def swi_glu(x, dim=-1):
    shape = list(x.shape)
    shape[dim] //= 2
    out = Tensor.empty(shape, x.dtype)
    _run("SwiGlu", x, dim, out)
    return out


def swi_glu_grad(grad, x, dim=-1):
    out = Tensor.empty(x.shape, x.dtype)
    _run("SwiGluGrad", grad, x, dim, out)
    return out


def rms_norm_grad(grad, x, rstd, gamma):
    """(dx of x's dtype, dgamma FLOAT)."""
    dx, dgamma = Tensor.empty(x.shape, x.dtype), Tensor.empty(gamma.shape, acl.FLOAT)
    _run("RmsNormGrad", grad, x, rstd, gamma, dx, dgamma)
    return dx, dgamma


def log_softmax_backward(grad, y, dim=-1):
    out = Tensor.empty(y.shape, y.dtype)
    _run("LogSoftmaxBackward", grad, y, dim, out)
    return out


IGNORE_INDEX = -100  # F.cross_entropy's default


def nll_loss(logp, target, weight, reduction=REDUCTION_MEAN, ignore_index=IGNORE_INDEX):
    """(loss, total weight); torch_npu passes a weight of ones when the caller gives none."""
    out = Tensor.empty(() if reduction != REDUCTION_NONE else target.shape, logp.dtype)
    total = Tensor.empty((), logp.dtype)
    _run("NLLLoss", logp, target, weight, reduction, ignore_index, out, total)
    return out, total


def nll_loss_backward(grad, logp, target, weight, total, reduction=REDUCTION_MEAN, ignore_index=IGNORE_INDEX):
    out = Tensor.empty(logp.shape, logp.dtype)
    _run("NLLLossBackward", grad, logp, target, weight, reduction, ignore_index, total, out)
    return out


# ---- MoE (npu_moe_gating_top_k_softmax_v2, npu_moe_init_routing_v2, npu_grouped_matmul, npu_moe_finalize_routing) --
def moe_gating_top_k_softmax_v2(x, k):
    """(top-k probabilities of x's dtype, their experts INT32, the full softmax FLOAT), renorm 0."""
    rows = x.shape[:-1]
    y, idx = Tensor.empty(rows + (k,), x.dtype), Tensor.empty(rows + (k,), acl.INT32)
    soft = Tensor.empty(x.shape, acl.FLOAT)
    _run("MoeGatingTopKSoftmaxV2", x, None, k, 0, True, y, idx, soft)
    return y, idx, soft


MOE_COUNTS = 2  # expertTokensCountOrCumsumFlag: tokens per expert (1: their cumulative sums)


def moe_init_routing_v2(x, expert_idx, num_experts):
    """Dropless routing: (x's rows copied once per choice and sorted by expert, expandedRowIdx INT32, tokens per
    expert INT64)."""
    n = expert_idx.numel()
    ex = Tensor.empty((n, x.shape[-1]), x.dtype)
    rows, counts = Tensor.empty((n,), acl.INT32), Tensor.empty((num_experts,), acl.INT64)
    _run("MoeInitRoutingV2", x, expert_idx, 0, 0, num_experts, 0, MOE_COUNTS, False, ex, rows, counts, None)
    return ex, rows, counts


def moe_init_routing_v2_grad(grad_expanded, expanded_row_idx, top_k):
    out = Tensor.empty((grad_expanded.shape[0] // top_k, grad_expanded.shape[1]), grad_expanded.dtype)
    _run("MoeInitRoutingV2Grad", grad_expanded, expanded_row_idx, top_k, 0, 0, out)
    return out


MOE_DROPLESS_BY_ROW = 2  # MoeFinalizeRoutingV2's dropPadMode for MoeInitRoutingV2's (token-major) expandedRowIdx


def moe_finalize_routing_v2(expanded, expanded_row_idx, scales):
    """out[t] = sum over t's choices j of scales[t, j] * expanded[its row] (no residual, no bias)."""
    out = Tensor.empty((scales.shape[0], expanded.shape[1]), expanded.dtype)
    _run("MoeFinalizeRoutingV2", expanded, expanded_row_idx, None, None, None, scales, None, MOE_DROPLESS_BY_ROW, out)
    return out


def moe_finalize_routing_v2_grad(grad, expanded_row_idx, expanded, scales):
    """(gradient of the expanded rows, gradient of the scales)."""
    gx = Tensor.empty(expanded.shape, grad.dtype)
    gs = Tensor.empty(scales.shape, scales.dtype)
    _run("MoeFinalizeRoutingV2Grad", grad, expanded_row_idx, expanded, scales, None, None, 0, 0, 0, 0, gx, gs)
    return gx, gs


GMM_SPLIT_NONE = 3  # splitItem: one x and one y, rows (or K) split by groupList
GMM_GROUP_ROWS, GMM_GROUP_K = 0, 2
GMM_LIST_COUNTS = 1  # groupListType: sizes, not cumulative sums


def grouped_matmul_v5(x, weight, group_list, out_shape, group_type=GMM_GROUP_ROWS):
    """One x, one [E, K, N] weight (or x^T and y with groups of K), groups from group_list (INT64 counts)."""
    out = Tensor.empty(out_shape, x.dtype)
    _run("GroupedMatmulV5", [x], [weight], None, None, None, None, None, None, group_list, None, None, None,
         GMM_SPLIT_NONE, group_type, GMM_LIST_COUNTS, 0, None, [out], None, None)
    return out


# ---- MC2: a matmul and its collective in one kernel, on the compute stream (Atlas A2's npu_mm_all_reduce_base,
# npu_all_gather_base_mm, npu_mm_reduce_scatter_base); `group` is the communicator's name ---------------------------
MC2_STOP_ON_FAILURE = 1  # streamMode


def matmul_all_reduce(x1, x2, group):
    out = Tensor.empty(x1.shape[:-1] + x2.shape[-1:], x1.dtype)
    _run("MatmulAllReduce", x1, x2, None, group, "sum", 0, MC2_STOP_ON_FAILURE, out)
    return out


def all_gather_matmul(x1, x2, group, ranks):
    """(allgather(x1) @ x2, allgather(x1))."""
    out = Tensor.empty((x1.shape[0] * ranks, x2.shape[1]), x1.dtype)
    gathered = Tensor.empty((x1.shape[0] * ranks, x1.shape[1]), x1.dtype)
    _run("AllGatherMatmul", x1, x2, None, group, 0, 0, MC2_STOP_ON_FAILURE, out, gathered)
    return out, gathered


def matmul_reduce_scatter(x1, x2, group, ranks):
    out = Tensor.empty((x1.shape[0] // ranks, x2.shape[1]), x1.dtype)
    _run("MatmulReduceScatter", x1, x2, None, group, "sum", 0, MC2_STOP_ON_FAILURE, out)
    return out
