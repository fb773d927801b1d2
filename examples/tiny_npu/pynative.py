"""tiny_npu's MindSpore-PyNative-shaped mode (TINY_NPU_PYNATIVE=1): every aclnn op goes through the three queues of
MindSpore's PyNative pipeline (libtiny_npu_pynative.so, pynative.cpp): the op's C++ on frontend_queue, its executor
(cache, phase 1) on backend_queue, its launch (address update, phase 2) on launch_queue; the Python thread only pushes
the op (GIL released) and moves on. MS_DEV_LAUNCH_BLOCKING=1 runs the three stages on the Python thread instead, with
a stream synchronize after each op, as MindSpore 2.7 does.

The dispatch here is private (`_dispatch`), as MindSpore's is native code: with MS_DEV_LAUNCH_BLOCKING=1 kernels carry
the model's Python scope, as tiny_npu's own dispatch gives them."""
import ctypes
import os

from . import acl

MAX_DIMS = 8


class PynArg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32), ("n", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS),
                ("offset", ctypes.c_int64), ("storage", ctypes.c_int64), ("data", ctypes.c_uint64),
                ("f", ctypes.c_double), ("i", ctypes.c_int64)]


def _library():
    name = "libtiny_npu_pynative.so"
    from .runtime import _taskqueue_candidates
    tried = []
    for path in _taskqueue_candidates():
        path = os.path.join(os.path.dirname(path), name)
        if os.path.exists(path):
            return path
        tried.append(path)
    raise acl.AclError(f"{name} not found (build the `examples` target); tried: " + ", ".join(tried))


def enabled():
    return os.environ.get("TINY_NPU_PYNATIVE", "0") not in ("", "0")


def blocking():
    return os.environ.get("MS_DEV_LAUNCH_BLOCKING", "0") == "1"


class Pipeline:
    def __init__(self, rt):
        self.rt = rt
        lib = ctypes.CDLL(_library())  # CDLL: every call releases the GIL
        P = ctypes.c_void_p
        lib.pyn_create.argtypes, lib.pyn_create.restype = [ctypes.c_char_p, ctypes.c_int32, P, ctypes.c_int32], P
        lib.pyn_destroy.argtypes, lib.pyn_destroy.restype = [P], None
        lib.pyn_op.argtypes = [P, ctypes.c_char_p, ctypes.c_char_p, P, P, P, ctypes.c_size_t]
        lib.pyn_op.restype = ctypes.c_int
        lib.pyn_drain.argtypes, lib.pyn_drain.restype = [P], ctypes.c_int
        lib.pyn_last_error.argtypes, lib.pyn_last_error.restype = [], ctypes.c_char_p
        self.lib = lib
        self.blocking = blocking()
        self.handle = lib.pyn_create(acl.ascend_home().encode(), rt.device, rt.stream, 1 if self.blocking else 0)
        if not self.handle:
            raise acl.AclError("pyn_create: " + lib.pyn_last_error().decode(errors="replace"))
        self._keep = []  # arrays an op still points to until pyn_op copied them

    def _dispatch(self, op, args):
        from .tensor import Tensor
        items, keep = [], []

        def tensor(t):
            a = PynArg()
            a.kind, a.dtype, a.ndim = ord("T"), t.dtype, t.ndim
            for d in range(t.ndim):
                a.shape[d], a.strides[d] = t.shape[d], t.strides[d]
            a.offset, a.storage, a.data = t.offset, t.storage_elements(), t.storage.ptr
            return a

        for kind, v in zip(op.kinds, args):
            a = PynArg()
            if kind == "T":
                if v is None:
                    a.kind = ord("N")
                else:
                    if not isinstance(v, Tensor):
                        raise TypeError(f"aclnn{op.name}: expected a Tensor, got {type(v).__name__}")
                    a = tensor(v)
                items.append(a)
            elif kind == "L":
                a.kind, a.n = ord("L"), len(v)
                items.append(a)
                items.extend(tensor(t) for t in v)
            elif kind == "S":
                if v is None:
                    a.kind = ord("Z")
                else:
                    a.kind = ord("S")
                    if isinstance(v, bool):
                        a.dtype, a.i = acl.BOOL, int(v)
                    elif isinstance(v, int):
                        a.dtype, a.i = acl.INT64, v
                    else:
                        a.dtype, a.f = acl.DOUBLE, float(v)
                items.append(a)
            elif kind == "s":
                raise NotImplementedError(f"aclnn{op.name}: the PyNative pipeline passes no char * arguments yet")
            elif kind in "IA":
                arr = (ctypes.c_int64 if kind == "I" else ctypes.c_uint8) * max(len(v), 1)
                buf = arr(*[int(x) for x in v])
                keep.append(buf)
                a.kind, a.n, a.data = ord(kind), len(v), ctypes.addressof(buf)
                items.append(a)
            else:
                a.kind = ord(kind)
                if kind in "df":
                    a.f = float(v)
                else:
                    a.i = int(v)
                items.append(a)
        arr = (PynArg * max(len(items), 1))(*items)
        phase1 = ctypes.cast(op.op.phase1, ctypes.c_void_p).value
        rc = self.lib.pyn_op(self.handle, op.name.encode(), op.kinds.encode(), phase1, op.phase2, arr, len(items))
        if rc != 0:
            raise acl.AclError(f"pyn_op(aclnn{op.name}) failed")
        if self.blocking:
            self.drain()  # a failed op is reported at its call site

    def drain(self):
        rc = self.lib.pyn_drain(self.handle)
        if rc != 0:
            raise acl.AclError("PyNative pipeline: " + self.lib.pyn_last_error().decode(errors="replace"))

    def close(self):
        if self.handle:
            self.lib.pyn_drain(self.handle)
            self.lib.pyn_destroy(self.handle)
            self.handle = None
