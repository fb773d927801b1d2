"""ctypes declarations of the ACL calls the aclop host scripts of the tests use (runtime memory, tensor descs, data
buffers, attributes), loaded from $ASCEND_HOME_PATH/lib64 with ctypes.CDLL as a plain host would: one copy instead of
one per test. Import: `from aclop_ctypes import acl, compiler, P, I64` (and the helpers below)."""
import ctypes
import os

home = os.environ["ASCEND_HOME_PATH"]
acl = ctypes.CDLL(os.path.join(home, "lib64", "libascendcl.so"))
compiler = ctypes.CDLL(os.path.join(home, "lib64", "libacl_op_compiler.so"))
P, I64 = ctypes.c_void_p, ctypes.c_int64
acl.aclrtMalloc.argtypes = [P, ctypes.c_size_t, ctypes.c_int]
acl.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
acl.aclrtSynchronizeStream.argtypes = [P]
acl.aclCreateTensorDesc.argtypes = [ctypes.c_int, ctypes.c_int, P, ctypes.c_int]
acl.aclCreateTensorDesc.restype = P
acl.aclCreateDataBuffer.argtypes = [P, ctypes.c_size_t]
acl.aclCreateDataBuffer.restype = P
acl.aclopCreateAttr.restype = P


def device_copy(a):
    """A device buffer holding numpy array `a` (host to device copy)."""
    p = P()
    assert acl.aclrtMalloc(ctypes.byref(p), a.nbytes, 0) == 0
    assert acl.aclrtMemcpy(p, a.nbytes, a.ctypes.data, a.nbytes, 1) == 0
    return p


def add_operands(n):
    """Operands of a float32 Add of n elements: (x, y, z device buffers: arange(n), ones, zeros; dims; descs(k) that
    makes k ND float32 descs of [n]; the input and output aclDataBuffer arrays)."""
    import numpy as np
    dims = (I64 * 1)(n)
    x = device_copy(np.arange(n, dtype=np.float32))
    y = device_copy(np.ones(n, np.float32))
    z = device_copy(np.zeros(n, np.float32))
    descs = lambda k: (P * k)(*[acl.aclCreateTensorDesc(0, 1, dims, 2) for _ in range(k)])  # noqa: E731
    ins = (P * 2)(acl.aclCreateDataBuffer(x, 4 * n), acl.aclCreateDataBuffer(y, 4 * n))
    outs = (P * 1)(acl.aclCreateDataBuffer(z, 4 * n))
    return x, y, z, dims, descs, ins, outs
