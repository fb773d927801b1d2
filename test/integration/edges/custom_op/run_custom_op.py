"""Host of the msprobe_test vendor's custom ops, loading them the way torch_npu loads custom op libraries:
dlopen of op_api/lib/libcust_opapi.so (ctypes.CDLL) and dlsym of each aclnn function on that handle.

    run_custom_op.py --lib .../libcust_opapi.so scale_shift --scale 0x1.99999999a0000p-4 --shift 0x1.000010p+0
                     --mode -3 --flag 1 [--dtype fp64] [--launches 2]
    run_custom_op.py --lib .../libcust_opapi.so long --op-name <250 characters> --alpha 0x1.8p+1

Prints one JSON line on stdout: {"inputs": {name: hex bytes}, "outputs": [hex bytes of `out` per launch],
"dtype": "float64"|"float32", "shape": [...]}. Floats are given in float.hex() form so that nothing is lost
on the command line. Exit status 0 on success, 1 with a message on stderr on any API error.
"""
import argparse
import ctypes
import json
import sys

import numpy as np

from tiny_npu import acl

SHAPE = (2, 4)
# Element 0 is self=1, other=0 and element 1 is self=0, other=1: `out` then holds scale and shift themselves
# (times 2^mode, negated by flag), so any change to their bits on the way to the kernel shows in the output.
SELF = np.array([[1.0, 0.0, 0.5, -2.0], [3.25, 1e-3, 7.0, -0.125]])
OTHER = np.array([[0.0, 1.0, 2.0, -1.5], [0.25, 1e6, -3.0, 0.1]])


class Host:
    def __init__(self):
        self.libs = acl.Libraries()
        self.a, self.n = self.libs.ascendcl, self.libs.nnopbase
        self.check(self.a.aclInit(None), "aclInit")
        self.check(self.a.aclrtSetDevice(0), "aclrtSetDevice")
        stream = ctypes.c_void_p(0)
        self.check(self.a.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
        self.stream = stream.value
        self.buffers, self.tensors = [], []

    def check(self, rc, what):
        if rc != 0:
            msg = self.a.aclGetRecentErrMsg()
            raise acl.AclError(f"{what} failed with {rc}: {msg.decode(errors='replace') if msg else ''}")

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p(0)
        self.check(self.a.aclrtMalloc(ctypes.byref(ptr), max(nbytes, 1), 0), "aclrtMalloc")
        self.buffers.append(ptr.value)
        return ptr.value

    def upload(self, array):
        host = np.ascontiguousarray(array)
        dev = self.malloc(host.nbytes)
        self.check(self.a.aclrtMemcpy(dev, host.nbytes, host.ctypes.data, host.nbytes, acl.MEMCPY_H2D), "H2D")
        return dev

    def download(self, dev, like):
        host = np.empty_like(like)
        self.check(self.a.aclrtSynchronizeStream(self.stream), "aclrtSynchronizeStream")
        self.check(self.a.aclrtMemcpy(host.ctypes.data, host.nbytes, dev, host.nbytes, acl.MEMCPY_D2H), "D2H")
        return host

    def tensor(self, dev, array, acl_dtype):
        dims = (ctypes.c_int64 * array.ndim)(*array.shape)
        strides = (ctypes.c_int64 * array.ndim)(*[s // array.itemsize for s in array.strides])
        t = self.n.aclCreateTensor(dims, array.ndim, acl_dtype, strides, 0, acl.FORMAT_ND, dims, array.ndim, dev)
        if not t:
            raise acl.AclError("aclCreateTensor failed")
        self.tensors.append(t)
        return t

    def run(self, lib, op, args, out_dev, out_like):
        """Phase 1 with `args` (ctypes values), then phase 2; returns the downloaded output."""
        phase1 = getattr(lib, f"aclnn{op}GetWorkspaceSize")  # dlsym on the library's handle
        phase1.argtypes = [type(a) if not isinstance(a, int) else ctypes.c_void_p for a in args] + [
            ctypes.c_void_p, ctypes.c_void_p]
        phase1.restype = ctypes.c_int
        phase2 = getattr(lib, f"aclnn{op}")
        phase2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        phase2.restype = ctypes.c_int
        ws, ex = ctypes.c_uint64(0), ctypes.c_void_p(0)
        self.check(phase1(*args, ctypes.byref(ws), ctypes.byref(ex)), f"aclnn{op}GetWorkspaceSize")
        workspace = self.malloc(ws.value) if ws.value else None
        self.check(phase2(workspace, ws.value, ex, self.stream), f"aclnn{op}")
        return self.download(out_dev, out_like)

    def close(self):
        self.check(self.a.aclrtSynchronizeStream(self.stream), "aclrtSynchronizeStream")
        for t in self.tensors:
            self.n.aclDestroyTensor(t)
        for p in self.buffers:
            self.a.aclrtFree(p)
        self.check(self.a.aclrtDestroyStream(self.stream), "aclrtDestroyStream")
        self.check(self.a.aclrtResetDevice(0), "aclrtResetDevice")
        self.check(self.a.aclFinalize(), "aclFinalize")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--dtype", choices=["fp64", "fp32"], default="fp64")
    p.add_argument("--launches", type=int, default=1)
    sub = p.add_subparsers(dest="op", required=True)
    s = sub.add_parser("scale_shift")
    s.add_argument("--scale", required=True)
    s.add_argument("--shift", required=True)
    s.add_argument("--mode", type=int, required=True)
    s.add_argument("--flag", type=int, choices=[0, 1], required=True)
    long_op = sub.add_parser("long")
    long_op.add_argument("--op-name", required=True)
    long_op.add_argument("--alpha", required=True)
    args = p.parse_args()

    np_dtype = np.float64 if args.dtype == "fp64" else np.float32
    acl_dtype = acl.DOUBLE if args.dtype == "fp64" else acl.FLOAT
    host = Host()
    lib = ctypes.CDLL(args.lib)
    self_h, other_h = SELF.astype(np_dtype), OTHER.astype(np_dtype)
    out_like = np.zeros(SHAPE, np_dtype)
    self_d, other_d, out_d = host.upload(self_h), host.upload(other_h), host.upload(out_like)
    ts, to, tout = host.tensor(self_d, self_h, acl_dtype), host.tensor(other_d, other_h, acl_dtype), \
        host.tensor(out_d, out_like, acl_dtype)
    outputs = []
    for _ in range(args.launches):
        if args.op == "scale_shift":
            call = [ts, ctypes.c_double(float.fromhex(args.scale)), to, ctypes.c_float(float.fromhex(args.shift)),
                    ctypes.c_int64(args.mode), ctypes.c_bool(bool(args.flag)), tout]
            outputs.append(host.run(lib, "ScaleShift", call, out_d, out_like))
        else:
            call = [ts, ctypes.c_double(float.fromhex(args.alpha)), tout]
            outputs.append(host.run(lib, args.op_name, call, out_d, out_like))
    host.close()
    print(json.dumps({"inputs": {"self": self_h.tobytes().hex(), "other": other_h.tobytes().hex()},
                      "outputs": [o.tobytes().hex() for o in outputs],
                      "dtype": np.dtype(np_dtype).name, "shape": list(SHAPE)}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except acl.AclError as e:
        print(f"run_custom_op: {e}", file=sys.stderr)
        sys.exit(1)
