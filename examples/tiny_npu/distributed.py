"""Collectives over libhccl: one process per rank.

A global communicator comes from a root info (HcclCommInitRootInfo: rank 0 creates it with HcclGetRootInfo and
publishes its bytes in a file that the launcher named, TINY_NPU_HCCL_ROOT_INFO; the other ranks wait for the file,
the same hand-over torch_npu does through its TCP store) or from a rank table (HcclCommInitClusterInfo, as MindSpore's
RANK_TABLE_FILE launch does). `split` makes sub-communicators of it with HcclCreateSubCommConfig (groups of data
parallelism, a pipeline's stages), and `send` / `recv` move a tensor between two ranks of a communicator.
"""
import ctypes
import json
import os
import struct
import time

from . import acl
from . import ops
from . import runtime as _rt

HCCL_ROOT_INFO_BYTES = 4108
HCCL_REDUCE_SUM = 0
HCCL_DTYPE = {acl.INT8: 0, acl.INT16: 1, acl.INT32: 2, acl.FLOAT16: 3, acl.FLOAT: 4, acl.INT64: 5,
              acl.UINT64: 6, acl.UINT8: 7, acl.UINT16: 8, acl.UINT32: 9, acl.DOUBLE: 10, acl.BF16: 11}
COMM_NAME_MAX_LENGTH = 128
NOT_A_MEMBER = 0xFFFFFFFF  # subCommId of a rank that is in no sub-communicator (with rankIds NULL)


class HcclCommConfig(ctypes.Structure):
    """hccl_types.h's HcclCommConfig."""
    _fields_ = [("reserved", ctypes.c_char * 24), ("hcclBufferSize", ctypes.c_uint32),
                ("hcclDeterministic", ctypes.c_uint32), ("hcclCommName", ctypes.c_char * COMM_NAME_MAX_LENGTH),
                ("hcclUdi", ctypes.c_char * 128), ("hcclOpExpansionMode", ctypes.c_uint32),
                ("hcclRdmaTrafficClass", ctypes.c_uint32), ("hcclRdmaServiceLevel", ctypes.c_uint32)]


def comm_config(name=None):
    """What HcclCommConfigInit (an inline function of hccl.h) makes, with hcclCommName set when `name` is given."""
    c = HcclCommConfig()
    ctypes.memmove(ctypes.addressof(c), struct.pack("=QIIQ", ctypes.sizeof(c), 0xF0F0F0F0, 5, 0), 24)
    c.hcclBufferSize = c.hcclDeterministic = 0xFFFFFFFF
    c.hcclRdmaTrafficClass = c.hcclRdmaServiceLevel = 0xFFFFFFFF
    if name:
        c.hcclCommName = name.encode()
    return c


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


def write_rank_table(path, world_size):
    """A version-1.0 rank table of one server with `world_size` devices (rank r on device r)."""
    devices = [{"device_id": str(r), "device_ip": f"192.168.100.{100 + r}", "rank_id": str(r)}
               for r in range(world_size)]
    table = {"version": "1.0", "server_count": "1", "status": "completed",
             "server_list": [{"server_id": "127.0.0.1", "device": devices}]}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(table, f)
    os.replace(tmp, path)


class ProcessGroup:
    """A communicator this rank is a member of. ProcessGroup(rank, world_size) makes a global one from a root info;
    ProcessGroup.from_rank_table(path, rank) from a rank table; pg.split(...) a sub-communicator."""

    def __init__(self, rank, world_size, root_info_path=None, rt=None, comm=None):
        self.rt = rt or _rt.current()
        self.rank, self.world_size = rank, world_size
        self.h = self.rt.libs.hccl
        if comm is not None:
            self.comm = comm
            return
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

    @classmethod
    def from_rank_table(cls, path, rank, rt=None):
        rt = rt or _rt.current()
        h = rt.libs.hccl
        comm = ctypes.c_void_p(0)
        pg = cls.__new__(cls)
        pg.rt, pg.h = rt, h
        pg._check(h.HcclCommInitClusterInfo(path.encode(), rank, ctypes.byref(comm)),
                  f"HcclCommInitClusterInfo({path}, rank {rank})")
        pg.comm = comm.value
        pg.rank, pg.world_size = pg._query(h.HcclGetRankId), pg._query(h.HcclGetRankSize)
        return pg

    def split(self, rank_ids, sub_id, name=None):
        """The sub-communicator of the ranks `rank_ids` (ranks of this communicator, ascending); every rank calls it,
        the ranks outside get None. `name`: the config's hcclCommName (else HCCL names it after this one)."""
        rank_ids = sorted(rank_ids)
        sub = ctypes.c_void_p(0)
        base = ctypes.c_void_p(self.comm)
        config = comm_config(name)
        if self.rank in rank_ids:
            ids = (ctypes.c_uint32 * len(rank_ids))(*rank_ids)
            rc = self.h.HcclCreateSubCommConfig(ctypes.byref(base), len(rank_ids), ids, sub_id,
                                                rank_ids.index(self.rank), ctypes.byref(config), ctypes.byref(sub))
        else:
            rc = self.h.HcclCreateSubCommConfig(ctypes.byref(base), 0, None, NOT_A_MEMBER, 0, ctypes.byref(config),
                                                ctypes.byref(sub))
        self._check(rc, f"HcclCreateSubCommConfig({rank_ids}, {sub_id})")
        if not sub.value:
            return None
        return ProcessGroup(rank_ids.index(self.rank), len(rank_ids), rt=self.rt, comm=sub.value)

    def name(self):
        buf = ctypes.create_string_buffer(COMM_NAME_MAX_LENGTH)
        self._check(self.h.HcclGetCommName(self.comm, buf), "HcclGetCommName")
        return buf.value.decode()

    def _query(self, fn):
        v = ctypes.c_uint32(0)
        self._check(fn(self.comm, ctypes.byref(v)), fn.__name__)
        return v.value

    def _check(self, rc, what):
        if rc != 0:
            s = self.h.HcclGetErrorString(rc)
            raise HcclError(f"{what} failed with HCCL error {rc} ({s.decode() if s else '?'})")

    def _contiguous(self, t, what):
        if not t.is_contiguous():
            raise ValueError(f"{what} needs a contiguous tensor")
        self.rt.drain()  # the producers of `t` must be on the stream before the transfer

    def all_reduce(self, t, op=HCCL_REDUCE_SUM, stream=None):
        """In-place all-reduce of a contiguous tensor, on `stream` (default: the current stream)."""
        self._contiguous(t, "all_reduce")
        self._check(self.h.HcclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), HCCL_DTYPE[t.dtype], op,
                                         self.comm, stream or self.rt.stream), "HcclAllReduce")
        return t

    def all_gather(self, src, dst, stream=None):
        """dst (world_size x src's elements, rank order) = every rank's src."""
        self._contiguous(src, "all_gather")
        self._contiguous(dst, "all_gather")
        if dst.numel() != src.numel() * self.world_size or dst.dtype != src.dtype:
            raise ValueError(f"all_gather: {dst!r} cannot hold {self.world_size} x {src!r}")
        self._check(self.h.HcclAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), HCCL_DTYPE[src.dtype],
                                         self.comm, stream or self.rt.stream), "HcclAllGather")
        return dst

    def all_to_all_v(self, send, send_counts, recv, recv_counts, stream=None):
        """HcclAlltoAllV: send_counts[r] elements of `send` go to rank r, recv_counts[r] from rank r land in `recv`,
        both in rank order without gaps."""
        self._contiguous(send, "all_to_all_v")
        self._contiguous(recv, "all_to_all_v")
        arrays = []
        for counts in (send_counts, recv_counts):
            displs = [sum(counts[:r]) for r in range(len(counts))]
            arrays += [(ctypes.c_uint64 * len(counts))(*counts), (ctypes.c_uint64 * len(counts))(*displs)]
        dt = HCCL_DTYPE[send.dtype]
        self._check(self.h.HcclAlltoAllV(send.data_ptr(), arrays[0], arrays[1], dt, recv.data_ptr(), arrays[2],
                                         arrays[3], dt, self.comm, stream or self.rt.stream), "HcclAlltoAllV")
        return recv

    def broadcast(self, t, root):
        """In place: every rank's `t` becomes the root's."""
        self._contiguous(t, "broadcast")
        self._check(self.h.HcclBroadcast(t.data_ptr(), t.numel(), HCCL_DTYPE[t.dtype], root, self.comm,
                                         self.rt.stream), "HcclBroadcast")
        return t

    def send(self, t, dst):
        self._contiguous(t, "send")
        self._check(self.h.HcclSend(t.data_ptr(), t.numel(), HCCL_DTYPE[t.dtype], dst, self.comm, self.rt.stream),
                    f"HcclSend(to {dst})")

    def recv(self, t, src):
        """Into `t` (its shape and dtype must be the sender's)."""
        self._contiguous(t, "recv")
        self._check(self.h.HcclRecv(t.data_ptr(), t.numel(), HCCL_DTYPE[t.dtype], src, self.comm, self.rt.stream),
                    f"HcclRecv(from {src})")
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


class CommStream:
    """Collectives on a stream of their own, as torch_npu's ProcessGroupHCCL runs them: the HCCL stream waits for an
    event recorded on the compute stream after the inputs' producers, the collective runs there, and the compute stream
    waits for the collective's own event when the caller waits for its Work (at once for a synchronous collective,
    later for an asynchronous one, which overlaps the compute stream's work in between). A Work holds its tensors
    until then (torch's recordStream): the caching allocator orders reuse on the compute stream only."""

    def __init__(self, group, rt=None):
        self.group = group
        self.rt = rt or group.rt
        self.stream = self.rt.create_stream()
        self.free = []  # events whose last record every wait has already captured

    def _event(self):
        return self.free.pop() if self.free else self.rt.create_event()

    def run(self, call, *tensors):
        """call(stream) issues the collective on the HCCL stream; returns its Work."""
        ready, done = self._event(), self._event()
        self.rt.record_event(ready, self.rt.stream)
        self.rt.wait_event(self.stream, ready)
        self.free.append(ready)  # a wait captures the record it follows: the event may be recorded again
        call(self.stream)
        self.rt.record_event(done, self.stream)
        return Work(self, done, tensors)

    def all_reduce(self, t):
        return self.run(lambda s: self.group.all_reduce(t, stream=s), t)

    def all_gather(self, src, dst):
        return self.run(lambda s: self.group.all_gather(src, dst, stream=s), src, dst)

    def all_to_all_v(self, send, send_counts, recv, recv_counts):
        return self.run(lambda s: self.group.all_to_all_v(send, send_counts, recv, recv_counts, stream=s), send, recv)


class Work:
    """An issued collective (torch's Work): wait() makes the compute stream wait for it."""

    def __init__(self, comm, event, tensors):
        self.comm, self.event, self.tensors = comm, event, tensors

    def wait(self):
        if self.event is not None:
            self.comm.rt.wait_event(self.comm.rt.stream, self.event)
            self.comm.free.append(self.event)
            self.event, self.tensors = None, ()
        return self
