"""The 8- and 4-bit float types of CANN 9.x through the stand-in's aclnnCast, against an independent numpy encoding.

Runs twice (ops.cmake): with FAKE_CANN_SOC=Ascend950PR_9599, whose Cast takes HIFLOAT8, FLOAT8_E5M2, FLOAT8_E4M3FN,
FLOAT4_E2M1 and FLOAT4_E1M2 (ops-math math/cast/op_api/aclnn_cast.cpp REGBASE lists), and with the default
Ascend910B1, whose Cast refuses them (DAV_2201 list: ACLNN_ERR_PARAM_INVALID). The formats here are decoded from
their definitions (opbase hifloat8.cpp for HiFloat8, OCP for the others) and values rounded as math/cast's arch35
policies say: nearest even for fp8 and fp4 (fp4 through bf16 first), nearest with ties away for HiFloat8.
"""
import ctypes
import os

import numpy as np
import pytest

from tiny_npu import acl
from tiny_npu.acl import FLOAT

HIF8, E5M2, E4M3FN, E8M0, F6E3M2, F6E2M3, F4E2M1, F4E1M2 = range(34, 42)
INVALID = 161002


# ---- the formats, decoded independently ----

def ieee_like(code, ebits, mbits):
    """Magnitude of a sign-less code with `ebits` exponent and `mbits` mantissa bits (subnormals, no specials); E1M2's
    one exponent bit has bias 1 (opbase float4_e1m2.h: 0 1 11 is the largest value, 1.75)."""
    bias = 1 if ebits == 1 else 2 ** (ebits - 1) - 1
    e, m = code >> mbits, code & (2 ** mbits - 1)
    return np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))


def hif8_value(code):
    """HiFloat8: a prefix on bits 6..3 tells the exponent field's width; the field's top bit is the exponent's sign."""
    sign = -1.0 if code & 0x80 else 1.0
    if code == 0x80:
        return np.nan
    if code & 0x7F == 0x6F:
        return sign * np.inf
    bits = format(code & 0x7F, "07b")
    if bits[:4] == "0000":
        low = int(bits[4:], 2)
        return 0.0 if low == 0 else sign * 2.0 ** (low - 23)
    for prefix, ewidth in (("0001", 0), ("001", 1), ("01", 2), ("10", 3), ("11", 4)):
        if bits.startswith(prefix):
            rest = bits[len(prefix):]
            break
    efield, mant = rest[:ewidth], rest[ewidth:]
    exp = 0
    if ewidth:
        mag = int("1" + efield[1:], 2)
        exp = -mag if efield[0] == "1" else mag
    frac = int(mant, 2) / 2 ** len(mant) if mant else 0.0
    return sign * (1 + frac) * 2.0 ** exp


def values(t):
    """value of every code of format t (8 bits: 256 codes; 4 bits: 16)."""
    if t == HIF8:
        return np.array([hif8_value(c) for c in range(256)])
    if t == F4E2M1 or t == F4E1M2:
        c = np.arange(16)
        mag = ieee_like(c & 7, 2, 1) if t == F4E2M1 else ieee_like(c & 7, 1, 2)
        return np.where(c & 8, -mag, mag)
    c = np.arange(256)
    if t == E5M2:
        mag = ieee_like(c & 0x7F, 5, 2)
        mag = np.where((c & 0x7F) >> 2 == 31, np.where(c & 3, np.nan, np.inf), mag)
    else:
        mag = ieee_like(c & 0x7F, 4, 3)
        mag = np.where(c & 0x7F == 0x7F, np.nan, mag)
    return np.where(c & 0x80, -mag, mag)


def expected_code(t, x, saturate=True):
    """The code Cast gives for float32 x."""
    vals = values(t)
    bits = 4 if t in (F4E2M1, F4E1M2) else 8
    sign = (1 << (bits - 1)) if np.signbit(x) else 0
    if t in (F4E2M1, F4E1M2):
        if np.isnan(x):
            return 0
        x = float(acl.from_host_array(acl.bf16_bits(np.array([x], np.float32)), acl.BF16)[0])  # through bf16
    elif np.isnan(x):
        return 0x80 if t == HIF8 else 0x7F
    mag = abs(float(x))
    if t == HIF8 and mag == 0:
        return 0
    grid = [(vals[c], c) for c in range(1 << (bits - 1)) if np.isfinite(vals[c])]
    if t == HIF8:
        grid.append((1.5 * 2 ** 15, 0x6F))  # Inf's code is the grid point it replaces
        if mag >= 2 ** 16:
            return sign | 0x6F
    grid.sort()
    top, below_top = grid[-1], grid[-2]
    if t in (E5M2, E4M3FN):
        limit = top[0] + (top[0] - below_top[0]) / 2
        if mag > limit or (mag == limit and top[1] & 1):
            return sign | ({E5M2: 0x7B, E4M3FN: 0x7E}[t] if saturate else {E5M2: 0x7C, E4M3FN: 0x7F}[t])
    if mag >= top[0]:
        return sign | top[1]
    i = next(k for k, (v, _) in enumerate(grid) if v >= mag)
    (lo, lc), (hi, hc) = grid[i - 1], grid[i]
    if hi == mag:
        return sign | hc
    if mag - lo != hi - mag:
        return sign | (lc if mag - lo < hi - mag else hc)
    return sign | (hc if t == HIF8 else (lc if lc % 2 == 0 else hc))


def packed(codes):
    """4-bit codes, two a byte, element 2k in the low nibble."""
    c = np.asarray(codes, dtype=np.uint8)
    if c.size % 2:
        c = np.append(c, 0)
    return (c[0::2] | (c[1::2] << 4)).astype(np.uint8)


def unpacked(raw, n):
    return np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)[:n]


# ---- the device ----

class Device:
    def __init__(self):
        self.libs = acl.Libraries()
        self.a, self.n, self.o = self.libs.ascendcl, self.libs.nnopbase, self.libs.opapi
        assert self.a.aclInit(None) in (0, 100002)
        acl.check(self.a.aclrtSetDevice(0), "aclrtSetDevice")
        self.a.aclrtGetSocName.restype = ctypes.c_char_p
        self.soc = self.a.aclrtGetSocName().decode()
        self.stream = ctypes.c_void_p()
        acl.check(self.a.aclrtCreateStream(ctypes.byref(self.stream)), "aclrtCreateStream")
        self.n.aclCreateTensor.restype = ctypes.c_void_p
        self.n.aclCreateTensor.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                                           ctypes.c_void_p]
        self.o.aclnnCastGetWorkspaceSize.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                                     ctypes.c_void_p, ctypes.c_void_p]
        self.o.aclnnCast.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        self.a.aclrtSetDeviceSatMode.argtypes = [ctypes.c_int]

    def tensor(self, dtype, n, raw):
        """A 1-D tensor of n elements over device memory holding `raw` (bytes)."""
        ptr = ctypes.c_void_p()
        acl.check(self.a.aclrtMalloc(ctypes.byref(ptr), max(len(raw), 1), 0), "aclrtMalloc")
        acl.check(self.a.aclrtMemcpy(ptr, len(raw), raw, len(raw), acl.MEMCPY_H2D), "H2D")
        dims, strides = (ctypes.c_int64 * 1)(n), (ctypes.c_int64 * 1)(1)
        h = self.n.aclCreateTensor(dims, 1, dtype, strides, 0, acl.FORMAT_ND, dims, 1, ptr)
        assert h, f"aclCreateTensor({dtype}) failed"
        return h, ptr

    def cast(self, src_dtype, raw, n, dst_dtype, dst_bytes):
        """(status, raw bytes of the result)."""
        x, _ = self.tensor(src_dtype, n, raw)
        y, yptr = self.tensor(dst_dtype, n, b"\x00" * dst_bytes)
        ws, ex = ctypes.c_uint64(), ctypes.c_void_p()
        rc = self.o.aclnnCastGetWorkspaceSize(x, dst_dtype, y, ctypes.byref(ws), ctypes.byref(ex))
        if rc != 0:
            return rc, None
        acl.check(self.o.aclnnCast(None, 0, ex, self.stream), "aclnnCast")
        acl.check(self.a.aclrtSynchronizeStream(self.stream), "sync")
        out = ctypes.create_string_buffer(dst_bytes)
        acl.check(self.a.aclrtMemcpy(out, dst_bytes, yptr, dst_bytes, acl.MEMCPY_D2H), "D2H")
        return 0, np.frombuffer(out.raw, dtype=np.uint8)


@pytest.fixture(scope="module")
def dev():
    return Device()


def regbase(dev):
    return dev.soc.startswith("Ascend950")


def test_the_soc_played(dev):
    """aclrtGetSocName names the SoC FAKE_CANN_SOC chose (Ascend910B1 when unset)."""
    assert dev.soc == (os.environ.get("FAKE_CANN_SOC") or "Ascend910B1")


def inputs(t):
    """float32 values that exercise every rule: each code's value, the midpoints between neighbours (ties), points
    just beside them, the overflow edge, tiny values, signed zeros, Inf and NaN, and random magnitudes."""
    v = values(t)
    finite = np.unique(np.abs(v[np.isfinite(v)]))
    mids = (finite[1:] + finite[:-1]) / 2
    rng = np.random.default_rng(3)
    rand = np.ldexp(rng.uniform(1, 2, 400), rng.integers(-26, 18, 400))
    pool = np.concatenate([finite, mids, mids * (1 + 2 ** -20), mids * (1 - 2 ** -20), [finite[-1] * 1.06],
                           [finite[-1] * 1.2, finite[-1] * 4, 2.0 ** -23, 2.0 ** -24, 1e-30], rand])
    pool = pool.astype(np.float32)
    return np.concatenate([pool, -pool, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)])


@pytest.mark.parametrize("t", [HIF8, E5M2, E4M3FN, F4E2M1, F4E1M2], ids=["hif8", "e5m2", "e4m3fn", "e2m1", "e1m2"])
def test_float_to_format_rounds_as_documented(dev, t):
    x = inputs(t)
    four = t in (F4E2M1, F4E1M2)
    rc, raw = dev.cast(FLOAT, x.tobytes(), x.size, t, (x.size + 1) // 2 if four else x.size)
    if not regbase(dev):
        assert rc == INVALID  # DAV_2201: not in Cast's list
        return
    assert rc == 0
    got = unpacked(raw, x.size) if four else raw
    want = np.array([expected_code(t, xi) for xi in x], dtype=np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:10]]


@pytest.mark.parametrize("t", [HIF8, E5M2, E4M3FN, F4E2M1, F4E1M2], ids=["hif8", "e5m2", "e4m3fn", "e2m1", "e1m2"])
def test_every_code_reads_its_value(dev, t):
    if not regbase(dev):
        pytest.skip("Ascend910B1's Cast refuses these types")
    four = t in (F4E2M1, F4E1M2)
    codes = np.arange(16 if four else 256, dtype=np.uint8)
    raw = packed(codes) if four else codes
    rc, out = dev.cast(t, raw.tobytes(), codes.size, FLOAT, 4 * codes.size)
    assert rc == 0
    got, want = out.view(np.float32).astype(np.float64), values(t)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    if t == HIF8:
        assert got[0b1000] == 1.0 and got[0x6E] == 32768.0  # ops-nn docs: 0b1000 is 1.0; the largest finite


def test_fp8_overflow_follows_the_saturation_mode(dev):
    """stars cast: SATURATION (the default) clamps to the largest finite value; INFNAN gives Inf (E5M2), NaN
    (E4M3FN)."""
    if not regbase(dev):
        pytest.skip("Ascend910B1's Cast refuses fp8")
    x = np.array([1e6, -1e6, np.inf], np.float32)
    for t, sat, inf in ((E5M2, [0x7B, 0xFB, 0x7B], [0x7C, 0xFC, 0x7C]), (E4M3FN, [0x7E, 0xFE, 0x7E], [0x7F, 0xFF, 0x7F])):
        assert list(dev.cast(FLOAT, x.tobytes(), 3, t, 3)[1]) == sat
        acl.check(dev.a.aclrtSetDeviceSatMode(1), "INFNAN")
        try:
            assert list(dev.cast(FLOAT, x.tobytes(), 3, t, 3)[1]) == inf
        finally:
            acl.check(dev.a.aclrtSetDeviceSatMode(0), "SATURATION")


def test_float6_and_e8m0_are_no_cast_types(dev):
    """Neither list of aclnn_cast.cpp has FLOAT6_E3M2, FLOAT6_E2M3 or FLOAT8_E8M0: refused on every SoC."""
    x = np.ones(4, np.float32)
    for t in (F6E3M2, F6E2M3):
        dims = (ctypes.c_int64 * 1)(4)
        assert not dev.n.aclCreateTensor(dims, 1, t, dims, 0, acl.FORMAT_ND, dims, 1, None)  # not stored at all
    assert dev.cast(FLOAT, x.tobytes(), 4, E8M0, 4)[0] == INVALID


def test_acl_data_type_size(dev):
    """runtime data_buffer.cpp aclDataTypeSizeImpl: the 8-bit floats 1 byte, FLOAT6/FLOAT4 (unlisted) 8."""
    dev.a.aclDataTypeSize.restype = ctypes.c_size_t
    sizes = {t: dev.a.aclDataTypeSize(t) for t in range(34, 42)}
    assert sizes == {34: 1, 35: 1, 36: 1, 37: 1, 38: 8, 39: 8, 40: 8, 41: 8}
    assert dev.a.aclDataTypeSize(29) == 1 and dev.a.aclDataTypeSize(13) == 0 and dev.a.aclDataTypeSize(-1) == 0
