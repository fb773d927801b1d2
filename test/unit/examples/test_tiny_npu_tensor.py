"""tiny_npu.Tensor: host round trips, strided views sharing storage, and torch_npu's aclCreateTensor
convention (storage base pointer, 1-D storage dims, NCL/NCHW/NCDHW formats)."""
import ctypes

import numpy as np
import pytest

from tiny_npu import acl, ops
from tiny_npu.tensor import Tensor


def test_round_trip_fp32_fp16_int64(rt):
    rng = np.random.RandomState(1)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    assert np.array_equal(Tensor.from_numpy(a).numpy(), a)
    h = a.astype(np.float16)
    t = Tensor.from_numpy(h)
    assert t.dtype == acl.FLOAT16 and np.array_equal(t.numpy(), h)
    i = np.arange(-4, 8, dtype=np.int64)
    assert np.array_equal(Tensor.from_numpy(i).numpy(), i)


def test_bf16_rounds_to_nearest_even_and_widens(rt):
    # 1 + 2^-8 is halfway between two bf16 values: ties to even (1.0); 1 + 3*2^-8 -> 1 + 2^-6.
    a = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 3.0e38], dtype=np.float32)
    t = Tensor.from_numpy(a, acl.BF16)
    got = t.numpy()
    assert got.dtype == np.float32
    assert got[0] == 1.0 and got[1] == 1.0 and got[2] == 1.0 + 2 ** -6 and got[3] == -2.5
    assert abs(got[4] - 3.0e38) / 3.0e38 < 2 ** -8


def test_transpose_and_slices_are_views_of_one_storage(rt):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = Tensor.from_numpy(a)
    tt = t.T
    assert tt.storage is t.storage and tt.shape == (6, 4) and tt.strides == (1, 6)
    assert np.array_equal(tt.numpy(), a.T)
    s = t[1:4:2, 2:]
    assert s.storage is t.storage and s.offset == 8 and s.strides == (12, 1)
    assert np.array_equal(s.numpy(), a[1:4:2, 2:])
    assert np.array_equal(t[2].numpy(), a[2]) and np.array_equal(t[-1, 1:5:3].numpy(), a[-1, 1:5:3])
    assert not tt.is_contiguous()
    with pytest.raises(ValueError):
        tt.view(24)
    assert np.array_equal(t.view(2, -1).numpy(), a.reshape(2, 12))


def test_contiguous_copies_a_strided_view(rt):
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    v = Tensor.from_numpy(a).T[1:5]  # [4, 5] view with strides (1, 6), offset 1
    c = v.contiguous()
    assert c.storage is not v.storage and c.is_contiguous()
    assert np.array_equal(c.numpy(), a.T[1:5])


def _query(rt, handle):
    n = rt.libs.nnopbase
    P = ctypes.c_void_p
    for fn in (n.aclGetViewShape, n.aclGetStorageShape, n.aclGetViewStrides):
        fn.argtypes, fn.restype = [P, P, P], ctypes.c_int
    for fn in (n.aclGetViewOffset, n.aclGetFormat, n.aclGetDataType, n.aclGetRawTensorAddr):
        fn.argtypes, fn.restype = [P, P], ctypes.c_int

    def dims(fn):
        out, num = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_uint64()
        assert fn(handle, ctypes.byref(out), ctypes.byref(num)) == 0
        return tuple(out[i] for i in range(num.value))

    off, fmt, dt, addr = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p()
    assert n.aclGetViewOffset(handle, ctypes.byref(off)) == 0
    assert n.aclGetFormat(handle, ctypes.byref(fmt)) == 0
    assert n.aclGetDataType(handle, ctypes.byref(dt)) == 0
    assert n.aclGetRawTensorAddr(handle, ctypes.byref(addr)) == 0
    return dict(shape=dims(n.aclGetViewShape), storage=dims(n.aclGetStorageShape),
                strides=dims(n.aclGetViewStrides), offset=off.value, format=fmt.value, dtype=dt.value,
                addr=addr.value)


@pytest.mark.parametrize("shape,fmt", [((6,), acl.FORMAT_ND), ((2, 3), acl.FORMAT_ND),
                                       ((2, 3, 4), acl.FORMAT_NCL), ((2, 3, 2, 2), acl.FORMAT_NCHW),
                                       ((2, 1, 3, 2, 2), acl.FORMAT_NCDHW)])
def test_acl_tensor_follows_torch_npu_convention(rt, shape, fmt):
    t = Tensor.empty(shape, acl.FLOAT16)
    view = t[1] if len(shape) > 1 else t[2:5]
    for v in (t, view):
        h = ops._create_tensor(rt, v)
        try:
            q = _query(rt, h)
        finally:
            rt.libs.nnopbase.aclDestroyTensor(h)
        assert q["shape"] == v.shape and q["strides"] == v.strides and q["offset"] == v.offset
        assert q["storage"] == (int(np.prod(shape)),)  # storage_nbytes / itemsize, one dim
        assert q["addr"] == t.storage.ptr  # the storage base, not the view's first element
        assert q["format"] == {1: acl.FORMAT_ND, 2: acl.FORMAT_ND, 3: acl.FORMAT_NCL, 4: acl.FORMAT_NCHW,
                               5: acl.FORMAT_NCDHW}[v.ndim]
        assert q["dtype"] == acl.FLOAT16
