#!/usr/bin/env python3
"""Trains a 2-layer MLP the way MindSpore's graph mode (jit_level O2, GE backend) does: forward, backward and the
SGD update are compiled once into ONE model (the stand-in's ATC, fake_atc.write_model) and the whole step runs as
one aclmdlExecute per step, with no host call per kernel. Prints `step {i} loss {value:.6f}`.

    y = relu(x @ w1 + b1) @ w2 + b2,  loss = sum((y - t)^2) / N,  p -= lr * dloss/dp

The model is functional: the parameters are model inputs and the updated parameters model outputs; the host feeds
them back through device buffers (two sets, swapped each step). Around each execution libms_hook_runner.so (the
GE backend's hook calls, shared/reference/cann_dump.md §5) calls MS_DbgOnStepBegin/End of the library named by
HOOK_TOOL_PATH when MS_HOOK_ENABLE=on, with the model's node names as MindSpore's kernel names.

    python3 examples/graph_train.py [--steps 5] [--lr 0.05] [--ranks N] [--dump PATH.npz] [--save-model PATH.om]

--dump saves the data, the initial and final parameters and the exact losses; --save-model keeps the model file.
--ranks N starts N copies (RANK_ID=r, device r), each training the same initial model on its own batch; they do not
exchange gradients (the stand-in's models have no collective nodes), so each prints its own losses, prefixed with
`[rank r] ` by the launcher, which exits nonzero if a rank fails.
Native calls go through ctypes.CDLL, which releases the GIL around each, as MindSpore's bindings do.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "test", "fake_cann", "tools"))

import fake_atc  # noqa: E402  (the stand-in's ATC: writes the model file)

BATCH, IN, HIDDEN, OUT = 8, 4, 16, 2
PARAMS = ("w1", "b1", "w2", "b2")
SHAPES = {"x": (BATCH, IN), "t": (BATCH, OUT), "w1": (IN, HIDDEN), "b1": (HIDDEN,), "w2": (HIDDEN, OUT),
          "b2": (OUT,), "h0": (BATCH, HIDDEN), "h": (BATCH, HIDDEN), "a": (BATCH, HIDDEN), "y0": (BATCH, OUT),
          "y": (BATCH, OUT), "d": (BATCH, OUT), "sq": (BATCH, OUT), "s": (), "loss": (), "dy": (BATCH, OUT),
          "dw2": (HIDDEN, OUT), "db2": (OUT,), "da": (BATCH, HIDDEN), "dh": (BATCH, HIDDEN), "dw1": (IN, HIDDEN),
          "db1": (HIDDEN,)}
FWD = "Default/network-WithLossCell/_backbone-MLP/"
LOSS = "Default/network-WithLossCell/_loss_fn-MSELoss"
GRAD = "Gradients/Default/network-WithLossCell/"


def graph_nodes(lr):
    """(type, scope, inputs, outputs, attrs) in execution order: forward, loss, backward, SGD."""
    n = float(BATCH * OUT)
    nodes = [
        ("MatMul", FWD + "fc1-Dense", ["x", "w1"], ["h0"], {}),
        ("Add", FWD + "fc1-Dense", ["h0", "b1"], ["h"], {}),
        ("Relu", FWD + "relu-ReLU", ["h"], ["a"], {}),
        ("MatMul", FWD + "fc2-Dense", ["a", "w2"], ["y0"], {}),
        ("Add", FWD + "fc2-Dense", ["y0", "b2"], ["y"], {}),
        ("Sub", LOSS, ["y", "t"], ["d"], {}),
        ("Mul", LOSS, ["d", "d"], ["sq"], {}),
        ("ReduceSumD", LOSS, ["sq"], ["s"], {"axes": [0, 1], "keep_dims": False}),
        ("Muls", LOSS, ["s"], ["loss"], {"value": 1.0 / n}),
        ("Muls", GRAD + "_loss_fn-MSELoss/gradSub", ["d"], ["dy"], {"value": 2.0 / n}),
        ("MatMul", GRAD + "_backbone-MLP/fc2-Dense/gradMatMul", ["a", "dy"], ["dw2"], {"transpose_x1": True}),
        ("ReduceSumD", GRAD + "_backbone-MLP/fc2-Dense/gradAdd", ["dy"], ["db2"], {"axes": [0], "keep_dims": False}),
        ("MatMul", GRAD + "_backbone-MLP/fc2-Dense/gradMatMul", ["dy", "w2"], ["da"], {"transpose_x2": True}),
        ("ReluGrad", GRAD + "_backbone-MLP/relu-ReLU/gradReLU", ["da", "a"], ["dh"], {}),
        ("MatMul", GRAD + "_backbone-MLP/fc1-Dense/gradMatMul", ["x", "dh"], ["dw1"], {"transpose_x1": True}),
        ("ReduceSumD", GRAD + "_backbone-MLP/fc1-Dense/gradAdd", ["dh"], ["db1"], {"axes": [0], "keep_dims": False}),
    ]
    for p in PARAMS:  # SGD, functional: p_new = p - lr * grad
        nodes.append(("Muls", "Default/optimizer-SGD", ["d" + p], [p + "_lr"], {"value": lr}))
        nodes.append(("Sub", "Default/optimizer-SGD", [p, p + "_lr"], [p + "_new"], {}))
    return nodes


def model_spec(lr):
    nodes, tensors = [], dict(SHAPES)
    for i, (op, scope, ins, outs, attrs) in enumerate(graph_nodes(lr)):
        nodes.append({"type": op, "name": f"{scope}/{op}-op{i}", "inputs": ins, "outputs": outs, "attrs": attrs})
    for p in PARAMS:
        tensors[p + "_lr"] = tensors[p + "_new"] = SHAPES[p]
    return {"name": "graph_train", "inputs": ["x", "t", *PARAMS], "outputs": ["loss", *(p + "_new" for p in PARAMS)],
            "tensors": [{"name": k, "dtype": "float32", "shape": list(v)} for k, v in tensors.items()],
            "nodes": nodes}


def initial_data(seed=0, rank=0):
    """Initial parameters and a linear teacher (the same on every rank) and the rank's own batch, float32."""
    f32 = np.float32
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((IN, OUT)).astype(f32)
    params = {"w1": (rng.standard_normal(SHAPES["w1"]) * 0.5).astype(f32), "b1": np.full(SHAPES["b1"], 0.1, f32),
              "w2": (rng.standard_normal(SHAPES["w2"]) * 0.5).astype(f32), "b2": np.zeros(SHAPES["b2"], f32)}
    x = np.random.default_rng([seed, rank]).standard_normal(SHAPES["x"]).astype(f32)
    return x, (x @ teacher).astype(f32), params


def ascend_home():
    return os.environ.get("ASCEND_HOME_PATH") or os.path.join(REPO, "build", "fake_cann")


def runner_path():
    explicit = os.environ.get("MS_HOOK_RUNNER_LIB")
    if explicit:
        return explicit
    build = os.environ.get("MSPROBE_BUILD_DIR") or os.path.dirname(os.path.abspath(ascend_home()))
    return os.path.join(build, "examples", "libms_hook_runner.so")


class Acl:
    """The few ACL functions this script needs, from $ASCEND_HOME_PATH/lib64/libascendcl.so (GIL released)."""

    def __init__(self):
        self.lib = lib = ctypes.CDLL(os.path.join(ascend_home(), "lib64", "libascendcl.so"))
        self.memory, self.buffers, self.datasets = [], [], []
        vp, sz, u32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32
        for name, args, res in [
                ("aclrtMalloc", [ctypes.POINTER(vp), sz, ctypes.c_int], ctypes.c_int),
                ("aclrtMemcpy", [vp, sz, vp, sz, ctypes.c_int], ctypes.c_int),
                ("aclmdlLoadFromFile", [ctypes.c_char_p, ctypes.POINTER(u32)], ctypes.c_int),
                ("aclmdlExecute", [u32, vp, vp], ctypes.c_int),
                ("aclrtFree", [vp], ctypes.c_int),
                ("aclCreateDataBuffer", [vp, sz], vp),
                ("aclDestroyDataBuffer", [vp], ctypes.c_int),
                ("aclmdlCreateDataset", [], vp),
                ("aclmdlDestroyDataset", [vp], ctypes.c_int),
                ("aclmdlAddDatasetBuffer", [vp, vp], ctypes.c_int),
                ("aclmdlCreateDesc", [], vp),
                ("aclmdlGetDesc", [vp, u32], ctypes.c_int),
                ("aclmdlGetInputSizeByIndex", [vp, sz], sz),
                ("aclmdlGetOutputSizeByIndex", [vp, sz], sz)]:
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed with error {rc}")

    def malloc(self, nbytes):
        p = ctypes.c_void_p()
        self.call("aclrtMalloc", ctypes.byref(p), nbytes, 0)
        self.memory.append(p.value)
        return p.value

    def upload(self, dev, array):
        a = np.ascontiguousarray(array, dtype=np.float32)
        self.call("aclrtMemcpy", dev, a.nbytes, a.ctypes.data, a.nbytes, 1)  # ACL_MEMCPY_HOST_TO_DEVICE

    def download(self, dev, shape):
        a = np.empty(shape, np.float32)
        self.call("aclrtMemcpy", a.ctypes.data, a.nbytes, dev, a.nbytes, 2)  # ACL_MEMCPY_DEVICE_TO_HOST
        return a

    def dataset(self, buffers):
        ds = self.lib.aclmdlCreateDataset()
        self.datasets.append(ds)
        for dev, nbytes in buffers:
            self.buffers.append(self.lib.aclCreateDataBuffer(dev, nbytes))
            self.call("aclmdlAddDatasetBuffer", ds, self.buffers[-1])
        return ds

    def release(self, device):
        """Destroys the datasets and buffers, frees the device memory, resets the device and finalizes ACL."""
        for ds in self.datasets:
            self.call("aclmdlDestroyDataset", ds)
        for b in self.buffers:
            self.call("aclDestroyDataBuffer", b)
        for p in self.memory:
            self.call("aclrtFree", p)
        self.call("aclrtResetDevice", device)
        self.call("aclFinalize")


class HookRunner:
    """libms_hook_runner.so: MindSpore's step-begin/step-end hook calls around one graph's runs."""

    def __init__(self, device, kernel_names):
        lib = self.lib = ctypes.CDLL(runner_path())
        lib.ms_hook_runner_create.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
        lib.ms_hook_runner_create.restype = ctypes.c_void_p
        lib.ms_hook_runner_step_begin.argtypes = lib.ms_hook_runner_step_end.argtypes = [ctypes.c_void_p]
        names = (ctypes.c_char_p * len(kernel_names))(*(n.encode() for n in kernel_names))
        self.handle = lib.ms_hook_runner_create(device, names, len(kernel_names))

    def step_begin(self):
        self.lib.ms_hook_runner_step_begin(self.handle)

    def step_end(self):
        rc = self.lib.ms_hook_runner_step_end(self.handle)
        if rc != 0:
            raise RuntimeError(f"synchronizing the device after the step failed with error {rc}")

    def close(self):
        self.lib.ms_hook_runner_destroy(ctypes.c_void_p(self.handle))


def train(args, rank):
    acl = Acl()
    acl.call("aclInit", None)
    acl.call("aclrtSetDevice", rank)  # one device per rank
    spec = model_spec(args.lr)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "graph_train.om")
        if args.save_model:
            path = args.save_model.replace("{rank}", str(rank))
        fake_atc.write_model(spec, path)  # "compiled once"
        model = ctypes.c_uint32()
        acl.call("aclmdlLoadFromFile", path.encode(), ctypes.byref(model))
    runner = HookRunner(rank, [n["name"] for n in spec["nodes"]])
    x, t, params = initial_data(args.seed, rank)
    nbytes = {k: max(4, int(np.prod(SHAPES[k], dtype=np.int64)) * 4) for k in ("x", "t", "loss", *PARAMS)}
    dev = {k: acl.malloc(nbytes[k]) for k in ("x", "t", "loss")}
    sets = [{p: acl.malloc(nbytes[p]) for p in PARAMS} for _ in range(2)]  # ping-pong parameter buffers
    acl.upload(dev["x"], x)
    acl.upload(dev["t"], t)
    for p in PARAMS:
        acl.upload(sets[0][p], params[p])
    inputs = [acl.dataset([(dev["x"], nbytes["x"]), (dev["t"], nbytes["t"])] + [(s[p], nbytes[p]) for p in PARAMS])
              for s in sets]
    outputs = [acl.dataset([(dev["loss"], nbytes["loss"])] + [(s[p], nbytes[p]) for p in PARAMS]) for s in sets]
    losses = []
    for step in range(args.steps):
        cur = step % 2
        runner.step_begin()
        acl.call("aclmdlExecute", model.value, inputs[cur], outputs[1 - cur])
        runner.step_end()
        losses.append(acl.download(dev["loss"], ()))
        print(f"step {step} loss {float(losses[-1]):.6f}", flush=True)
    final = {p: acl.download(sets[args.steps % 2][p], SHAPES[p]) for p in PARAMS}
    acl.call("aclmdlUnload", model.value)
    runner.close()
    acl.release(rank)
    if args.dump:
        np.savez(args.dump.replace("{rank}", str(rank)), x=x, t=t, lr=np.float32(args.lr),
                 losses=np.array(losses, np.float32), **{"init_" + p: params[p] for p in PARAMS},
                 **{"final_" + p: final[p] for p in PARAMS})


def launch_ranks(args):
    """One process per rank (RANK_ID=r, device r); their lines prefixed with `[rank r] `; nonzero if any fails."""
    files = [tempfile.TemporaryFile("w+") for _ in range(args.ranks)]  # a file never fills up as a pipe does
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:]], text=True, stdout=f,
                              env=dict(os.environ, RANK_ID=str(r), RANK_SIZE=str(args.ranks)))
             for r, f in enumerate(files)]
    for p in procs:
        p.wait()
    outputs = []
    for f in files:
        f.seek(0)
        outputs.append(f.read())
        f.close()
    status = 0
    for r, (p, out) in enumerate(zip(procs, outputs)):
        sys.stdout.write("".join(f"[rank {r}] {line}\n" for line in out.splitlines()))
        if p.returncode != 0:
            print(f"rank {r} failed with exit status {p.returncode}", file=sys.stderr)
            status = 1
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ranks", type=int, default=1, help="independent replicas, one process and device per rank")
    ap.add_argument("--dump", help="save data, initial and final parameters and the losses (.npz; {rank} is replaced)")
    ap.add_argument("--save-model", help="also keep the model file here ({rank} is replaced)")
    args = ap.parse_args()
    if args.ranks > 1 and "RANK_ID" not in os.environ:
        return launch_ranks(args)
    train(args, int(os.environ.get("RANK_ID", "0")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
