"""libhccl from Python through ctypes, one process per rank: the hand-over a Python launcher uses.

Rank 0 calls HcclGetRootInfo after aclrtSetDevice (real HCCL needs the device) and publishes the
4108 raw bytes in a file (written to a temporary name, then renamed, so readers never see half of
it); the other ranks wait for the file and pass the same bytes to HcclCommInitRootInfo.
"""
import os
import subprocess
import sys

import numpy as np

RANK_SCRIPT = r"""
import ctypes, os, sys, time
import numpy as np

rank, nranks, root_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lib64 = os.path.join(os.environ["ASCEND_HOME_PATH"], "lib64")
acl = ctypes.CDLL(os.path.join(lib64, "libascendcl.so"))
hccl = ctypes.CDLL(os.path.join(lib64, "libhccl.so"))
P, U32, U64, INT = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
hccl.HcclCommInitRootInfo.argtypes = [U32, P, U32, P]
hccl.HcclAllReduce.argtypes = [P, P, U64, INT, INT, P, P]
hccl.HcclAllGather.argtypes = [P, P, U64, INT, P, P]
hccl.HcclCommDestroy.argtypes = [P]
acl.aclrtMalloc.argtypes = [P, ctypes.c_size_t, INT]
acl.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, INT]
acl.aclrtSynchronizeStream.argtypes = [P]
H2D, D2H = 1, 2

def ok(rc, what):
    if rc != 0:
        raise SystemExit(f"rank {rank}: {what} failed with {rc}")

ok(acl.aclInit(None), "aclInit")
ok(acl.aclrtSetDevice(rank), "aclrtSetDevice")
stream = P()
ok(acl.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")

root = (ctypes.c_char * 4108)()
if rank == 0:
    ok(hccl.HcclGetRootInfo(root), "HcclGetRootInfo")
    with open(root_path + ".tmp", "wb") as f:
        f.write(bytes(root))
    os.replace(root_path + ".tmp", root_path)
else:
    deadline = time.monotonic() + 30
    while not os.path.exists(root_path):
        if time.monotonic() > deadline:
            raise SystemExit("no root info")
        time.sleep(0.005)
    with open(root_path, "rb") as f:
        ctypes.memmove(root, f.read(), 4108)
comm = P()
ok(hccl.HcclCommInitRootInfo(nranks, root, rank, ctypes.byref(comm)), "HcclCommInitRootInfo")

def device(a):
    d = P()
    ok(acl.aclrtMalloc(ctypes.byref(d), max(a.nbytes, 1), 0), "aclrtMalloc")
    ok(acl.aclrtMemcpy(d, a.nbytes, a.ctypes.data, a.nbytes, H2D), "aclrtMemcpy")
    return d

def host(d, like):
    out = np.empty_like(like)
    ok(acl.aclrtMemcpy(out.ctypes.data, out.nbytes, d, out.nbytes, D2H), "aclrtMemcpy")
    return out

x = np.random.default_rng(rank).standard_normal(1000).astype(np.float32)
dx = device(x)
ok(hccl.HcclAllReduce(dx, dx, x.size, 4, 0, comm, stream), "HcclAllReduce")  # fp32, sum, in place
g = np.arange(10, dtype=np.int32) + 100 * rank
dg, dout = device(g), device(np.zeros(10 * nranks, np.int32))
ok(hccl.HcclAllGather(dg, dout, g.size, 2, comm, stream), "HcclAllGather")  # int32
ok(acl.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
np.save(sys.argv[4], host(dx, x))
np.save(sys.argv[5], host(dout, np.zeros(10 * nranks, np.int32)))
ok(hccl.HcclCommDestroy(comm), "HcclCommDestroy")
"""


def test_two_python_ranks(tmp_path):
    n = 2
    root = str(tmp_path / "root_info")
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(r), str(n), root,
                               str(tmp_path / f"sum{r}.npy"), str(tmp_path / f"gather{r}.npy")],
                              env=dict(os.environ, HCCL_CONNECT_TIMEOUT="20", HCCL_EXEC_TIMEOUT="20"))
             for r in range(n)]
    for p in procs:
        assert p.wait(timeout=60) == 0
    xs = [np.random.default_rng(r).standard_normal(1000).astype(np.float32) for r in range(n)]
    want = np.sum(np.stack(xs).astype(np.float64), axis=0).astype(np.float32)
    gathered = np.concatenate([np.arange(10, dtype=np.int32) + 100 * r for r in range(n)])
    for r in range(n):
        np.testing.assert_array_equal(np.load(tmp_path / f"sum{r}.npy"), want)
        np.testing.assert_array_equal(np.load(tmp_path / f"gather{r}.npy"), gathered)
