"""Data parallelism over libhccl: one process per rank, gradients summed with HcclAllReduce.

Rank 0 creates the root info (HcclGetRootInfo) and publishes its bytes in a file that the launcher
named (TINY_NPU_HCCL_ROOT_INFO); the other ranks wait for the file, then every rank calls
HcclCommInitRootInfo, the same hand-over torch_npu does through its TCP store.
"""
import ctypes
import os
import time

from . import acl
from . import ops
from . import runtime as _rt

HCCL_ROOT_INFO_BYTES = 4108
HCCL_REDUCE_SUM = 0
HCCL_DTYPE = {acl.INT8: 0, acl.INT16: 1, acl.INT32: 2, acl.FLOAT16: 3, acl.FLOAT: 4, acl.INT64: 5,
              acl.UINT64: 6, acl.UINT8: 7, acl.UINT16: 8, acl.UINT32: 9, acl.DOUBLE: 10, acl.BF16: 11}


class HcclError(RuntimeError):
    pass


def publish_root_info(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # readers never see a partial file


def wait_root_info(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise HcclError(f"rank 0 did not publish the HCCL root info in {path} within {timeout:.0f} s")
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read()


class ProcessGroup:
    def __init__(self, rank, world_size, root_info_path=None, rt=None):
        self.rt = rt or _rt.current()
        self.rank, self.world_size = rank, world_size
        self.h = self.rt.libs.hccl
        info = (ctypes.c_char * HCCL_ROOT_INFO_BYTES)()
        path = root_info_path or os.environ.get("TINY_NPU_HCCL_ROOT_INFO")
        if rank == 0:
            self._check(self.h.HcclGetRootInfo(info), "HcclGetRootInfo")
            if world_size > 1:
                if not path:
                    raise HcclError("TINY_NPU_HCCL_ROOT_INFO must name the root-info file for several ranks")
                publish_root_info(path, bytes(info))
        else:
            if not path:
                raise HcclError("TINY_NPU_HCCL_ROOT_INFO must name the root-info file for several ranks")
            data = wait_root_info(path)
            ctypes.memmove(info, data, min(len(data), HCCL_ROOT_INFO_BYTES))
        comm = ctypes.c_void_p(0)
        self._check(self.h.HcclCommInitRootInfo(world_size, info, rank, ctypes.byref(comm)),
                    f"HcclCommInitRootInfo(rank {rank} of {world_size})")
        self.comm = comm.value

    def _check(self, rc, what):
        if rc != 0:
            s = self.h.HcclGetErrorString(rc)
            raise HcclError(f"{what} failed with HCCL error {rc} ({s.decode() if s else '?'})")

    def all_reduce(self, t, op=HCCL_REDUCE_SUM):
        """In-place all-reduce of a contiguous tensor, on the current stream."""
        if not t.is_contiguous():
            raise ValueError("all_reduce needs a contiguous tensor")
        self.rt.drain()  # the producers of `t` must be on the stream before the collective
        self._check(self.h.HcclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), HCCL_DTYPE[t.dtype], op,
                                         self.comm, self.rt.stream), "HcclAllReduce")
        return t

    def average_gradients(self, params):
        for p in params:
            if p.grad is not None:
                self.all_reduce(p.grad)
                ops.muls(p.grad, 1.0 / self.world_size, out=p.grad)

    def average(self, t):
        self.all_reduce(t)
        return ops.muls(t, 1.0 / self.world_size, out=t)

    def destroy(self):
        if self.comm:
            self.rt.synchronize()
            self._check(self.h.HcclCommDestroy(self.comm), "HcclCommDestroy")
            self.comm = None
