"""Every aclnn op of the stand-in's libopapi.so against an independent numpy computation.

Ops are found the way torch_npu finds them (dlopen + dlsym through tiny_npu.acl); their phase-1
signatures are read from test/fake_cann/aclnn_ops.spec, so a prototype that drifts from the spec breaks
here. Inputs go through plain, offset, strided and transposed views; fp16/bf16 results are compared
with tolerances of one rounding, fp32 tightly. Backward ops are checked against finite differences
of numpy forward functions where that is practical.
"""
import ctypes
import math
import os
import re

import numpy as np
import pytest

from tiny_npu import acl
from tiny_npu.acl import BF16, BOOL, DOUBLE, FLOAT, FLOAT16, INT8, INT32, INT64

NULLPTR, INVALID = 161001, 161002
AICORE_EXCEPTION = 507015
COMPLEX64 = 16
FP = [FLOAT, FLOAT16, BF16]
TOL = {FLOAT: (2e-6, 1e-6), FLOAT16: (2e-3, 2e-3), BF16: (1.6e-2, 1.6e-2), DOUBLE: (1e-12, 1e-12)}
NP_OF = {FLOAT: np.float32, FLOAT16: np.float16, BF16: np.float32, DOUBLE: np.float64}

SPEC = os.path.join(os.environ.get("MSPROBE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..")),
                    "test", "fake_cann", "aclnn_ops.spec")
_LETTER = {"double": "D", "float": "F", "int64_t": "L", "uint64_t": "L", "int8_t": "C", "bool": "B",
           "aclDataType": "E"}


DTYPE_NAMES = {FLOAT: "fp32", FLOAT16: "fp16", BF16: "bf16", DOUBLE: "fp64", INT8: "int8", INT32: "int32",
               INT64: "int64", BOOL: "bool"}


def ident(v):
    """Readable test ids for dtype parameters."""
    return DTYPE_NAMES.get(v) if isinstance(v, int) and not isinstance(v, bool) else None


def parse_spec():
    """op name -> (ctypes signature letters, parameter declarations), from aclnn_ops.spec."""
    ops, pending = {}, ""
    for raw in open(SPEC, encoding="utf-8"):
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        m = re.fullmatch(r"([A-Z]\w*)\((.*)\)", line)
        if m:
            params = [p.strip() for p in m.group(2).split(",")]
            letters = "".join("T" if "*" in p else _LETTER[p.replace("const ", "").split()[0]] for p in params)
            ops[m.group(1)] = (letters, params)
    return ops


OPS = parse_spec()


# ---------------------------------------------------------------------------------------------- device


class Handle:
    def __init__(self, handle):
        self.handle = handle


class DevTensor(Handle):
    """An aclTensor over device storage; `host` holds its logical values as the device has them."""

    def __init__(self, dev, storage, dtype, shape, strides, offset):
        self.dev, self.storage_len, self.dtype = dev, storage.size, dtype
        self.shape, self.strides, self.offset = tuple(shape), tuple(strides), offset
        self.ptr = dev.malloc(storage.nbytes)
        acl.check(dev.a.aclrtMemcpy(self.ptr, storage.nbytes, storage.ctypes.data, storage.nbytes, acl.MEMCPY_H2D),
                  "aclrtMemcpy")
        nd = len(shape)
        dims, st = (ctypes.c_int64 * max(nd, 1))(*shape), (ctypes.c_int64 * max(nd, 1))(*strides)
        sdims = (ctypes.c_int64 * 1)(storage.size)
        h = dev.n.aclCreateTensor(dims, nd, dtype, st, offset, acl.FORMAT_ND, sdims, 1, self.ptr)
        assert h, "aclCreateTensor failed"
        super().__init__(h)
        dev.tensors.append(h)
        self.host = self.read()

    def storage(self):
        """The whole storage, in storage form (bf16 as bits)."""
        out = np.empty(self.storage_len, dtype=acl.NUMPY_OF[self.dtype])
        acl.check(self.dev.a.aclrtMemcpy(out.ctypes.data, out.nbytes, self.ptr, out.nbytes, acl.MEMCPY_D2H), "D2H")
        return out

    def read(self):
        """Logical values (bf16 widened to float32), through the view."""
        s = self.storage()
        isz = s.itemsize
        view = np.lib.stride_tricks.as_strided(s[self.offset:], shape=self.shape,
                                               strides=[x * isz for x in self.strides])
        return load(np.array(view), self.dtype)


def store(values, dtype):
    """Logical values -> storage form of dtype (rounding to it)."""
    v = np.asarray(values)
    if dtype == BF16:
        return acl.bf16_bits(v.reshape(-1).astype(np.float32)).reshape(v.shape)
    return v.astype(acl.NUMPY_OF[dtype])


def load(a, dtype):
    """Storage form -> logical values (bf16 widened to float32); any rank, 0-d included."""
    a = np.asarray(a)
    return acl.from_host_array(a.reshape(-1), dtype).reshape(a.shape)


def junk(n, dtype):
    """Storage filler that no op result here equals: NaN bits for floats, 0x5a5a... for integers."""
    if dtype == BOOL:
        return np.zeros(n, dtype=np.bool_)
    byte = b"\xff" if dtype in (FLOAT, FLOAT16, BF16, DOUBLE) else b"\x5a"
    return np.frombuffer(byte * (n * acl.itemsize(dtype)), dtype=acl.NUMPY_OF[dtype]).copy()


class Device:
    def __init__(self):
        self.libs = acl.Libraries()
        self.a, self.n = self.libs.ascendcl, self.libs.nnopbase
        rc = self.a.aclInit(None)
        assert rc in (0, 100002)
        acl.check(self.a.aclrtSetDevice(0), "aclrtSetDevice")
        self.stream = self.new_stream()
        self.buffers, self.tensors, self.others = [], [], []
        self._ops = {}
        self.a.aclGetRecentErrMsg.argtypes, self.a.aclGetRecentErrMsg.restype = [], ctypes.c_char_p
        self.n.aclSetTensorAddr.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
        self.n.aclCreateScalar.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.n.aclCreateTensor.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                                           ctypes.c_void_p]

    def new_stream(self):
        s = ctypes.c_void_p()
        acl.check(self.a.aclrtCreateStream(ctypes.byref(s)), "aclrtCreateStream")
        return s.value

    def op(self, name):
        if name not in self._ops:
            self._ops[name] = acl.AclnnOp(self.libs, name, OPS[name][0])
        return self._ops[name]

    def malloc(self, nbytes):
        p = ctypes.c_void_p()
        acl.check(self.a.aclrtMalloc(ctypes.byref(p), max(int(nbytes), 1), 0), "aclrtMalloc")
        self.buffers.append(p.value)
        return p.value

    def release(self):
        for h in self.tensors:
            self.n.aclDestroyTensor(h)
        for destroy, h in self.others:
            destroy(h)
        for p in self.buffers:
            self.a.aclrtFree(p)
        self.buffers, self.tensors, self.others = [], [], []

    # -- arguments
    def tensor(self, values, dtype, layout="contig"):
        """A device tensor holding `values` (logical) through a view of the given layout."""
        v = np.asarray(values)
        shape, n = v.shape, v.size
        contig = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        if layout == "contig":
            return DevTensor(self, store(v.ravel(), dtype), dtype, shape, contig, 0)
        if layout == "offset":  # 3 junk elements first
            return DevTensor(self, np.concatenate([junk(3, dtype), store(v.ravel(), dtype)]), dtype, shape, contig, 3)
        if layout == "strided":  # every other element, starting at 1
            s = junk(2 * n + 1, dtype)
            s[1::2] = store(v.ravel(), dtype)
            return DevTensor(self, s, dtype, shape, [2 * c for c in contig], 1)
        if layout == "transposed":  # column-major storage
            fstrides = [int(np.prod(shape[:i])) for i in range(len(shape))]
            return DevTensor(self, store(v.transpose().ravel(), dtype), dtype, shape, fstrides, 0)
        raise ValueError(layout)

    def empty(self, shape, dtype, layout="contig"):
        """An output tensor whose storage is junk, so an element the op misses shows."""
        t = self.tensor(np.zeros(shape), dtype, layout)
        n = t.storage_len
        fill = junk(n, dtype)
        acl.check(self.a.aclrtMemcpy(t.ptr, fill.nbytes, fill.ctypes.data, fill.nbytes, acl.MEMCPY_H2D), "H2D")
        return t

    def scalar(self, value, dtype=FLOAT):
        buf = store(np.array([value]), dtype)
        h = self.n.aclCreateScalar(buf.ctypes.data, dtype)
        self.others.append((self.n.aclDestroyScalar, h))
        return Handle(h)

    def ints(self, values):
        arr = (ctypes.c_int64 * max(len(values), 1))(*values)
        h = self.n.aclCreateIntArray(arr, len(values))
        self.others.append((self.n.aclDestroyIntArray, h))
        return Handle(h)

    def bools(self, values):
        arr = (ctypes.c_bool * len(values))(*values)
        h = self.n.aclCreateBoolArray(arr, len(values))
        self.others.append((self.n.aclDestroyBoolArray, h))
        return Handle(h)

    def scalar_list(self, scalars):
        arr = (ctypes.c_void_p * len(scalars))(*[s.handle for s in scalars])
        self.n.aclCreateScalarList.argtypes, self.n.aclCreateScalarList.restype = [ctypes.c_void_p, ctypes.c_uint64], \
            ctypes.c_void_p
        h = self.n.aclCreateScalarList(arr, len(scalars))
        self.others.append((self.n.aclDestroyScalarList, h))
        return Handle(h)

    def tensor_list(self, tensors):
        arr = (ctypes.c_void_p * len(tensors))(*[t.handle for t in tensors])
        h = self.n.aclCreateTensorList(arr, len(tensors))
        self.others.append((self.n.aclDestroyTensorList, h))  # a member destroyed already is just refused
        return Handle(h)

    # -- running
    @staticmethod
    def _args(args):
        return [a.handle if isinstance(a, Handle) else a for a in args]

    def phase1(self, name, *args):
        """Phase-1 status; the executor, if any, is destroyed."""
        ws, ex = ctypes.c_uint64(0), ctypes.c_void_p(0)
        rc = self.op(name).phase1(*self._args(args), ctypes.byref(ws), ctypes.byref(ex))
        if rc == 0:
            self.n.aclDestroyAclOpExecutor(ex)
        return rc

    def run(self, name, *args, stream=None, expect_sync=0):
        """Both phases with a real workspace, then synchronization. Returns the workspace size."""
        op = self.op(name)
        ws, ex = op.prepare(*self._args(args))
        w = self.malloc(ws) if ws else None
        stream = self.stream if stream is None else stream
        acl.check(op.phase2(w, ws, ex, stream), f"aclnn{name}")
        assert self.a.aclrtSynchronizeStream(stream) == expect_sync
        return ws


@pytest.fixture(scope="module")
def device():
    return Device()


@pytest.fixture
def dev(device):
    yield device
    device.release()


rng = np.random.default_rng(1234)


def rand(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape)


def close(got, want, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol * scale, atol=atol * scale)


def as_dtype(x, dtype):
    """Reference of an output: the exact value rounded to dtype once, as float64."""
    return load(store(x, dtype), dtype).astype(np.float64)


# ------------------------------------------------------------------------------------- the spec itself


def test_every_spec_op_is_exported_with_both_phases(dev):
    assert len(OPS) >= 38
    for name in OPS:
        dev.op(name)  # dlsym of aclnnXGetWorkspaceSize and aclnnX


@pytest.mark.parametrize("name", sorted(OPS))
def test_all_null_arguments_are_nullptr(dev, name):
    letters = OPS[name][0]
    args = [None if c == "T" else 0 for c in letters]
    assert dev.phase1(name, *args) == NULLPTR


# ------------------------------------------------------------------------------------------ elementwise

BINARY = {
    "Add": lambda a, b, s: a + s * b,
    "Sub": lambda a, b, s: a - s * b,
    "Mul": lambda a, b, s: a * b,
    "Div": lambda a, b, s: a / b,
}


@pytest.mark.parametrize("dtype", [FLOAT, FLOAT16, BF16, INT32, INT64], ids=ident)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(dev, name, dtype):
    is_int = dtype in (INT32, INT64)
    a = rng.integers(-9, 10, (3, 1, 4)) if is_int else rand((3, 1, 4))
    b = rng.integers(1, 6, (2, 4)) * rng.choice([-1, 1], (2, 4)) if is_int else rand((2, 4), 0.5, 2.0)
    ta, tb = dev.tensor(a, dtype), dev.tensor(b, dtype, "transposed")
    out_dtype = FLOAT if (name == "Div" and is_int) else dtype
    out = dev.empty((3, 2, 4), out_dtype)
    alpha = 2 if is_int else 0.75
    args = (ta, tb, dev.scalar(alpha, INT64 if is_int else FLOAT), out) if name in ("Add", "Sub") else (ta, tb, out)
    dev.run(name, *args)
    want = BINARY[name](ta.host.astype(np.float64), tb.host.astype(np.float64), alpha)
    if is_int and out_dtype != FLOAT:
        np.testing.assert_array_equal(out.read(), want.astype(np.int64))
    else:
        close(out.read(), as_dtype(want, out_dtype), out_dtype)


def test_bool_add_and_mul_are_or_and_and(dev):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    for name, want in (("Add", a | b), ("Mul", a & b)):
        out = dev.empty((4,), BOOL)
        args = (dev.tensor(a, BOOL), dev.tensor(b, BOOL))
        args = args + ((dev.scalar(1, INT64),) if name == "Add" else ()) + (out,)
        dev.run(name, *args)
        np.testing.assert_array_equal(out.read(), want)


@pytest.mark.parametrize("dtype", FP + [INT32], ids=ident)
def test_scalar_forms_and_inplace_add(dev, dtype):
    x = rng.integers(-9, 10, (2, 3)) if dtype == INT32 else rand((2, 3))
    tx = dev.tensor(x, dtype, "offset")
    out = dev.empty((2, 3), dtype, "strided")
    dev.run("Adds", tx, dev.scalar(3, INT64), dev.scalar(2, INT64), out)
    close(out.read(), as_dtype(tx.host + 6, dtype), dtype if dtype != INT32 else FLOAT)
    dev.run("Muls", tx, dev.scalar(-2, INT64), out)
    close(out.read(), as_dtype(tx.host * -2.0, dtype), dtype if dtype != INT32 else FLOAT)
    # InplaceAdd: a row broadcast into a transposed selfRef.
    self_ref, row = dev.tensor(x, dtype, "transposed"), dev.tensor(x[0] * 0 + 1, dtype)
    dev.run("InplaceAdd", self_ref, row, dev.scalar(3, INT64))
    close(self_ref.read(), as_dtype(self_ref.host + 3, dtype), dtype if dtype != INT32 else FLOAT)
    assert dev.phase1("InplaceAdd", row, self_ref, dev.scalar(1, INT64)) == INVALID  # (2,3) does not fit (3,)


def gelu_np(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


UNARY = {
    "Exp": (np.exp, FP + [DOUBLE], (-2, 2)),
    "Log": (np.log, FP + [DOUBLE], (0.1, 4)),
    "Sqrt": (np.sqrt, FP + [DOUBLE], (0, 4)),
    "Neg": (np.negative, FP + [INT32, INT64, INT8], (-5, 5)),
    "Relu": (lambda x: np.maximum(x, 0), FP + [INT32, INT64, INT8], (-5, 5)),
    "Gelu": (gelu_np, FP, (-3, 3)),
    "Silu": (lambda x: x / (1 + np.exp(-x)), FP, (-4, 4)),
}
UNARY_CASES = [(n, d) for n, (_, ds, _) in UNARY.items() for d in ds]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=ident)
def test_unary(dev, name, dtype):
    fn, _, (lo, hi) = UNARY[name]
    if dtype in (INT32, INT64, INT8):
        x = rng.integers(lo, hi, (3, 5))
    else:
        x = rand((3, 5), lo, hi)
    tx = dev.tensor(x, dtype, "transposed")
    out = dev.empty((3, 5), dtype, "strided")
    dev.run(name, tx, out)
    if dtype in (INT32, INT64, INT8):
        np.testing.assert_array_equal(out.read(), fn(tx.host))
    else:
        close(out.read(), as_dtype(fn(tx.host.astype(np.float64)), dtype), dtype)


def test_unary_rejects_unsupported_dtypes_and_shapes(dev):
    assert dev.phase1("Gelu", dev.tensor(np.zeros(4), INT32), dev.empty((4,), INT32)) == INVALID
    assert dev.phase1("Exp", dev.tensor(np.zeros(4), INT64), dev.empty((4,), FLOAT)) == INVALID
    assert dev.phase1("Silu", dev.tensor(np.zeros(4), BOOL), dev.empty((4,), BOOL)) == INVALID
    assert dev.phase1("Relu", dev.tensor(np.zeros(4), FLOAT), dev.empty((5,), FLOAT)) == INVALID


def test_complex_tensor_is_rejected(dev):
    buf = dev.malloc(64)
    dims, st = (ctypes.c_int64 * 1)(4), (ctypes.c_int64 * 1)(1)
    h = dev.n.aclCreateTensor(dims, 1, COMPLEX64, st, 0, acl.FORMAT_ND, None, 0, buf)
    assert h
    dev.tensors.append(h)
    cplx = Handle(h)
    assert dev.phase1("Add", cplx, cplx, dev.scalar(1.0), cplx) == INVALID
    assert dev.phase1("Relu", cplx, cplx) == INVALID


@pytest.mark.parametrize("name", ["GeluBackward", "SiluBackward"])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_activation_backward_matches_finite_differences(dev, name, dtype):
    forward = gelu_np if name == "GeluBackward" else (lambda x: x / (1 + np.exp(-x)))
    x, g = rand((4, 6), -3, 3), rand((4, 6))
    tx, tg = dev.tensor(x, dtype, "offset"), dev.tensor(g, dtype, "transposed")
    out = dev.empty((4, 6), dtype)
    dev.run(name, tg, tx, out)
    xs, h = tx.host.astype(np.float64), 1e-6
    want = tg.host * (forward(xs + h) - forward(xs - h)) / (2 * h)
    close(out.read(), as_dtype(want, dtype), dtype, scale=2 if dtype == FLOAT else 1)


def test_gelu_backward_promotes_its_inputs(dev):
    """ops-nn activation/gelu_grad/op_api/aclnn_gelu_backward.cpp: gradOutput and self are promoted to a common type
    (level2_base.h CheckPromoteTypeGeluBackward) and cast to it; only that type must be FLOAT, FLOAT16 or BF16. An
    INT32 gradOutput with a FLOAT self computes in FLOAT; FLOAT16 with BF16 promotes to FLOAT; two INT32s are refused."""
    x, g = rand((3, 4), -3, 3), rng.integers(-5, 6, (3, 4))
    tx, tg, out = dev.tensor(x, FLOAT), dev.tensor(g, INT32, "strided"), dev.empty((3, 4), FLOAT)
    dev.run("GeluBackward", tg, tx, out)
    xs, h = tx.host.astype(np.float64), 1e-6
    close(out.read(), as_dtype(g * (gelu_np(xs + h) - gelu_np(xs - h)) / (2 * h), FLOAT), FLOAT, scale=2)
    t16, tbf = dev.tensor(rand((2, 3)), FLOAT16), dev.tensor(rand((2, 3), -3, 3), BF16)
    out = dev.empty((2, 3), FLOAT)
    dev.run("GeluBackward", t16, tbf, out)
    xs = tbf.host.astype(np.float64)
    close(out.read(), as_dtype(t16.host * (gelu_np(xs + h) - gelu_np(xs - h)) / (2 * h), FLOAT), FLOAT, scale=2)
    ints = dev.tensor(g, INT32)
    assert dev.phase1("GeluBackward", ints, ints, dev.empty((3, 4), FLOAT)) == INVALID  # promoted INT32
    assert dev.phase1("GeluBackward", tg, tx, dev.empty((3, 4), FLOAT16)) == 0  # FLOAT is cast to the output's


def test_binary_ops_promote_compute_in_the_promoted_type_and_cast(dev):
    """ops-math math/add/docs/aclnnAdd&aclnnInplaceAdd.md with docs/zh/context/deduction_relationship.md and
    conversion_relationship.md: the inputs are promoted (FLOAT16 + FLOAT16 stays FLOAT16 and is computed in it even
    for a FLOAT out; INT8 with UINT8 is INT16), the result is cast to out, which must be castable from the promoted
    type (FLOAT into INT32 is not); aclnn_div.cpp divides integers as FLOAT."""
    a, b = rand((8,)), rand((8,))
    ta, tb, out = dev.tensor(a, FLOAT16), dev.tensor(b, FLOAT16), dev.empty((8,), FLOAT)
    dev.run("Add", ta, tb, dev.scalar(1.0), out)
    want = (ta.host.astype(np.float16) + tb.host.astype(np.float16)).astype(np.float32)  # rounded to fp16
    np.testing.assert_array_equal(out.read(), want)
    i8, u8 = dev.tensor(np.array([100, -100, 7]), INT8), dev.tensor(np.array([200, 200, 3]), acl.UINT8)
    out = dev.empty((3,), acl.INT16)
    dev.run("Add", i8, u8, dev.scalar(1, INT64), out)
    np.testing.assert_array_equal(out.read(), [300, 100, 10])
    fl, i32 = dev.tensor(rand((3,)), FLOAT), dev.tensor(np.array([1, 2, 3]), INT32)
    assert dev.phase1("Add", fl, i32, dev.scalar(1.0), dev.empty((3,), INT32)) == INVALID  # FLOAT into INT32
    assert dev.phase1("Mul", fl, i32, dev.empty((3,), FLOAT16)) == 0  # FLOAT into FLOAT16 casts
    seven, two = dev.tensor(np.array([7, -7]), INT32), dev.tensor(np.array([2, 2]), INT32)
    out = dev.empty((2,), FLOAT)
    dev.run("Div", seven, two, out)
    np.testing.assert_array_equal(out.read(), [3.5, -3.5])


@pytest.mark.parametrize("dtype", FP + [INT32], ids=ident)
def test_threshold_backward_is_relu_backward(dev, dtype):
    x = rng.integers(-3, 4, (3, 4)) if dtype == INT32 else rand((3, 4))
    g = rng.integers(-9, 10, (3, 4)) if dtype == INT32 else rand((3, 4))
    tx, tg, out = dev.tensor(x, dtype), dev.tensor(g, dtype, "strided"), dev.empty((3, 4), dtype)
    dev.run("ThresholdBackward", tg, tx, dev.scalar(0.0), out)
    np.testing.assert_array_equal(out.read(), np.where(tx.host > 0, tg.host, 0))


# ------------------------------------------------------------------------------------------------ matmul


def hf32(x):
    """fp32 operand as the cube unit reads it in HF32 mode (10-bit mantissa, round to nearest even)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0xFFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return b.view(np.float32).astype(np.float64)


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_mm_on_transposed_and_offset_views(dev, dtype):
    a, b = rand((5, 7)), rand((7, 3))
    ta, tb = dev.tensor(a, dtype, "transposed"), dev.tensor(b, dtype, "offset")
    out = dev.empty((5, 3), dtype, "strided")
    ws = dev.run("Mm", ta, tb, out, 0)
    assert ws > 0  # the cube ops ask for scratch memory, as the real ones do
    close(out.read(), as_dtype(ta.host.astype(np.float64) @ tb.host, dtype), dtype, scale=4)


MATMUL_SHAPES = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
                 ((5, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 6))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_broadcasting_rules(dev, sa, sb):
    a, b = rand(sa), rand(sb)
    want = np.matmul(a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64))
    ta, tb = dev.tensor(a, FLOAT, "strided"), dev.tensor(b, FLOAT)
    out = dev.empty(want.shape, FLOAT)
    dev.run("Matmul", ta, tb, out, 0)
    close(out.read(), want, FLOAT)


def test_batch_matmul_and_matmul_backward_on_transposed_views(dev):
    a, b = rand((3, 4, 5)), rand((3, 5, 2))
    ta, tb = dev.tensor(a, FLOAT), dev.tensor(b, FLOAT)
    out = dev.empty((3, 4, 2), FLOAT)
    dev.run("BatchMatMul", ta, tb, out, 0)
    close(out.read(), np.matmul(ta.host.astype(np.float64), tb.host), FLOAT)
    # dA = dY @ B^T with B^T a strided view of B's storage (no copy).
    dy = dev.tensor(rand((3, 4, 2)), FLOAT)
    bt = DevTensor(dev, store(b.ravel(), FLOAT), FLOAT, (3, 2, 5), (10, 1, 2), 0)
    da = dev.empty((3, 4, 5), FLOAT)
    dev.run("BatchMatMul", dy, bt, da, 0)
    close(da.read(), np.matmul(dy.host.astype(np.float64), np.swapaxes(tb.host, 1, 2)), FLOAT)


@pytest.mark.parametrize("cube,transform", [(2, lambda x: x.astype(np.float16).astype(np.float64)), (3, hf32),
                                            (1, hf32)], ids=["USE_FP16", "USE_HF32", "ALLOW_FP32_DOWN_PRECISION"])
def test_cube_math_type_rounds_fp32_operands(dev, cube, transform):
    a, b = rand((4, 6)), rand((6, 3))
    ta, tb, out = dev.tensor(a, FLOAT), dev.tensor(b, FLOAT), dev.empty((4, 3), FLOAT)
    dev.run("Mm", ta, tb, out, cube)
    want = transform(ta.host) @ transform(tb.host)
    close(out.read(), want, FLOAT)
    assert not np.allclose(out.read(), ta.host.astype(np.float64) @ tb.host, rtol=1e-7, atol=0)


def test_matmul_argument_errors(dev):
    a2, b2, a3 = dev.tensor(rand((2, 3)), FLOAT), dev.tensor(rand((3, 4)), FLOAT), dev.tensor(rand((2, 2, 3)), FLOAT)
    out = dev.empty((2, 4), FLOAT)
    assert dev.phase1("Mm", a2, b2, out, 0) == 0
    assert dev.phase1("Mm", a2, a2, out, 0) == INVALID  # inner dims
    assert dev.phase1("Mm", a3, b2, out, 0) == INVALID  # 3-D to Mm
    assert dev.phase1("BatchMatMul", a2, b2, out, 0) == INVALID  # 2-D to BatchMatMul
    assert dev.phase1("Mm", a2, b2, dev.empty((4, 2), FLOAT), 0) == INVALID  # out shape
    assert dev.phase1("Mm", a2, b2, out, 5) == INVALID  # cubeMathType
    assert dev.phase1("Mm", a2, b2, out, -1) == INVALID
    ints = dev.tensor(np.zeros((2, 3)), INT32)
    assert dev.phase1("Matmul", ints, b2, out, 0) == INVALID


# ----------------------------------------------------------------------------------------------- softmax


def softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_softmax_and_log_softmax(dev, dtype, dim):
    x = rand((3, 4, 5), -4, 4)
    tx = dev.tensor(x, dtype, "transposed")
    out = dev.empty(x.shape, dtype, "offset")
    ws = dev.run("Softmax", tx, dim, out)
    assert ws > 0
    xs = tx.host.astype(np.float64)
    close(out.read(), as_dtype(softmax_np(xs, dim), dtype), dtype)
    dev.run("LogSoftmax", tx, dim, out)
    close(out.read(), as_dtype(np.log(softmax_np(xs, dim)), dtype), dtype, scale=2)
    assert dev.phase1("Softmax", tx, 3, out) == INVALID
    assert dev.phase1("LogSoftmax", tx, -4, out) == INVALID


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_softmax_backward_matches_finite_differences(dev, dtype):
    x, g = rand((3, 5)), rand((3, 5))
    y = softmax_np(x, 1)
    ty, tg, out = dev.tensor(y, dtype), dev.tensor(g, dtype, "strided"), dev.empty((3, 5), dtype)
    dev.run("SoftmaxBackward", tg, ty, -1, out)
    # d/dx of sum(g * softmax(x)), for the x whose softmax is (about) y.
    want, h = np.zeros_like(x), 1e-6
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        want[idx] = (np.sum(tg.host * softmax_np(x + e, 1)) - np.sum(tg.host * softmax_np(x - e, 1))) / (2 * h)
    close(out.read(), want, dtype, scale=1 if dtype != FLOAT else 50)


# -------------------------------------------------------------------------------------------------- norms


def layer_norm_np(x, k, w, b, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return (x - mean) * rstd * w + b, mean, rstd


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("k,affine", [(1, True), (2, True), (1, False)])
def test_layer_norm(dev, dtype, k, affine):
    x = rand((2, 3, 8), -3, 3)
    ns = x.shape[3 - k:]
    tx = dev.tensor(x, dtype, "strided")
    tw = dev.tensor(rand(ns, 0.5, 1.5), dtype) if affine else None
    tb = dev.tensor(rand(ns), dtype) if affine else None
    stat = x.shape[:3 - k] + (1,) * k
    out, mean, rstd = dev.empty(x.shape, dtype), dev.empty(stat, FLOAT), dev.empty(stat, FLOAT)
    ws = dev.run("LayerNorm", tx, dev.ints(ns), tw, tb, 1e-5, out, mean, rstd)
    assert ws > 0
    w = tw.host if affine else 1.0
    b = tb.host if affine else 0.0
    want, m, r = layer_norm_np(tx.host.astype(np.float64), k, w, b, 1e-5)
    close(out.read(), as_dtype(want, dtype), dtype, scale=2)
    close(mean.read(), m, FLOAT)
    close(rstd.read(), r, FLOAT)
    # Without the optional statistics outputs.
    dev.run("LayerNorm", tx, dev.ints(ns), tw, tb, 1e-5, out, None, None)
    close(out.read(), as_dtype(want, dtype), dtype, scale=2)


def test_layer_norm_argument_errors(dev):
    tx, out = dev.tensor(rand((2, 8)), FLOAT), dev.empty((2, 8), FLOAT)
    assert dev.phase1("LayerNorm", tx, dev.ints([4]), None, None, 1e-5, out, None, None) == INVALID
    assert dev.phase1("LayerNorm", tx, dev.ints([8]), dev.tensor(np.ones(4), FLOAT), None, 1e-5, out, None,
                      None) == INVALID
    assert dev.phase1("LayerNorm", tx, dev.ints([8]), None, None, 1e-5, out, dev.empty((2,), FLOAT),
                      None) == INVALID  # mean must be (2, 1)
    assert dev.phase1("LayerNorm", tx, None, None, None, 1e-5, out, None, None) == NULLPTR


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_rms_norm(dev, dtype):
    x, g = rand((4, 16)), rand((16,), 0.5, 1.5)
    tx, tg = dev.tensor(x, dtype, "transposed"), dev.tensor(g, dtype)
    y, rstd = dev.empty((4, 16), dtype), dev.empty((4, 1), FLOAT)
    dev.run("RmsNorm", tx, tg, 1e-6, y, rstd)
    xs = tx.host.astype(np.float64)
    r = 1 / np.sqrt((xs ** 2).mean(axis=1, keepdims=True) + 1e-6)
    close(y.read(), as_dtype(xs * r * tg.host, dtype), dtype, scale=2)
    close(rstd.read(), r, FLOAT)
    # CANN's tiling (rms_norm_tiling.cpp) only needs each rstd dim to be 1 or x's: (4,) is accepted, (4, 2) is not.
    assert dev.phase1("RmsNorm", tx, tg, 1e-6, y, dev.empty((4,), FLOAT)) == 0
    assert dev.phase1("RmsNorm", tx, tg, 1e-6, y, dev.empty((4, 2), FLOAT)) == 561002
    assert dev.phase1("RmsNorm", tx, tg, 1e-6, y, dev.empty((4, 1), FLOAT16)) == INVALID  # rstd is FLOAT


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True)])
def test_layer_norm_backward_matches_finite_differences(dev, mask):
    x, w, b, g = rand((3, 2, 5)), rand((2, 5), 0.5, 1.5), rand((2, 5)), rand((3, 2, 5))
    eps, k = 1e-5, 2
    tx, tw, tb = dev.tensor(x, FLOAT, "transposed"), dev.tensor(w, FLOAT), dev.tensor(b, FLOAT)
    tg = dev.tensor(g, FLOAT, "offset")
    xs, ws_, bs, gs = (t.host.astype(np.float64) for t in (tx, tw, tb, tg))
    _, m, r = layer_norm_np(xs, k, ws_, bs, eps)
    tm, tr = dev.tensor(m, FLOAT), dev.tensor(r, FLOAT)
    outs = [dev.empty(s, FLOAT) if on else None for on, s in zip(mask, [x.shape, w.shape, b.shape])]
    dev.run("LayerNormBackward", tg, tx, dev.ints([2, 5]), tm, tr, tw, tb, dev.bools(list(mask)), *outs)

    def loss(xv, wv, bv):
        return np.sum(gs * layer_norm_np(xv, k, wv, bv, eps)[0])

    def numeric(which):
        args = [xs, ws_, bs]
        grad, h = np.zeros_like(args[which]), 1e-6
        for idx in np.ndindex(grad.shape):
            plus, minus = [a.copy() for a in args], [a.copy() for a in args]
            plus[which][idx] += h
            minus[which][idx] -= h
            grad[idx] = (loss(*plus) - loss(*minus)) / (2 * h)
        return grad

    for i, t in enumerate(outs):
        if t is not None:
            close(t.read(), numeric(i), FLOAT, scale=100)
    # A requested output that is NULL is an error; a masked-off one may be NULL.
    bad = [None, None, None]
    assert dev.phase1("LayerNormBackward", tg, tx, dev.ints([2, 5]), tm, tr, tw, tb, dev.bools([True, False, False]),
                      *bad) == NULLPTR
    assert dev.phase1("LayerNormBackward", tg, tx, dev.ints([2, 5]), tm, tr, tw, tb, dev.bools([True, False]),
                      *outs) == INVALID


# ------------------------------------------------------------------------------------------- shape ops

CASTS = [(FLOAT, FLOAT16), (FLOAT, BF16), (FLOAT16, FLOAT), (BF16, FLOAT), (FLOAT, INT32), (INT64, FLOAT),
         (INT32, INT64), (FLOAT, BOOL), (BOOL, FLOAT), (INT32, FLOAT16), (FLOAT16, BF16), (FLOAT, INT8)]


@pytest.mark.parametrize("src,dst", CASTS, ids=ident)
def test_cast(dev, src, dst):
    x = rand((3, 4), -100, 100)
    if src in (INT32, INT64):
        x = np.round(x)
    if src == BOOL:
        x = x > 0
    x[0, 0] = 0
    tx = dev.tensor(x, src, "strided")
    out = dev.empty((3, 4), dst)
    dev.run("Cast", tx, dst, out)
    hostv = tx.host.astype(np.float64)
    if dst in (INT32, INT8):
        want = np.trunc(hostv).astype(np.int64)
        if dst == INT8:
            want = want.astype(np.int8)  # out-of-range wraps like the device's narrowing store
            mask = np.abs(np.trunc(hostv)) < 128
            np.testing.assert_array_equal(out.read()[mask], want[mask])
            return
    elif dst == BOOL:
        want = hostv != 0
    elif dst == INT64:
        want = hostv.astype(np.int64)
    else:
        want = as_dtype(hostv, dst)
    np.testing.assert_array_equal(out.read(), want)
    assert dev.phase1("Cast", tx, FLOAT if dst != FLOAT else INT32, out) == INVALID  # dtype != out's


@pytest.mark.parametrize("dtype", [FLOAT, BF16, INT64], ids=ident)
@pytest.mark.parametrize("dim", [1, -2])
def test_cat(dev, dtype, dim):
    parts = [rng.integers(-50, 50, (2, n, 3)) for n in (1, 4, 2)]
    layouts = ["contig", "transposed", "offset"]
    ts = [dev.tensor(p, dtype, lay) for p, lay in zip(parts, layouts)]
    out = dev.empty((2, 7, 3), dtype, "strided")
    dev.run("Cat", dev.tensor_list(ts), dim, out)
    np.testing.assert_array_equal(out.read(), np.concatenate([t.host for t in ts], axis=1))
    bad = dev.tensor_list([dev.tensor(np.zeros((2, 1, 3)), dtype), dev.tensor(np.zeros((3, 1, 3)), dtype)])
    assert dev.phase1("Cat", bad, 1, dev.empty((2, 2, 3), dtype)) == INVALID
    assert dev.phase1("Cat", dev.tensor_list(ts[:1]), 3, dev.empty((2, 1, 3), dtype)) == INVALID


@pytest.mark.parametrize("dtype", [FLOAT, FLOAT16, BF16, INT32], ids=ident)
def test_foreach_mul_scalar_list(dev, dtype):
    """out[i] = x[i] * scalars[i]; scalars of any numeric dtype, a bool one included, taken as their value."""
    xs = [rng.integers(-20, 20, s) if dtype == INT32 else rand(s) for s in ((2, 3), (4,), (1, 2, 2))]
    scalars = [(3, INT64), (0.375, FLOAT), (True, BOOL)]
    tx = [dev.tensor(x, dtype, lay) for x, lay in zip(xs, ["contig", "strided", "offset"])]
    outs = [dev.empty(x.shape, dtype, "transposed") for x in xs]
    sl = dev.scalar_list([dev.scalar(v, t) for v, t in scalars])
    dev.run("ForeachMulScalarList", dev.tensor_list(tx), sl, dev.tensor_list(outs))
    for t, o, (v, _) in zip(tx, outs, scalars):
        want = t.host.astype(np.float64) * float(v)
        if dtype == INT32:
            np.testing.assert_array_equal(o.read(), np.trunc(want))
        else:
            np.testing.assert_array_equal(o.read(), as_dtype(want, dtype))
    two = dev.scalar_list([dev.scalar(1.0), dev.scalar(2.0)])
    assert dev.phase1("ForeachMulScalarList", dev.tensor_list(tx), two, dev.tensor_list(outs)) == INVALID
    wrong = dev.tensor_list([dev.empty((2, 3), dtype), dev.empty((5,), dtype), dev.empty((1, 2, 2), dtype)])
    assert dev.phase1("ForeachMulScalarList", dev.tensor_list(tx), sl, wrong) == INVALID


@pytest.mark.parametrize("dims", [[2, 0, 1], [-1, -3, -2], [0, 1, 2]])
def test_permute(dev, dims):
    x = rand((2, 3, 4))
    tx = dev.tensor(x, FLOAT, "offset")
    want = np.transpose(tx.host, dims)
    out = dev.empty(want.shape, FLOAT, "transposed")
    dev.run("Permute", tx, dev.ints(dims), out)
    np.testing.assert_array_equal(out.read(), want)
    assert dev.phase1("Permute", tx, dev.ints([0, 0, 1]), out) == INVALID
    assert dev.phase1("Permute", tx, dev.ints([0, 1]), out) == INVALID


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("idx_dtype", [INT32, INT64], ids=ident)
def test_embedding(dev, dtype, idx_dtype):
    w = rand((10, 4))
    ids = np.array([[0, 9, 3], [3, 3, 7]])
    tw, ti = dev.tensor(w, dtype, "transposed"), dev.tensor(ids, idx_dtype, "strided")
    out = dev.empty((2, 3, 4), dtype)
    dev.run("Embedding", tw, ti, out)
    np.testing.assert_array_equal(out.read(), tw.host[ids])
    assert dev.phase1("Embedding", tw, dev.tensor(ids, FLOAT), out) == INVALID  # float indices
    assert dev.phase1("Embedding", tw, ti, dev.empty((2, 3, 5), dtype)) == INVALID


def test_embedding_index_out_of_range_is_a_device_fault(dev):
    stream = dev.new_stream()  # the fault is sticky on its stream
    try:
        tw, ti = dev.tensor(rand((4, 2)), FLOAT), dev.tensor(np.array([1, 4]), INT64)
        dev.run("Embedding", tw, ti, dev.empty((2, 2), FLOAT), stream=stream, expect_sync=AICORE_EXCEPTION)
    finally:
        dev.a.aclrtDestroyStream(stream)


def test_inplace_copy_broadcasts_and_converts(dev):
    dst = dev.tensor(np.zeros((2, 3)), FLOAT16, "transposed")
    src = dev.tensor(rand((3,)), FLOAT)
    dev.run("InplaceCopy", dst, src)
    np.testing.assert_array_equal(dst.read(), np.broadcast_to(src.host.astype(np.float16), (2, 3)))
    d64 = dev.tensor(np.zeros((2, 2)), FLOAT)
    dev.run("InplaceCopy", d64, dev.tensor(np.array([[1, -2], [3, 1 << 20]]), INT64))
    np.testing.assert_array_equal(d64.read(), [[1, -2], [3, 1 << 20]])
    assert dev.phase1("InplaceCopy", src, dst) == INVALID  # (2,3) does not fit into (3,)


@pytest.mark.parametrize("dtype", FP + [INT32, BOOL], ids=ident)
def test_inplace_zero_writes_only_the_view(dev, dtype):
    x = dev.tensor(np.ones((3, 2)), dtype, "strided")
    before = x.storage()
    dev.run("InplaceZero", x)
    after = x.storage()
    np.testing.assert_array_equal(x.read(), np.zeros((3, 2)))
    assert after[0::2].tobytes() == before[0::2].tobytes()  # the gaps between the view's elements


# -------------------------------------------------------------------------------------------- reductions

REDUCE_CASES = [([1], False), ([1], True), ([0, 2], False), ([-1], True), ([], False)]


@pytest.mark.parametrize("dims,keep", REDUCE_CASES)
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_reduce_sum_and_mean(dev, dims, keep, dtype):
    x = rand((2, 3, 4))
    tx = dev.tensor(x, dtype, "transposed")
    axes = tuple(dims) if dims else None
    want = tx.host.astype(np.float64).sum(axis=axes, keepdims=keep)
    out = dev.empty(want.shape, dtype)
    ws = dev.run("ReduceSum", tx, dev.ints(dims), keep, dtype, out)
    assert ws > 0
    close(out.read(), as_dtype(want, dtype), dtype, scale=2)
    dev.run("Mean", tx, dev.ints(dims), keep, dtype, out)
    mean = tx.host.astype(np.float64).mean(axis=axes, keepdims=keep)
    close(out.read(), as_dtype(mean, dtype), dtype, scale=2)


def test_reduce_sum_integer_and_bool_inputs(dev):
    x = rng.integers(-1000, 1000, (3, 5))
    tx = dev.tensor(x, INT32)
    out = dev.empty((5,), INT64)
    dev.run("ReduceSum", tx, dev.ints([0]), False, INT64, out)
    np.testing.assert_array_equal(out.read(), x.sum(axis=0))
    b = dev.tensor(x > 0, BOOL)
    cnt = dev.empty((3, 1), INT32)
    dev.run("ReduceSum", b, dev.ints([1]), True, INT32, cnt)
    np.testing.assert_array_equal(cnt.read(), (x > 0).sum(axis=1, keepdims=True))


def test_reduce_argument_errors(dev):
    tx = dev.tensor(rand((2, 3)), FLOAT)
    out = dev.empty((2,), FLOAT)
    assert dev.phase1("ReduceSum", tx, dev.ints([1]), False, FLOAT, out) == 0
    assert dev.phase1("ReduceSum", tx, dev.ints([1]), False, FLOAT16, out) == INVALID  # dtype != out
    assert dev.phase1("ReduceSum", tx, dev.ints([1, -1]), False, FLOAT, out) == INVALID  # duplicate
    assert dev.phase1("ReduceSum", tx, dev.ints([2]), False, FLOAT, out) == INVALID  # dim range
    assert dev.phase1("Mean", tx, dev.ints([1]), True, FLOAT, out) == INVALID  # keepDim shape
    assert dev.phase1("Mean", dev.tensor(np.ones((2, 3)), INT32), dev.ints([1]), False, INT32,
                      dev.empty((2,), INT32)) == INVALID


@pytest.mark.parametrize("dims,keep", REDUCE_CASES)
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_amax_amin(dev, dims, keep, dtype):
    x = rand((2, 3, 4))
    tx = dev.tensor(x, dtype, "strided")
    axes = tuple(dims) if dims else None
    for op, fn in (("Amax", np.max), ("Amin", np.min)):
        want = fn(tx.host.astype(np.float64), axis=axes, keepdims=keep)
        out = dev.empty(want.shape, dtype)
        ws = dev.run(op, tx, dev.ints(dims), keep, out)
        assert 0 < ws <= 1 << 16  # per-core partials, not a copy of the tensor
        np.testing.assert_array_equal(out.read(), want)  # an element of the input: exact


def test_amax_amin_propagate_nan_and_keep_inf(dev):
    x = np.array([[1.0, np.inf, -2.0], [np.nan, 0.5, -np.inf]])
    tx = dev.tensor(x, FLOAT16)
    for op, want in (("Amax", [np.inf, np.nan]), ("Amin", [-2.0, np.nan])):
        out = dev.empty((2,), FLOAT16)
        dev.run(op, tx, dev.ints([1]), False, out)
        np.testing.assert_array_equal(out.read(), want)
    out = dev.empty((), FLOAT16)
    dev.run("Amax", tx, dev.ints([]), False, out)
    assert np.isnan(out.read())
    ints = dev.tensor(np.array([[3, -7], [2, 9]]), INT32)
    out = dev.empty((2,), INT32)
    dev.run("Amin", ints, dev.ints([0]), False, out)
    np.testing.assert_array_equal(out.read(), [2, -7])


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_aminmax_all(dev, dtype):
    x = rand((3, 4, 5))
    tx = dev.tensor(x, dtype, "strided")
    for shape in ((), (1,), (1, 1)):  # any one-element output
        lo, hi = dev.empty(shape, dtype), dev.empty(shape, dtype)
        ws = dev.run("AminmaxAll", tx, lo, hi)
        assert 0 < ws <= 1 << 16
        wide = tx.host.astype(np.float64)
        np.testing.assert_array_equal(lo.read(), np.full(shape, wide.min()))  # an element of the input: exact
        np.testing.assert_array_equal(hi.read(), np.full(shape, wide.max()))


def test_aminmax_all_nan_inf_ints_and_misuse(dev):
    tx = dev.tensor(np.array([[1.0, np.inf, -2.0], [0.5, 3.0, -np.inf]]), FLOAT16)
    lo, hi = dev.empty((), FLOAT16), dev.empty((), FLOAT16)
    dev.run("AminmaxAll", tx, lo, hi)
    assert lo.read() == -np.inf and hi.read() == np.inf
    tx = dev.tensor(np.array([1.0, np.nan, 7.0]), FLOAT)
    lo, hi = dev.empty((), FLOAT), dev.empty((), FLOAT)
    dev.run("AminmaxAll", tx, lo, hi)
    assert np.isnan(lo.read()) and np.isnan(hi.read())  # NaN propagates, as torch.aminmax
    ints = dev.tensor(np.array([[3, -7], [2, 9]]), INT32)
    lo, hi = dev.empty((1,), INT32), dev.empty((1,), INT32)
    dev.run("AminmaxAll", ints, lo, hi)
    assert lo.read().tolist() == [-7] and hi.read().tolist() == [9]
    tx = dev.tensor(rand((2, 3)), FLOAT)
    assert dev.phase1("AminmaxAll", tx, dev.empty((), FLOAT16), dev.empty((), FLOAT)) == INVALID  # dtype != self
    assert dev.phase1("AminmaxAll", tx, dev.empty((), FLOAT), dev.empty((2,), FLOAT)) == INVALID  # two elements
    empty = dev.tensor(np.zeros((0, 3)), FLOAT)
    assert dev.phase1("AminmaxAll", empty, dev.empty((), FLOAT), dev.empty((), FLOAT)) == INVALID


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.0, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_norm_and_linalg_vector_norm(dev, p, dtype):
    x = rand((3, 5))
    x[0, 1] = 0.0
    tx = dev.tensor(x, dtype, "transposed")
    v = tx.host.astype(np.float64)
    want_all = np.linalg.norm(v.ravel(), ord=p)
    want_rows = np.linalg.norm(v, ord=p, axis=1, keepdims=True)
    out = dev.empty((), dtype)
    ws = dev.run("Norm", tx, dev.scalar(p), dev.ints([]), False, out)
    assert 0 < ws <= 1 << 16
    close(out.read(), as_dtype(want_all, dtype), dtype, scale=2)
    rows = dev.empty((3, 1), dtype)
    dev.run("LinalgVectorNorm", tx, dev.scalar(p), dev.ints([1]), True, dtype, rows)
    close(rows.read(), as_dtype(want_rows, dtype), dtype, scale=2)


@pytest.mark.parametrize("dtype", [FLOAT16, BF16], ids=ident)
def test_norm_and_mean_into_float32(dev, dtype):
    # Half-precision input, float32 result (msprobe's precision "high"): no rounding to the input's dtype.
    x = rand((64,), 10.0, 300.0)
    tx = dev.tensor(x, dtype)
    v = tx.host.astype(np.float64)
    out = dev.empty((), FLOAT)
    dev.run("LinalgVectorNorm", tx, dev.scalar(2.0), dev.ints([]), False, FLOAT, out)
    close(out.read(), np.float32(np.linalg.norm(v)), FLOAT)
    dev.run("Mean", tx, dev.ints([]), False, FLOAT, out)
    close(out.read(), np.float32(v.mean()), FLOAT)
    assert dev.phase1("LinalgVectorNorm", tx, dev.scalar(2.0), dev.ints([]), False, FLOAT16, out) == INVALID


def test_norm_of_fp16_overflows_like_the_dtype(dev):
    tx = dev.tensor(np.full(16, 30000.0), FLOAT16)  # the L2 norm, 120000, is above fp16's 65504
    out = dev.empty((), FLOAT16)
    dev.run("LinalgVectorNorm", tx, dev.scalar(2.0), dev.ints([]), False, FLOAT16, out)
    assert np.isinf(out.read())


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_is_finite_pos_inf_neg_inf_and_counting(dev, dtype):
    x = np.array([[1.0, np.inf, np.nan, -np.inf], [-0.0, 7.0, np.inf, np.nan]])
    tx = dev.tensor(x, dtype, "offset")
    for op, fn in (("IsFinite", np.isfinite), ("IsPosInf", np.isposinf), ("IsNegInf", np.isneginf)):
        mask = dev.empty(x.shape, BOOL)
        dev.run(op, tx, mask)
        np.testing.assert_array_equal(mask.read(), fn(x))
        count = dev.empty((), INT64)
        dev.run("ReduceSum", mask, dev.ints([]), False, INT64, count)
        assert count.read() == fn(x).sum()
    assert dev.phase1("IsFinite", tx, dev.empty((2, 4), FLOAT)) == INVALID  # out must be BOOL
    assert dev.phase1("IsFinite", tx, dev.empty((4, 2), BOOL)) == INVALID  # shape


def test_statistic_ops_argument_errors(dev):
    tx = dev.tensor(rand((2, 3)), FLOAT)
    assert dev.phase1("Amax", tx, dev.ints([1]), False, dev.empty((2,), FLOAT16)) == INVALID  # dtype != self
    assert dev.phase1("Amin", tx, dev.ints([1, 1]), False, dev.empty((2,), FLOAT)) == INVALID  # duplicate
    assert dev.phase1("Amax", dev.tensor(np.zeros((0, 3)), FLOAT), dev.ints([0]), False,
                      dev.empty((3,), FLOAT)) == INVALID  # nothing to take the max of
    assert dev.phase1("Norm", tx, None, dev.ints([]), False, dev.empty((), FLOAT)) == NULLPTR
    assert dev.phase1("Norm", dev.tensor(np.ones((2, 3)), INT32), dev.scalar(2.0), dev.ints([]), False,
                      dev.empty((), FLOAT)) == INVALID


# ------------------------------------------------------------------------------------------------ losses


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_mse_loss_and_backward(dev, dtype, reduction):
    x, y = rand((3, 4)), rand((4,))
    tx, ty = dev.tensor(x, dtype, "strided"), dev.tensor(y, dtype)
    xs, ys = tx.host.astype(np.float64), ty.host.astype(np.float64)
    sq = (xs - ys) ** 2
    want = [sq, sq.mean(), sq.sum()][reduction]
    out = dev.empty(want.shape, dtype)
    dev.run("MseLoss", tx, ty, reduction, out)
    close(out.read(), as_dtype(want, dtype), dtype, scale=2)
    # Backward: d/dx of sum(g * loss) (g a scalar for the reduced forms).
    g = rand((3, 4)) if reduction == 0 else np.array(1.5)
    tg = dev.tensor(g, dtype)
    gx = dev.empty((3, 4), dtype, "transposed")
    dev.run("MseLossBackward", tg, tx, ty, reduction, gx)
    grad = 2 * (xs - ys) * tg.host / (xs.size if reduction == 1 else 1)
    close(gx.read(), as_dtype(grad, dtype), dtype, scale=2)
    assert dev.phase1("MseLoss", tx, ty, 3, out) == INVALID


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("padding,scale", [(-1, False), (3, False), (-1, True)])
def test_embedding_dense_backward(dev, dtype, padding, scale):
    ids = np.array([[0, 3, 3], [5, 3, 0]])
    g = rand((2, 3, 4))
    ti, tg = dev.tensor(ids, INT64, "transposed"), dev.tensor(g, dtype, "offset")
    out = dev.empty((6, 4), FLOAT)
    dev.run("EmbeddingDenseBackward", tg, ti, 6, padding, scale, out)
    want = np.zeros((6, 4))
    counts = np.bincount(ids.ravel(), minlength=6)
    for i, row in zip(ids.ravel(), tg.host.reshape(-1, 4).astype(np.float64)):
        if i != padding:
            want[i] += row / (counts[i] if scale else 1)
    close(out.read(), want, FLOAT)
    assert dev.phase1("EmbeddingDenseBackward", tg, ti, 7, padding, scale, out) == INVALID


# ------------------------------------------------------------------------------------------------- AdamW


def adamw_np(p, m, v, g, step, lr, b1, b2, wd, eps, amsgrad, maximize, vmax):
    g = -g if maximize else g
    p = p * (1 - lr * wd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    if amsgrad:
        vmax = np.maximum(vmax, v)
    denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(bc2) + eps
    return p - lr / bc1 * m / denom, m, v, vmax


@pytest.mark.parametrize("dtype,step_dtype", [(FLOAT, FLOAT), (FLOAT, INT64), (BF16, FLOAT), (FLOAT16, INT64)],
                         ids=ident)
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_apply_adamw_v2(dev, dtype, step_dtype, amsgrad, maximize):
    shape = (3, 5)
    p, m, g = rand(shape), rand(shape, -0.1, 0.1), rand(shape)
    v, vmax = rand(shape, 0, 0.1), rand(shape, 0, 0.2)
    tp, tm, tv = dev.tensor(p, dtype), dev.tensor(m, dtype, "strided"), dev.tensor(v, dtype, "transposed")
    tmax = dev.tensor(vmax, dtype) if amsgrad else None
    tg, ts = dev.tensor(g, dtype, "offset"), dev.tensor(np.array([3]), step_dtype)
    hp = [np.float64(np.float32(x)) for x in (1e-2, 0.9, 0.999, 0.01, 1e-8)]  # the floats the op receives
    dev.run("ApplyAdamWV2", tp, tm, tv, tmax, tg, ts, *hp, amsgrad, maximize)
    want = adamw_np(*(t.host.astype(np.float64) for t in (tp, tm, tv, tg)), 3, *hp, amsgrad, maximize,
                    tmax.host.astype(np.float64) if amsgrad else None)
    got = [tp.read(), tm.read(), tv.read()] + ([tmax.read()] if amsgrad else [])
    for a, b in zip(got, want):
        close(a, as_dtype(b, dtype), dtype, scale=4)
    if amsgrad:
        assert dev.phase1("ApplyAdamWV2", tp, tm, tv, None, tg, ts, *hp, True, False) == NULLPTR
    assert dev.phase1("ApplyAdamWV2", tp, tm, tv, tmax, tg, dev.tensor(np.array([1, 2]), FLOAT), *hp, amsgrad,
                      maximize) == INVALID


# --------------------------------------------------------------------------------- executors and errors


def test_required_null_dead_handle_and_shape_errors(dev):
    x, y, out = dev.tensor(rand((2, 3)), FLOAT), dev.tensor(rand((3,)), FLOAT), dev.empty((2, 3), FLOAT)
    one = dev.scalar(1.0)
    assert dev.phase1("Add", x, y, one, out) == 0
    assert dev.phase1("Add", x, None, one, out) == NULLPTR
    assert dev.phase1("Add", x, y, None, out) == NULLPTR
    assert dev.phase1("Add", x, y, one, None) == NULLPTR
    assert dev.phase1("Add", x, dev.tensor(rand((4,)), FLOAT), one, out) == INVALID  # does not broadcast
    assert dev.phase1("Add", x, y, one, dev.empty((3, 2), FLOAT)) == INVALID  # out shape
    assert b"aclnnAddGetWorkspaceSize: out: shape [3,2]" in dev.a.aclGetRecentErrMsg()
    dead = dev.tensor(rand((2, 3)), FLOAT)
    assert dev.n.aclDestroyTensor(dead.handle) == 0
    assert dev.phase1("Add", dead, y, one, out) == INVALID
    dead_scalar = dev.n.aclCreateScalar(store(np.array([1.0]), FLOAT).ctypes.data, FLOAT)
    assert dev.n.aclDestroyScalar(dead_scalar) == 0
    assert dev.phase1("Add", x, y, Handle(dead_scalar), out) == INVALID
    # Phase 1 also needs somewhere to put the workspace size and the executor.
    op = dev.op("Add")
    ex = ctypes.c_void_p(0)
    assert op.phase1(x.handle, y.handle, one.handle, out.handle, None, ctypes.byref(ex)) == NULLPTR


def test_executor_is_freed_by_phase_two_and_checks_its_workspace(dev):
    x, out = dev.tensor(rand((4, 8)), FLOAT), dev.empty((4, 8), FLOAT)
    op = dev.op("Softmax")
    ws, ex = op.prepare(x.handle, -1, out.handle)
    assert ws > 0
    assert op.phase2(None, 0, ex, dev.stream) == INVALID  # the workspace is required
    w = dev.malloc(ws)
    assert dev.op("Exp").phase2(w, ws, ex, dev.stream) == INVALID  # another op's phase 2
    assert op.phase2(w, ws, ex, dev.stream) == 0
    assert op.phase2(w, ws, ex, dev.stream) == INVALID  # freed by the first phase 2
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    close(out.read(), softmax_np(x.host.astype(np.float64), 1), FLOAT)


def test_repeatable_executor_rebinds_addresses(dev):
    a, b = dev.tensor(rand((2, 3)), FLOAT), dev.tensor(rand((2, 3)), FLOAT)
    out = dev.empty((2, 3), FLOAT)
    op = dev.op("Mul")
    ws, ex = op.prepare(a.handle, b.handle, out.handle)
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == 0
    for _ in range(2):
        assert op.phase2(None, ws, ex, dev.stream) == 0
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    close(out.read(), a.host.astype(np.float64) * b.host, FLOAT)
    # Rebind self (slot 0) and out (slot 2) to fresh buffers, as MindSpore's executor cache does.
    a2, out2 = dev.tensor(rand((2, 3)), FLOAT), dev.empty((2, 3), FLOAT)
    assert dev.n.aclSetTensorAddr(ex, 0, a.handle, a2.ptr) == 0
    assert dev.n.aclSetTensorAddr(ex, 2, out.handle, out2.ptr) == 0
    assert dev.n.aclSetTensorAddr(ex, 3, out.handle, out2.ptr) == 0  # the index of a built-in op is not used
    assert op.phase2(None, ws, ex, dev.stream) == 0
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    close(out2.read(), a2.host.astype(np.float64) * b.host, FLOAT)
    assert dev.n.aclDestroyAclOpExecutor(ex) == 0
    assert op.phase2(None, ws, ex, dev.stream) == INVALID


def test_repeatable_cat_rebinds_a_list_member(dev):
    p0, p1 = dev.tensor(rand((2, 2)), FLOAT), dev.tensor(rand((1, 2)), FLOAT)
    out = dev.empty((3, 2), FLOAT)
    lst = dev.tensor_list([p0, p1])
    op = dev.op("Cat")
    ws, ex = op.prepare(lst.handle, 0, out.handle)
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == 0
    q1 = dev.tensor(rand((1, 2)), FLOAT)
    assert dev.n.aclSetDynamicTensorAddr(ex, 0, 1, lst.handle, q1.ptr) == 0
    assert op.phase2(None, ws, ex, dev.stream) == 0
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    np.testing.assert_array_equal(out.read(), np.concatenate([p0.host, q1.host]))
    assert dev.n.aclDestroyAclOpExecutor(ex) == 0


def test_perturb_switch_plants_a_wrong_kernel(dev, monkeypatch):
    a, b = dev.tensor(rand((3, 4)), FLOAT), dev.tensor(rand((3, 4)), FLOAT)
    exact = a.host.astype(np.float64) * b.host
    out, other = dev.empty((3, 4), FLOAT), dev.empty((3, 4), FLOAT)
    monkeypatch.setenv("FAKE_CANN_PERTURB_OP", "Mul")
    dev.run("Mul", a, b, out)
    dev.run("Add", a, b, dev.scalar(1.0), other)  # other ops are untouched
    close(out.read(), as_dtype(exact * 1.001, FLOAT), FLOAT)
    assert not np.allclose(out.read(), exact, rtol=1e-4, atol=0)
    close(other.read(), as_dtype(a.host.astype(np.float64) + b.host, FLOAT), FLOAT)
    monkeypatch.delenv("FAKE_CANN_PERTURB_OP")
    dev.run("Mul", a, b, out)
    close(out.read(), as_dtype(exact, FLOAT), FLOAT)


def test_perturb_element_switch_changes_one_element(dev, monkeypatch):
    """FAKE_CANN_PERTURB_ELEMENT=Op[:index]: one element (C order, default 0) of the op's first floating-point output
    multiplied by 1.01; a malformed index fails phase 1 with the variable named."""
    a, b = dev.tensor(rand((3, 4)), FLOAT), dev.tensor(rand((3, 4)), FLOAT)
    exact = as_dtype(a.host.astype(np.float64) * b.host, FLOAT)
    out = dev.empty((3, 4), FLOAT)
    for setting, index in (("Mul", 0), ("Mul:7", 7)):
        monkeypatch.setenv("FAKE_CANN_PERTURB_ELEMENT", setting)
        dev.run("Mul", a, b, out)
        want = exact.copy()
        want.flat[index] = as_dtype(np.float64(exact.flat[index]) * 1.01, FLOAT)
        np.testing.assert_array_equal(out.read(), want)
    monkeypatch.setenv("FAKE_CANN_PERTURB_ELEMENT", "Muls:0")  # another op: untouched
    dev.run("Mul", a, b, out)
    np.testing.assert_array_equal(out.read(), exact)
    monkeypatch.setenv("FAKE_CANN_PERTURB_ELEMENT", "Mul:x1")
    assert dev.phase1("Mul", a, b, out) == INVALID
    assert b"FAKE_CANN_PERTURB_ELEMENT='Mul:x1'" in dev.a.aclGetRecentErrMsg()


# ------------------------------------------------------------------------------------------ ForeachNorm

@pytest.mark.parametrize("dtype", [FLOAT, FLOAT16, BF16])
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_foreach_norm_is_each_tensors_norm(dev, dtype, p):
    xs = [dev.tensor(rand((3, 5)), dtype), dev.tensor(rand((7,)), dtype, "strided"),
          dev.tensor(rand((2, 2, 3)), dtype, "offset")]
    outs = [dev.empty((), dtype), dev.empty((1,), dtype), dev.empty((), dtype)]
    dev.run("ForeachNorm", dev.tensor_list(xs), dev.scalar(p, DOUBLE), dev.tensor_list(outs))
    for x, out in zip(xs, outs):
        v = np.asarray(x.host, dtype=np.float64)
        want = np.sum(np.abs(v)) if p == 1.0 else np.sqrt(np.sum(v * v))
        close(np.asarray(out.read()).reshape(()), as_dtype(np.array(want), dtype), dtype)


def test_foreach_norm_equals_linalg_vector_norm_bit_for_bit(dev):
    """The statistics of a tensor are the same whichever op takes its L2 norm."""
    vals = rand((64, 9))
    x = dev.tensor(vals, FLOAT16)
    single, listed = dev.empty((), FLOAT16), dev.empty((), FLOAT16)
    dev.run("LinalgVectorNorm", x, dev.scalar(2.0, DOUBLE), dev.ints([]), False, FLOAT16, single)
    dev.run("ForeachNorm", dev.tensor_list([x]), dev.scalar(2.0, FLOAT), dev.tensor_list([listed]))
    assert single.read().tobytes() == listed.read().tobytes()


def test_foreach_norm_refusals(dev):
    a, b = dev.tensor(rand((4,)), FLOAT), dev.tensor(rand((4,)), FLOAT16)
    two = dev.scalar(2.0, DOUBLE)

    def outs(*dtypes, shape=()):
        return dev.tensor_list([dev.empty(shape, d) for d in dtypes])

    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), two, outs(FLOAT)) == 0
    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), dev.scalar(3.0, DOUBLE), outs(FLOAT)) == INVALID  # A2: 1, 2
    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), dev.scalar(2, INT32), outs(FLOAT)) == INVALID
    assert dev.phase1("ForeachNorm", dev.tensor_list([a, b]), two, outs(FLOAT, FLOAT16)) == INVALID  # one dtype
    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), two, outs(FLOAT16)) == INVALID  # out's dtype is x's
    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), two, outs(FLOAT, shape=(2,))) == INVALID  # one element
    assert dev.phase1("ForeachNorm", dev.tensor_list([a, a]), two, outs(FLOAT)) == INVALID  # one out per tensor
    assert dev.phase1("ForeachNorm", dev.tensor_list([a]), None, outs(FLOAT)) == NULLPTR
    many = [dev.tensor(rand((1,)), FLOAT) for _ in range(257)]
    assert dev.phase1("ForeachNorm", dev.tensor_list(many), two, outs(*[FLOAT] * 257)) == INVALID  # 256 at most


# ------------------------------------------------------------------ repeatable executors: nnopbase's rules

INNER, INNER_NULLPTR = 561000, 561103


def test_set_tensor_addr_rules(dev):
    """opbase acl_op_api.cpp: the tensor named gets the address (NULL: 561103), then the executor (NULL: 561103);
    the index of a built-in op is [[maybe_unused]]: out of range is no error, and the tensor named is the one set."""
    a, b, out = dev.tensor(rand((2, 3)), FLOAT), dev.tensor(rand((2, 3)), FLOAT), dev.empty((2, 3), FLOAT)
    op = dev.op("Mul")
    ws, ex = op.prepare(a.handle, b.handle, out.handle)
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == 0
    n = dev.n
    P, S = ctypes.c_void_p, ctypes.c_size_t
    for fn in (n.aclSetInputTensorAddr, n.aclSetOutputTensorAddr):
        fn.argtypes, fn.restype = [P, S, P, P], ctypes.c_int
    a2, out2 = dev.tensor(rand((2, 3)), FLOAT), dev.empty((2, 3), FLOAT)
    assert n.aclSetInputTensorAddr(ex, 0, None, a2.ptr) == INNER_NULLPTR
    assert n.aclSetInputTensorAddr(None, 0, a.handle, a2.ptr) == INNER_NULLPTR
    assert n.aclSetInputTensorAddr(ex, 2, a.handle, a2.ptr) == 0  # Mul has 2 inputs: index 2 is ignored
    assert n.aclSetOutputTensorAddr(ex, 1, out.handle, out2.ptr) == 0  # and 1 output
    addr = ctypes.c_void_p()
    assert n.aclGetRawTensorAddr(ctypes.c_void_p(a.handle), ctypes.byref(addr)) == 0 and addr.value == a2.ptr
    assert op.phase2(None, ws, ex, dev.stream) == 0
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    close(out2.read(), a2.host.astype(np.float64) * b.host, FLOAT)
    assert n.aclDestroyAclOpExecutor(ex) == 0
    assert n.aclSetAclOpExecutorRepeatable(ex) == INNER  # no executor any more
    assert n.aclSetAclOpExecutorRepeatable(None) == INNER_NULLPTR


def test_an_executor_made_with_huge_page_memory_is_never_repeatable(dev):
    """opbase op_executor.cpp SetRepeatable: an executor made inside InitHugeMemThreadLocal (torch_npu's cache
    path) is refused with ACLNN_ERR_INNER; it still runs once, as a one-shot executor."""
    n = dev.libs.opapi
    n.InitHugeMemThreadLocal.argtypes, n.InitHugeMemThreadLocal.restype = [ctypes.c_void_p, ctypes.c_bool], ctypes.c_int
    n.UnInitHugeMemThreadLocal.argtypes, n.UnInitHugeMemThreadLocal.restype = [ctypes.c_void_p, ctypes.c_bool], None
    a, b, out = dev.tensor(rand((4,)), FLOAT), dev.tensor(rand((4,)), FLOAT), dev.empty((4,), FLOAT)
    op = dev.op("Mul")
    assert n.InitHugeMemThreadLocal(None, False) == 0
    try:
        ws, ex = op.prepare(a.handle, b.handle, out.handle)
    finally:
        n.UnInitHugeMemThreadLocal(None, False)
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == INNER
    assert op.phase2(None, ws, ex, dev.stream) == 0
    assert op.phase2(None, ws, ex, dev.stream) == INVALID  # freed by its phase 2
    assert dev.a.aclrtSynchronizeStream(dev.stream) == 0
    close(out.read(), a.host.astype(np.float64) * b.host, FLOAT)
    ws, ex = op.prepare(a.handle, b.handle, out.handle)  # outside the scope: repeatable again
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == 0
    assert dev.n.aclDestroyAclOpExecutor(ex) == 0


# ---------------------------------------------------------------------------------------- call counters

def call_counters(dev):
    rt = ctypes.CDLL(os.path.join(dev.libs.lib64, "libruntime.so"))
    rt.fakeCannGetCallCounters.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    rt.fakeCannGetCallCounters.restype = ctypes.c_size_t
    rt.fakeCannCallCounterName.argtypes, rt.fakeCannCallCounterName.restype = [ctypes.c_size_t], ctypes.c_char_p
    n = rt.fakeCannGetCallCounters(None, 0)
    counts = (ctypes.c_uint64 * n)()
    rt.fakeCannGetCallCounters(counts, n)
    return {rt.fakeCannCallCounterName(i).decode(): counts[i] for i in range(n)}


def test_call_counters_count_each_kind_once_per_call(dev):
    a, b, out = dev.tensor(rand((4,)), FLOAT), dev.tensor(rand((4,)), FLOAT), dev.empty((4,), FLOAT)
    lst = dev.tensor_list([dev.tensor(rand((2,)), FLOAT), dev.tensor(rand((2,)), FLOAT)])
    before = call_counters(dev)
    op = dev.op("Mul")
    ws, ex = op.prepare(a.handle, b.handle, out.handle)
    assert dev.n.aclSetAclOpExecutorRepeatable(ex) == 0
    assert dev.n.aclSetTensorAddr(ex, 0, a.handle, a.ptr) == 0
    assert op.phase2(None, ws, ex, dev.stream) == 0
    assert dev.n.aclDestroyAclOpExecutor(ex) == 0
    s = dev.n.aclCreateScalar(store(np.array([1.0]), FLOAT).ctypes.data, FLOAT)
    assert dev.n.aclDestroyScalar(s) == 0
    assert dev.n.aclDestroyTensorList(lst.handle) == 0  # one destruction, members included
    dev.others = [(d, h) for d, h in dev.others if h != lst.handle]
    host = np.zeros(4, np.float32)
    assert dev.a.aclrtMemcpy(host.ctypes.data, 16, out.ptr, 16, acl.MEMCPY_D2H) == 0
    after = call_counters(dev)
    got = {k: after[k] - before[k] for k in after}
    assert got == {"phase1": 1, "phase2": 1, "argument_created": 1, "argument_destroyed": 2, "executor_address": 1,
                   "executor_repeatable": 1, "executor_destroyed": 1, "copy": 1, "event_record": 0,
                   "event_wait": 0, "kernel_launch": 1}, got
