"""Low-level ctypes bindings of the CANN C API, used the way torch_npu uses it.

Libraries are opened from $ASCEND_HOME_PATH/lib64 with dlopen and every function is found with dlsym
on that handle (attribute access on the ctypes library), never through the global namespace: exactly the
path that a preloaded interposer must catch by hooking dlsym.

The GIL, as torch has it: its generated bindings release the GIL around every ATen call, so op dispatch
(libnnopbase's argument handles, libopapi's aclnnXGetWorkspaceSize, the executor-cache helpers) runs on the
Python thread WITHOUT the GIL: every library is opened with ctypes.CDLL, which releases it around the call.
TINY_NPU_HOLD_GIL=1 opens the dispatch libraries with ctypes.PyDLL instead (GIL held), for comparison.
"""
import ctypes
import os


def dispatch_dll():
    """ctypes.CDLL (the GIL released around each call, as torch does), or PyDLL with TINY_NPU_HOLD_GIL=1."""
    return ctypes.PyDLL if os.environ.get("TINY_NPU_HOLD_GIL") == "1" else ctypes.CDLL

import numpy as np

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# aclDataType values (acl_base.h)
FLOAT, FLOAT16, INT8, INT32, UINT8, INT16, UINT16, UINT32, INT64, UINT64, DOUBLE, BOOL, BF16 = (
    0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 27)
FORMAT_ND, FORMAT_NCHW, FORMAT_NCL, FORMAT_NCDHW = 2, 0, 47, 30
MEMCPY_H2D, MEMCPY_D2H, MEMCPY_D2D = 1, 2, 3

# numpy dtype used on the host for each aclDataType; bf16 travels as its raw uint16 bits.
NUMPY_OF = {FLOAT: np.float32, FLOAT16: np.float16, INT8: np.int8, INT32: np.int32, UINT8: np.uint8,
            INT16: np.int16, UINT16: np.uint16, UINT32: np.uint32, INT64: np.int64, UINT64: np.uint64,
            DOUBLE: np.float64, BOOL: np.bool_, BF16: np.uint16}
ACL_OF = {np.dtype(v): k for k, v in NUMPY_OF.items() if k != BF16}
NAMES = {"fp32": FLOAT, "fp16": FLOAT16, "bf16": BF16, "fp64": DOUBLE, "int32": INT32, "int64": INT64,
         "bool": BOOL, "int8": INT8, "uint8": UINT8}


def itemsize(dtype):
    return np.dtype(NUMPY_OF[dtype]).itemsize


def bf16_bits(x):
    """float32 array -> bf16 bits (uint16), round to nearest even (NaN stays NaN)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def bf16_to_float(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_host_array(x, dtype):
    """Host array holding x in the storage form of `dtype` (bf16 as uint16 bits)."""
    if dtype == BF16:
        return bf16_bits(np.asarray(x, dtype=np.float32))
    return np.ascontiguousarray(x, dtype=NUMPY_OF[dtype])


def from_host_array(a, dtype):
    """Storage-form host array -> numpy values (bf16 widened to float32)."""
    return bf16_to_float(a) if dtype == BF16 else a


def ascend_home():
    home = os.environ.get("ASCEND_HOME_PATH")
    return home if home else os.path.join(_REPO, "build", "fake_cann")


class AclError(RuntimeError):
    pass


def check(rc, what):
    if rc != 0:
        raise AclError(f"{what} failed with error {rc}")
    return rc


class Libraries:
    """The CANN libraries, each opened once (dlopen) and searched by handle (dlsym)."""

    def __init__(self, home=None):
        lib64 = os.path.join(home or ascend_home(), "lib64")
        self.lib64 = lib64
        self.ascendcl = ctypes.CDLL(os.path.join(lib64, "libascendcl.so"))
        self.nnopbase = dispatch_dll()(os.path.join(lib64, "libnnopbase.so"))  # op dispatch: GIL released
        self.opapi = dispatch_dll()(os.path.join(lib64, "libopapi.so"))
        self._hccl = None
        self._declare()

    @property
    def hccl(self):
        if self._hccl is None:
            h = ctypes.CDLL(os.path.join(self.lib64, "libhccl.so"))  # collectives block: GIL released
            P, U32, U64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64
            for fn, args in [(h.HcclGetRootInfo, [P]), (h.HcclCommInitRootInfo, [U32, P, U32, P]),
                             (h.HcclAllReduce, [P, P, U64, ctypes.c_int, ctypes.c_int, P, P]),
                             (h.HcclBroadcast, [P, U64, ctypes.c_int, U32, P, P]),
                             (h.HcclGetRankSize, [P, P]), (h.HcclGetRankId, [P, P]),
                             (h.HcclCommDestroy, [P]), (h.HcclCommInitClusterInfo, [ctypes.c_char_p, U32, P]),
                             (h.HcclCreateSubCommConfig, [P, U32, P, U64, U32, P, P]),
                             (h.HcclGetCommName, [P, ctypes.c_char_p]),
                             (h.HcclSend, [P, U64, ctypes.c_int, U32, P, P]),
                             (h.HcclRecv, [P, U64, ctypes.c_int, U32, P, P]),
                             (h.HcclAllGather, [P, P, U64, ctypes.c_int, P, P]),
                             (h.HcclAlltoAllV, [P, P, P, ctypes.c_int, P, P, P, ctypes.c_int, P, P])]:
                fn.argtypes = args
                fn.restype = ctypes.c_int
            h.HcclGetErrorString.argtypes = [ctypes.c_int]
            h.HcclGetErrorString.restype = ctypes.c_char_p
            self._hccl = h
        return self._hccl

    def _declare(self):
        P, S, I64, U64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_uint64
        a, n = self.ascendcl, self.nnopbase
        sigs = [
            (a.aclInit, [ctypes.c_char_p]), (a.aclFinalize, []), (a.aclrtSetDevice, [ctypes.c_int32]),
            (a.aclrtResetDevice, [ctypes.c_int32]), (a.aclrtGetDevice, [P]),
            (a.aclrtCreateStream, [P]), (a.aclrtSynchronizeStream, [P]), (a.aclrtDestroyStream, [P]),
            (a.aclrtMalloc, [P, S, ctypes.c_int]), (a.aclrtFree, [P]),
            (a.aclrtMemcpy, [P, S, P, S, ctypes.c_int]), (a.aclrtMemcpyAsync, [P, S, P, S, ctypes.c_int, P]),
            (a.aclrtMemsetAsync, [P, S, ctypes.c_int32, S, P]),
            (a.aclrtCreateEvent, [P]), (a.aclrtRecordEvent, [P, P]), (a.aclrtStreamWaitEvent, [P, P]),
            (a.aclrtDestroyEvent, [P]),
            (n.aclCreateTensor, [P, U64, ctypes.c_int, P, I64, ctypes.c_int, P, U64, P]),
            (n.aclCreateScalar, [P, ctypes.c_int]), (n.aclCreateIntArray, [P, U64]),
            (n.aclCreateFloatArray, [P, U64]), (n.aclCreateBoolArray, [P, U64]),
            (n.aclCreateTensorList, [P, U64]),
            (n.aclDestroyTensor, [P]), (n.aclDestroyScalar, [P]), (n.aclDestroyIntArray, [P]),
            (n.aclDestroyFloatArray, [P]), (n.aclDestroyBoolArray, [P]), (n.aclDestroyTensorList, [P]),
            (n.aclSetAclOpExecutorRepeatable, [P]), (n.aclDestroyAclOpExecutor, [P]),
            (n.aclSetTensorAddr, [P, S, P, P]), (n.aclSetDynamicTensorAddr, [P, S, S, P, P]),
        ]
        for fn, args in sigs:
            fn.argtypes = args
            fn.restype = ctypes.c_int
        a.aclGetRecentErrMsg.argtypes = []
        a.aclGetRecentErrMsg.restype = ctypes.c_char_p
        for fn in (n.aclCreateTensor, n.aclCreateScalar, n.aclCreateIntArray, n.aclCreateFloatArray,
                   n.aclCreateBoolArray, n.aclCreateTensorList):
            fn.restype = P


# ctypes types of by-value aclnn arguments, by the letter used in op signatures:
#   T tensor/handle pointer, D double, F float, L int64_t, C int8_t, B bool, E aclDataType (enum, int)
#   U uint64_t (EmbeddingDenseBackward's numWeights / paddingIdx), Z char * (FlashAttention's inputLayout, MC2's group)
ARG_TYPES = {"T": ctypes.c_void_p, "D": ctypes.c_double, "F": ctypes.c_float, "L": ctypes.c_int64,
             "C": ctypes.c_int8, "B": ctypes.c_bool, "E": ctypes.c_int, "U": ctypes.c_uint64, "Z": ctypes.c_char_p}


class AclnnOp:
    """An aclnn two-phase op found by dlsym on libopapi: aclnnXGetWorkspaceSize + aclnnX."""

    def __init__(self, libs, name, signature):
        self.name = name
        self.phase1 = getattr(libs.opapi, f"aclnn{name}GetWorkspaceSize")
        self.phase1.argtypes = [ARG_TYPES[c] for c in signature] + [ctypes.c_void_p, ctypes.c_void_p]
        self.phase1.restype = ctypes.c_int
        self.phase2 = getattr(libs.opapi, f"aclnn{name}")
        self.phase2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        self.phase2.restype = ctypes.c_int

    def prepare(self, *args):
        """Phase 1. Returns (workspace_size, executor)."""
        ws = ctypes.c_uint64(0)
        ex = ctypes.c_void_p(0)
        check(self.phase1(*args, ctypes.byref(ws), ctypes.byref(ex)), f"aclnn{self.name}GetWorkspaceSize")
        return ws.value, ex.value

    def phase2_address(self):
        return ctypes.cast(self.phase2, ctypes.c_void_p).value
