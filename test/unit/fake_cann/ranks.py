"""Multi-rank programs over the stand-in's HCCL, for the tests beside this file.

Ranks run as processes (one per rank, as torch_npu and MindSpore launch them) or as threads of one process (one device
per thread, as CANN's own HCCL samples run them). A test module defines rank bodies `def case_x(rk): ...` and ends
with `if __name__ == "__main__": ranks.child_main(globals())`; `ranks.spawn(__file__, "case_x", n, workdir)` runs
`python test_file.py case_x RANK N WORKDIR` once per rank and `ranks.threads(case_x, n, workdir)` runs the body on n
threads. Inputs go from the test to the ranks, and results back, as .npy files in workdir (rk.load / rk.save; load()).

Rank 0 makes the root info after aclrtSetDevice (real HCCL needs the device) and publishes its 4108 bytes in
workdir/root (written to a temporary name, then renamed); the other ranks wait for it, bounded.
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np

from tiny_npu import acl

P, U32, U64, INT = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
ROOT_INFO_BYTES = 4108
COMM_NAME_MAX_LENGTH = 128
AICORE_EXCEPTION = 507015  # what a synchronize reports for a failed kernel or collective
# HcclDataType per aclDataType the tests use.
HCCL_TYPE = {acl.INT8: 0, acl.INT16: 1, acl.INT32: 2, acl.FLOAT16: 3, acl.FLOAT: 4, acl.INT64: 5, acl.UINT8: 7,
             acl.BF16: 11}

_HCCL_SIGNATURES = {
    "HcclAlltoAll": [P, U64, INT, P, U64, INT, P, P],
    "HcclAlltoAllV": [P, P, P, INT, P, P, P, INT, P, P],
    "HcclAlltoAllVC": [P, P, INT, P, INT, P, P],
    "HcclAllReduce": [P, P, U64, INT, INT, P, P],
    "HcclGetCommName": [P, ctypes.c_char_p],
    "HcclGetRankSize": [P, P],
}


def declare_hccl(h):
    for name, args in _HCCL_SIGNATURES.items():
        fn = getattr(h, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return h


class Rank:
    """One rank: ACL initialized, its device current on this thread, a stream and a communicator of n ranks."""

    def __init__(self, rank, n, workdir, libs=None, publish=None, fetch=None):
        self.rank, self.n, self.workdir = rank, n, workdir
        self.libs = libs or acl.Libraries()
        self.a, self.nn = self.libs.ascendcl, self.libs.nnopbase
        self.h = declare_hccl(self.libs.hccl)
        rc = self.a.aclInit(None)
        assert rc in (0, 100002), f"aclInit: {rc}"
        acl.check(self.a.aclrtSetDevice(rank), "aclrtSetDevice")
        s = P()
        acl.check(self.a.aclrtCreateStream(ctypes.byref(s)), "aclrtCreateStream")
        self.stream = s.value
        self.buffers, self.tensors = [], []
        root = (ctypes.c_char * ROOT_INFO_BYTES)()
        if rank == 0:
            acl.check(self.h.HcclGetRootInfo(root), "HcclGetRootInfo")
            (publish or self._publish)(bytes(root))
        else:
            ctypes.memmove(root, (fetch or self._fetch)(), ROOT_INFO_BYTES)
        comm = P()
        acl.check(self.h.HcclCommInitRootInfo(n, root, rank, ctypes.byref(comm)), "HcclCommInitRootInfo")
        self.comm = comm.value

    def _publish(self, data):
        path = os.path.join(self.workdir, "root")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)

    def _fetch(self):
        path, deadline = os.path.join(self.workdir, "root"), time.monotonic() + 30
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {self.rank}: no root info at {path}")
            time.sleep(0.005)
        with open(path, "rb") as f:
            return f.read()

    def comm_name(self):
        name = ctypes.create_string_buffer(COMM_NAME_MAX_LENGTH)
        acl.check(self.h.HcclGetCommName(self.comm, name), "HcclGetCommName")
        return name.value

    # -- memory
    def device(self, values, dtype):
        """Device memory holding `values` in dtype's storage form (bf16 as bits)."""
        a = acl.to_host_array(np.asarray(values), dtype)
        p = P()
        acl.check(self.a.aclrtMalloc(ctypes.byref(p), max(a.nbytes, 1), 0), "aclrtMalloc")
        acl.check(self.a.aclrtMemcpy(p, max(a.nbytes, 1), a.ctypes.data, a.nbytes, acl.MEMCPY_H2D), "H2D")
        self.buffers.append(p.value)
        return p.value

    def host(self, ptr, count, dtype):
        """`count` elements of dtype at ptr, as numpy values (bf16 widened to float32)."""
        out = np.empty(count, dtype=acl.NUMPY_OF[dtype])
        acl.check(self.a.aclrtMemcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, acl.MEMCPY_D2H), "D2H")
        return acl.from_host_array(out, dtype)

    def sync(self):
        return self.a.aclrtSynchronizeStream(self.stream)

    # -- aclnn ops (found as torch_npu finds them: dlsym on libopapi; signatures from aclnn_ops.spec)
    def tensor(self, values, dtype, transposed=False):
        """An aclTensor over new device memory holding `values` (2-D `transposed`: stored column-major)."""
        v = np.asarray(values)
        stored = v.T if transposed else v
        ptr = self.device(stored.reshape(-1), dtype)
        shape = list(v.shape)
        strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        if transposed:
            strides = [1, shape[0]]
        nd = len(shape)
        dims, st = (ctypes.c_int64 * max(nd, 1))(*shape), (ctypes.c_int64 * max(nd, 1))(*strides)
        storage = (ctypes.c_int64 * 1)(max(v.size, 1))
        h = self.nn.aclCreateTensor(dims, nd, dtype, st, 0, acl.FORMAT_ND, storage, 1, ptr)
        assert h, "aclCreateTensor failed"
        self.tensors.append(h)
        return h, ptr

    def run(self, name, *args):
        """Both phases of aclnn op `name` on this rank's stream (not synchronized). Returns phase 1's status."""
        from test_aclnn_ops import OPS  # the spec's signatures
        op = acl.AclnnOp(self.libs, name, OPS[name][0])
        ws, ex = U64(0), P(0)
        rc = op.phase1(*args, ctypes.byref(ws), ctypes.byref(ex))
        if rc != 0:
            return rc
        w = self.device(np.zeros(ws.value, np.uint8), acl.UINT8) if ws.value else None
        acl.check(op.phase2(w, ws.value, ex, self.stream), f"aclnn{name}")
        return 0

    def error_message(self):
        return (self.a.aclGetRecentErrMsg() or b"").decode(errors="replace")

    # -- files shared with the test
    def load(self, name):
        return np.load(os.path.join(self.workdir, f"{name}.npy"))

    def save(self, name, array):
        np.save(os.path.join(self.workdir, f"r{self.rank}_{name}.npy"), np.asarray(array))

    def close(self):
        acl.check(self.h.HcclCommDestroy(self.comm), "HcclCommDestroy")
        for t in self.tensors:
            self.nn.aclDestroyTensor(t)
        for p in self.buffers:
            self.a.aclrtFree(p)
        self.buffers = []


def load(workdir, rank, name):
    """What rank `rank` saved as `name`."""
    return np.load(os.path.join(str(workdir), f"r{rank}_{name}.npy"))


def spawn(test_file, case, n, workdir, env=None, timeout=90):
    """Runs rank body `case` of `test_file` in n processes; fails with every rank's output if one does not exit 0."""
    here = os.path.dirname(os.path.abspath(__file__))
    full_env = dict(os.environ, HCCL_CONNECT_TIMEOUT="30", HCCL_EXEC_TIMEOUT="30", **(env or {}))
    full_env["PYTHONPATH"] = here + os.pathsep + full_env.get("PYTHONPATH", "")
    procs = [subprocess.Popen([sys.executable, test_file, case, str(r), str(n), str(workdir)], env=full_env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(n)]
    problems = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            problems.append(f"rank {r} hung (killed):\n{out}")
            continue
        if p.returncode != 0:
            problems.append(f"rank {r} exited {p.returncode}:\n{out}")
    assert not problems, "\n".join(problems)


def threads(body, n, workdir, timeout=60):
    """Runs body(rank) on n threads of this process, one device each; re-raises the first failure."""
    libs = acl.Libraries()
    root, ready, errors = [], threading.Event(), []

    def publish(data):
        root.append(data)
        ready.set()

    def fetch():
        if not ready.wait(30):
            raise TimeoutError("no root info")
        return root[0]

    def run(r):
        try:
            rk = Rank(r, n, str(workdir), libs, publish, fetch)
            body(rk)
            rk.close()
        except BaseException as e:  # reported by the caller, with the rank
            errors.append((r, e))

    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), "a rank thread hung"
    if errors:
        r, e = errors[0]
        raise AssertionError(f"rank {r}: {e!r}") from e


def child_main(namespace):
    """Entry of a rank process: `python test_file.py CASE RANK N WORKDIR`."""
    case, rank, n, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rk = Rank(rank, n, workdir)
    namespace[case](rk)
    rk.close()
