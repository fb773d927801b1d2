"""The device runtime of tiny_npu: ACL init, the current stream, the native launch queue and a
caching allocator, arranged the way torch_npu arranges them.

* Phase 1 of every op runs on the calling Python thread, with the GIL released (ctypes.CDLL, as torch); phase 2 and the destruction
  of the converted arguments run on the native thread of libtiny_npu_taskqueue.so (torch_npu's
  TASK_QUEUE_ENABLE=1 consumer thread, no Python frames), which calls aclrtSetDevice for itself first.
  With TASK_QUEUE_ENABLE=0 (or ASCEND_LAUNCH_BLOCKING=1) they run inline on the Python thread, as there.
  With TASK_QUEUE_ENABLE=2 (torch_npu's EXEC_NPU_CMD_V2) the Python thread only describes the arguments; their
  conversion, phase 1, the workspace, phase 2 and the destruction all run on the queue thread (no ACL call on the
  Python thread; ops.py `_run_v2`). The executor-cache modes (TINY_NPU_EXECUTOR_CACHE, TINY_NPU_PTA_CACHE) keep
  level 1's split.
* Device memory comes from a caching allocator: a freed block goes back to a pool and is reused by
  later work on the same stream, so memory and workspaces stay alive for every queued launch that
  still refers to them; aclrtFree only happens at shutdown, after the stream is synchronized.
"""
import atexit
import collections
import ctypes
import os

from . import acl

ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_MEM_MALLOC_HUGE_FIRST = 0

# Kinds of tnq_call (taskqueue.cpp).
TNQ_RELEASE, TNQ_SET_ADDR, TNQ_PHASE2, TNQ_CALL, TNQ_SET_DYN_ADDR = 0, 1, 2, 3, 4


class TnqCall(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("fn", ctypes.c_void_p), ("a", ctypes.c_size_t * 5)]


def _taskqueue_candidates():
    name = "libtiny_npu_taskqueue.so"
    explicit = os.environ.get("TINY_NPU_TASKQUEUE_LIB")
    if explicit:
        yield explicit
    build = os.environ.get("MSPROBE_BUILD_DIR")
    if build:
        yield os.path.join(build, "examples", name)
    # ASCEND_HOME_PATH=<build>/fake_cann: the queue sits beside it in <build>/examples.
    yield os.path.join(os.path.dirname(os.path.abspath(acl.ascend_home())), "examples", name)
    yield os.path.join(acl._REPO, "build", "examples", name)


def load_taskqueue():
    tried = []
    for path in _taskqueue_candidates():
        if os.path.exists(path):
            # Queueing is part of op dispatch: GIL released like the rest of it (acl.dispatch_dll()); waiting for
            # the queue blocks and always releases it (CDLL).
            lib, blocking = acl.dispatch_dll()(path), ctypes.CDLL(path)
            lib.tnq_destroy, lib.tnq_drain = blocking.tnq_destroy, blocking.tnq_drain
            P, S = ctypes.c_void_p, ctypes.c_size_t
            lib.tnq_create.argtypes, lib.tnq_create.restype = [ctypes.c_int32, P, ctypes.c_int32], P
            lib.tnq_destroy.argtypes, lib.tnq_destroy.restype = [P], None
            lib.tnq_submit.argtypes, lib.tnq_submit.restype = [P, ctypes.c_char_p, P, S], ctypes.c_int
            lib.tnq_launch.argtypes = [P, ctypes.c_char_p, P, P, ctypes.c_uint64, P, P, P, P, S]
            lib.tnq_launch.restype = ctypes.c_int
            lib.tnq_drain.argtypes, lib.tnq_drain.restype = [P], ctypes.c_int
            lib.tnq_last_error.argtypes, lib.tnq_last_error.restype = [], ctypes.c_char_p
            lib.tnq_worker_cpu_ns.argtypes, lib.tnq_worker_cpu_ns.restype = [P], ctypes.c_uint64
            lib.tnq_set_api.argtypes, lib.tnq_set_api.restype = [P, P, S], None
            lib.tnq_launch_v2.argtypes = [P, ctypes.c_char_p, P, P, P, ctypes.c_char_p, P, S]
            lib.tnq_launch_v2.restype = ctypes.c_int
            return lib
        tried.append(path)
    raise acl.AclError("libtiny_npu_taskqueue.so not found (build the `examples` target); tried: "
                       + ", ".join(tried))


def _addr(cfn):
    return ctypes.cast(cfn, ctypes.c_void_p).value


class CachingAllocator:
    """Blocks rounded up to 512 bytes, kept per size; reuse is ordered by the one stream."""

    ROUND = 512

    def __init__(self, rt):
        self.rt = rt
        self.pool = collections.defaultdict(list)
        self.blocks = []
        self.bytes_reserved = 0

    def malloc(self, nbytes):
        size = max(self.ROUND, (nbytes + self.ROUND - 1) // self.ROUND * self.ROUND)
        free = self.pool[size]
        if free:
            return free.pop(), size
        ptr = ctypes.c_void_p(0)
        rc = self.rt.libs.ascendcl.aclrtMalloc(ctypes.byref(ptr), size, ACL_MEM_MALLOC_HUGE_FIRST)
        self.rt.check(rc, f"aclrtMalloc({size})")
        self.blocks.append(ptr.value)
        self.bytes_reserved += size
        return ptr.value, size

    def free(self, ptr, size):
        self.pool[size].append(ptr)

    def release_all(self):
        for ptr in self.blocks:
            self.rt.libs.ascendcl.aclrtFree(ptr)
        self.blocks.clear()
        self.pool.clear()
        self.bytes_reserved = 0


class Runtime:
    """One device, one stream, one launch queue (per process)."""

    def __init__(self, device=0, libs=None):
        self.libs = libs or acl.Libraries()
        self.device = device
        a = self.libs.ascendcl
        rc = a.aclInit(None)
        if rc not in (0, ACL_ERROR_REPEAT_INITIALIZE):
            self.check(rc, "aclInit")
        self._owns_acl = rc == 0
        self.check(a.aclrtSetDevice(device), f"aclrtSetDevice({device})")
        stream = ctypes.c_void_p(0)
        self.check(a.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
        self.stream = stream.value
        self.tq = load_taskqueue()
        # torch_npu's switch: TASK_QUEUE_ENABLE=0 (or ASCEND_LAUNCH_BLOCKING=1) launches inline, 2 moves conversion and
        # phase 1 to the queue thread too.
        level = os.environ.get("TASK_QUEUE_ENABLE", "1")
        self.threaded = level != "0" and os.environ.get("ASCEND_LAUNCH_BLOCKING", "0") in ("", "0")
        self.queue_level = 0 if not self.threaded else 2 if level == "2" else 1
        self.queue = self.tq.tnq_create(device, _addr(a.aclrtSetDevice), 1 if self.threaded else 0)
        self.allocator = CachingAllocator(self)
        self.streams, self.events = [], []  # more streams and events, made by create_stream / create_event
        self.alive = True
        self.executor_cache = None  # set by ops.enable_executor_cache
        # TINY_NPU_PYNATIVE=1: aclnn ops through MindSpore's PyNative queues instead (pynative.py).
        from . import pynative
        self.pynative = pynative.Pipeline(self) if pynative.enabled() else None
        self.destroy_fn = {
            "tensor": _addr(self.libs.nnopbase.aclDestroyTensor),
            "scalar": _addr(self.libs.nnopbase.aclDestroyScalar),
            "int_array": _addr(self.libs.nnopbase.aclDestroyIntArray),
            "bool_array": _addr(self.libs.nnopbase.aclDestroyBoolArray),
            "tensor_list": _addr(self.libs.nnopbase.aclDestroyTensorList),
            "executor": _addr(self.libs.nnopbase.aclDestroyAclOpExecutor),
        }
        if self.queue_level == 2:
            n = self.libs.nnopbase
            # The queue thread's ACL functions, in taskqueue.cpp's TNQ_API_* order.
            api = [n.aclCreateTensor, n.aclCreateScalar, n.aclCreateIntArray, n.aclCreateBoolArray,
                   n.aclCreateTensorList, n.aclDestroyTensor, n.aclDestroyScalar, n.aclDestroyIntArray,
                   n.aclDestroyBoolArray, n.aclDestroyTensorList, a.aclrtMalloc, a.aclrtFree]
            fns = (ctypes.c_void_p * len(api))(*[_addr(f) for f in api])
            self.tq.tnq_set_api(self.queue, fns, len(api))

    # ---- errors -------------------------------------------------------------------------------
    def check(self, rc, what):
        if rc != 0:
            msg = self.libs.ascendcl.aclGetRecentErrMsg()
            detail = f": {msg.decode(errors='replace')}" if msg else ""
            raise acl.AclError(f"{what} failed with error {rc}{detail}")
        return rc

    # ---- the launch queue ---------------------------------------------------------------------
    def launch(self, what, phase2, workspace, ws_size, executor, releases):
        """Queues phase 2 of an aclnn op plus the destruction of its converted arguments."""
        n = len(releases)
        fns = (ctypes.c_void_p * max(n, 1))(*[f for f, _ in releases])
        handles = (ctypes.c_void_p * max(n, 1))(*[h for _, h in releases])
        rc = self.tq.tnq_launch(self.queue, what.encode(), phase2, workspace, ws_size, executor, self.stream,
                                fns, handles, n)
        if rc != 0:
            raise acl.AclError(f"tnq_launch({what}) failed")
        if not self.threaded:
            self.drain()  # inline: report a failed phase 2 at its call site

    def launch_v2(self, what, phase1, phase2, sig, desc):
        """TASK_QUEUE_ENABLE=2: queues an op described by `sig` and the words of `desc` (taskqueue.cpp OpV2), converted,
        prepared and launched on the queue thread."""
        words = (ctypes.c_int64 * max(len(desc), 1))(*desc)
        rc = self.tq.tnq_launch_v2(self.queue, what.encode(), phase1, phase2, self.stream, sig.encode(), words,
                                   len(desc))
        if rc != 0:
            raise acl.AclError(f"tnq_launch_v2({what}) failed")

    def submit(self, what, calls):
        """Queues a list of (kind, fn, args...) native calls, run in order on the queue thread."""
        arr = (TnqCall * max(len(calls), 1))()
        for i, (kind, fn, *args) in enumerate(calls):
            arr[i].kind = kind
            arr[i].fn = fn
            for j, v in enumerate(args):
                arr[i].a[j] = v or 0
        if self.tq.tnq_submit(self.queue, what.encode(), arr, len(calls)) != 0:
            raise acl.AclError(f"tnq_submit({what}) failed")
        if not self.threaded:
            self.drain()

    def drain(self):
        """Waits until the queue thread has launched everything submitted (not until it ran)."""
        if self.pynative is not None:
            self.pynative.drain()
        rc = self.tq.tnq_drain(self.queue)
        if rc != 0:
            raise acl.AclError("task queue: " + self.tq.tnq_last_error().decode(errors="replace"))

    def queue_thread_cpu_ns(self):
        """CPU time the queue thread has used (ns; 0 when items run inline on the caller's thread)."""
        return self.tq.tnq_worker_cpu_ns(self.queue)

    def synchronize(self):
        self.drain()
        self.check(self.libs.ascendcl.aclrtSynchronizeStream(self.stream), "aclrtSynchronizeStream")

    # ---- streams and events ---------------------------------------------------------------------
    def create_stream(self):
        """Another stream of this device (freed at shutdown): torch_npu's HCCL stream, say."""
        stream = ctypes.c_void_p(0)
        self.check(self.libs.ascendcl.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
        self.streams.append(stream.value)
        return stream.value

    def create_event(self):
        event = ctypes.c_void_p(0)
        self.check(self.libs.ascendcl.aclrtCreateEvent(ctypes.byref(event)), "aclrtCreateEvent")
        self.events.append(event.value)
        return event.value

    def record_event(self, event, stream):
        """Records `event` on `stream` after everything queued so far (the launch queue is drained first)."""
        self.drain()
        self.check(self.libs.ascendcl.aclrtRecordEvent(event, stream), "aclrtRecordEvent")

    def wait_event(self, stream, event):
        """`stream` waits, from here on, for the event's latest record (what follows on it is launched later)."""
        self.check(self.libs.ascendcl.aclrtStreamWaitEvent(stream, event), "aclrtStreamWaitEvent")

    # ---- memory -------------------------------------------------------------------------------
    def copy_to_device(self, dst, host_bytes):
        # The block may have been in use by queued work until now: wait for it first.
        self.synchronize()
        buf = ctypes.create_string_buffer(host_bytes, len(host_bytes))
        self.check(self.libs.ascendcl.aclrtMemcpy(dst, len(host_bytes), buf, len(host_bytes), acl.MEMCPY_H2D),
                   "aclrtMemcpy(H2D)")

    def copy_to_host(self, src, nbytes):
        self.synchronize()
        buf = ctypes.create_string_buffer(nbytes)
        self.check(self.libs.ascendcl.aclrtMemcpy(buf, nbytes, src, nbytes, acl.MEMCPY_D2H), "aclrtMemcpy(D2H)")
        return buf.raw

    # ---- teardown -----------------------------------------------------------------------------
    def shutdown(self):
        if not self.alive:
            return
        try:
            if self.executor_cache is not None:
                self.executor_cache.clear()
            self.synchronize()
        finally:
            self.alive = False
            if self.pynative is not None:
                self.pynative.close()
            self.tq.tnq_destroy(self.queue)
            a = self.libs.ascendcl
            for stream in self.streams:  # everything on them is done: the host synchronized the device
                a.aclrtSynchronizeStream(stream)
                a.aclrtDestroyStream(stream)
            for event in self.events:
                a.aclrtDestroyEvent(event)
            self.allocator.release_all()
            a.aclrtDestroyStream(self.stream)
            if self._owns_acl:  # else another user of ACL in this process still needs the device
                a.aclrtResetDevice(self.device)
                a.aclFinalize()


_current = None


def init(device=0):
    """Creates the process's runtime on `device` (once) and returns it."""
    global _current
    if _current is None or not _current.alive:
        _current = Runtime(device)
        if os.environ.get("TINY_NPU_EXECUTOR_CACHE", "0") not in ("", "0"):
            from . import ops
            ops.enable_executor_cache(_current)
        atexit.register(_current.shutdown)
    return _current


def current():
    if _current is None or not _current.alive:
        raise acl.AclError("tiny_npu runtime not initialized: call tiny_npu.init(device)")
    return _current


def shutdown():
    if _current is not None:
        _current.shutdown()
