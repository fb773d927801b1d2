"""examples/ms_kbk_train.py (the MindSpore-KBK-shaped host, libms_kbk.so over libmindspore_profiler.so) with and
without the shim: its training against an independent numpy replay; under the shim, every kernel of every step once,
named from MindSpore's runtime profiler, with the tensors of that step (not of the build that made the executors);
the names without the profiler; ACL graph capture (every replay's kernels as the eager steps have them)."""
import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import npu_refs  # noqa: E402
import shimtest  # noqa: E402

KBK = os.path.join(shimtest.SOURCE, "examples", "ms_kbk_train.py")
STEPS = 3

NET = "Default/network-WithLossCell/_backbone-MLP/"
GRAD = "Gradients/" + NET
OPT = "Default/optimizer-AdamWeightDecay/"
# (op type, MindSpore fullname_with_scope) of each kernel, in launch order.
KERNELS = [
    ("GatherV2", "Default/GatherV2-op0"),
    ("GatherV2", "Default/GatherV2-op1"),
    ("Matmul", NET + "fc1-Dense/MatMul-op0"),
    ("Add", NET + "fc1-Dense/BiasAdd-op0"),
    ("Relu", NET + "relu-ReLU/ReLU-op0"),
    ("Matmul", NET + "fc2-Dense/MatMul-op0"),
    ("Add", NET + "fc2-Dense/BiasAdd-op0"),
    ("MseLoss", "Default/network-WithLossCell/_loss_fn-MSELoss/MSELoss-op0"),
    ("MseLossBackward", "Gradients/Default/network-WithLossCell/_loss_fn-MSELoss/gradMSELoss/MSELossGrad-op0"),
    ("Matmul", GRAD + "fc2-Dense/gradMatMul/MatMul-op0"),
    ("ReduceSum", GRAD + "fc2-Dense/gradBiasAdd/BiasAddGrad-op0"),
    ("Matmul", GRAD + "fc2-Dense/gradMatMul/MatMul-op1"),
    ("ReluGrad", GRAD + "relu-ReLU/gradReLU/ReluGrad-op0"),
    ("Matmul", GRAD + "fc1-Dense/gradMatMul/MatMul-op0"),
    ("ReduceSum", GRAD + "fc1-Dense/gradBiasAdd/BiasAddGrad-op0"),
    ("ForeachMulScalarList", "Default/network-TrainOneStepWithLossScaleCell/grad_scale/ForeachMulScalarList-op0"),
    ("Adds", OPT + "Adds-op0"),
] + [("ApplyAdamWV2", OPT + f"ApplyAdamW-op{i}") for i in range(4)]


def kernel_name(op, fullname, n=0):
    return f"{op}.{re.sub(r'[^A-Za-z0-9_-]', '_', fullname)}.{n}.forward"


def run_kbk(workdir, *args, shim=True, task="tensor", env=None):
    e = dict(env or {})
    if shim:
        e["MSPROBE_TASK"] = task
    return shimtest.run([shimtest.PYTHON, KBK, "--steps", str(STEPS), *args], workdir, shim=shim, env=e,
                        timeout=300).check()


def replay(npz):
    """The training, recomputed with numpy from the saved data, indices and initial parameters: float64 arithmetic
    rounded to float32 at every tensor a kernel stores. Returns (losses, final params, per step {fullname: (inputs,
    outputs)}) with each kernel's tensors in dump order (lists flattened)."""
    f = lambda v: np.asarray(v, np.float64).astype(np.float32).astype(np.float64)  # noqa: E731
    lr, beta1, beta2, wd, eps, scale = (float(v) for v in npz["hyper"])
    X, T = npz["x"].astype(np.float64), npz["t"].astype(np.float64)
    w = [npz[k].astype(np.float64) for k in ("w1", "b1", "w2", "b2")]
    m = [np.zeros_like(p) for p in w]
    v = [np.zeros_like(p) for p in w]
    count = np.zeros(1)
    losses, steps = [], []
    for idx in npz["indices"]:
        k = {}
        x, t = X[idx], T[idx]
        k["Default/GatherV2-op0"] = ([X, idx, 0], [x])
        k["Default/GatherV2-op1"] = ([T, idx, 0], [t])
        h0 = f(x @ w[0])
        h = f(h0 + w[1])
        a = f(np.maximum(h, 0))
        y0 = f(a @ w[2])
        y = f(y0 + w[3])
        loss = f(np.mean((y - t) ** 2))
        dy = f(2.0 / y.size * (y - t) * scale)
        dw2, db2, da = f(a.T @ dy), f(dy.sum(0)), f(dy @ w[2].T)
        dh = f(np.where(a > 0, da, 0.0))
        dw1, db1 = f(x.T @ dh), f(dh.sum(0))
        k[NET + "fc1-Dense/MatMul-op0"] = ([x, w[0]], [h0])
        k[NET + "fc1-Dense/BiasAdd-op0"] = ([h0, w[1]], [h])
        k[NET + "relu-ReLU/ReLU-op0"] = ([h], [a])
        k[NET + "fc2-Dense/MatMul-op0"] = ([a, w[2]], [y0])
        k[NET + "fc2-Dense/BiasAdd-op0"] = ([y0, w[3]], [y])
        k["Default/network-WithLossCell/_loss_fn-MSELoss/MSELoss-op0"] = ([y, t], [loss])
        k[KERNELS[8][1]] = ([np.array(scale), y, t], [dy])
        k[GRAD + "fc2-Dense/gradMatMul/MatMul-op0"] = ([a.T, dy], [dw2])
        k[GRAD + "fc2-Dense/gradBiasAdd/BiasAddGrad-op0"] = ([dy], [db2])
        k[GRAD + "fc2-Dense/gradMatMul/MatMul-op1"] = ([dy, w[2].T], [da])
        k[GRAD + "relu-ReLU/gradReLU/ReluGrad-op0"] = ([da, a], [dh])
        k[GRAD + "fc1-Dense/gradMatMul/MatMul-op0"] = ([x.T, dh], [dw1])
        k[GRAD + "fc1-Dense/gradBiasAdd/BiasAddGrad-op0"] = ([dh], [db1])
        grads = [dw1, db1, dw2, db2]
        unscaled = [f(g * f(1.0 / scale)) for g in grads]
        k[KERNELS[15][1]] = (grads, unscaled)
        k[OPT + "Adds-op0"] = ([count], [count + 1])
        count = count + 1
        for i in range(4):
            before = [w[i], m[i], v[i]]
            w[i], m[i], v[i], _ = (None if r is None else f(r) for r in npu_refs.REFS["ApplyAdamWV2"](
                [w[i], m[i], v[i], None, unscaled[i], count, lr, beta1, beta2, wd, eps, False, False], None))
            k[OPT + f"ApplyAdamW-op{i}"] = (before + [unscaled[i], count], [w[i], m[i], v[i]])
        losses.append(float(loss))
        steps.append(k)
    return losses, w, steps


def dumped_tensors(folder, args):
    """The tensors of input_args or output, in order, lists flattened, loaded as float64 (None: no data taken)."""
    out = []
    for a in args or []:
        for t in (a if isinstance(a, list) else [a]):
            if shimtest.is_tensor(t):
                data = folder.load(t)
                out.append(None if data is None else data.astype(np.float64))
    return out


def assert_kernel_matches(folder, name, entry, expected):
    want_in, want_out = expected
    got_in, got_out = dumped_tensors(folder, entry["input_args"]), dumped_tensors(folder, entry["output"])
    assert len(got_in) == len(want_in) and len(got_out) == len(want_out), name
    for side, got, want in (("input", got_in, want_in), ("output", got_out, want_out)):
        for i, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w, np.float64)
            assert g is not None, f"{folder.path}: {name}: {side} {i} has no data"
            assert g.shape == w.shape, f"{folder.path}: {name}: {side} {i} shape {g.shape} != {w.shape}"
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=f"{folder.path}: {name}: {side} {i}")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    d = tmp_path_factory.mktemp("plain")
    r = run_kbk(d, "--dump", str(d / "run.npz"), shim=False)
    return r, np.load(d / "run.npz")


def test_training_matches_an_independent_numpy_replay(plain):
    r, npz = plain
    losses, final, _ = replay(npz)
    printed = [float(x) for x in r.losses()[0]]
    np.testing.assert_allclose(printed, losses, rtol=1e-5)
    assert printed[-1] < printed[0], "the loss goes down"
    for mine, theirs in zip(final, (npz[k] for k in ("final_w1", "final_b1", "final_w2", "final_b2"))):
        np.testing.assert_allclose(theirs, mine, rtol=1e-5, atol=1e-7)
    # Every step trains on other rows.
    assert len({tuple(i) for i in npz["indices"]}) == STEPS


def test_capture_mode_trains_alike_without_the_shim(plain, tmp_path):
    r, _ = plain
    c = run_kbk(tmp_path, "--capture", shim=False)
    assert c.losses() == r.losses()  # the replays compute what the launches did, bit for bit


def test_every_kernel_of_every_step_named_from_the_profiler_with_that_steps_tensors(plain, tmp_path):
    r0, _ = plain
    r = run_kbk(tmp_path, "--dump", str(tmp_path / "run.npz"))
    assert r.losses() == r0.losses(), "the shim changed the training"
    npz = np.load(tmp_path / "run.npz")
    _, _, expected = replay(npz)
    dump = r.dump
    assert dump.steps() == list(range(STEPS))
    want_names = [kernel_name(op, full) for op, full in KERNELS]
    for step in range(STEPS):
        folder = dump.folder(step, None)
        assert list(folder.data) == want_names, f"step {step}: {list(folder.data)}"
        for (op, full), name in zip(KERNELS, want_names):
            assert_kernel_matches(folder, name, folder.data[name], expected[step][full])
    # The AI CPU kernel's tensors are typed from its NodeDef, the step's own indices among them.
    g = dump.folder(1, None).data[want_names[0]]
    assert [(a["dtype"], a["shape"]) for a in g["input_args"]] == [("Float32", [64, 8]), ("Int32", [8]),
                                                                   ("Int32", [])]
    assert list(dump.folder(1, None).load(g["input_args"][1])) == list(npz["indices"][1])
    problems, checked = shimtest.check_recomputation(dump)
    assert not problems, "\n".join(problems[:10])
    assert checked["GatherV2"] == 2 * STEPS and checked["ReluGrad"] == STEPS
    assert dump.folder(0, None).dump["host_framework"] == "mindspore"


def test_statistics_task(plain, tmp_path):
    r = run_kbk(tmp_path, "--dump", str(tmp_path / "run.npz"), task="statistics")
    _, _, expected = replay(np.load(tmp_path / "run.npz"))
    name = kernel_name("Matmul", NET + "fc1-Dense/MatMul-op0")
    for step in range(STEPS):
        out = r.dump.folder(step, None).data[name]["output"][0]
        want = expected[step][NET + "fc1-Dense/MatMul-op0"][1][0]
        for key, value in (("Max", want.max()), ("Min", want.min()), ("Mean", want.mean()),
                           ("Norm", np.linalg.norm(want))):
            assert out[key] == pytest.approx(value, rel=1e-5, abs=1e-6), (step, key)


def test_without_the_profiler_kernels_keep_todays_names(plain, tmp_path):
    r = run_kbk(tmp_path, "--dump", str(tmp_path / "run.npz"), env={"MS_ENABLE_RUNTIME_PROFILER": "0"})
    _, _, expected = replay(np.load(tmp_path / "run.npz"))
    counts = {}
    names = []
    # Today's names: an aclnn kernel keeps the Python scope of its phase 1, made once at build from the driver's
    # main(); the AI CPU and aclop kernels are launched by the actor thread, which has no Python frames: Default.
    for op, _ in KERNELS:
        scope = "Default" if op in ("GatherV2", "ReluGrad") else "main"
        names.append(f"{op}.{scope}.{counts.get((op, scope), 0)}.forward")
        counts[(op, scope)] = counts.get((op, scope), 0) + 1
    for step in range(STEPS):
        folder = r.dump.folder(step, None)
        assert list(folder.data) == names
        assert_kernel_matches(folder, names[2], folder.data[names[2]], expected[step][KERNELS[2][1]])


def test_records_are_left_to_mindspore_only_when_the_user_turned_the_profiler_on(tmp_path):
    # The shim turned it on: the records are its own, the profiler keeps none and writes no file.
    a = run_kbk(tmp_path / "a", "--profile-steps")
    assert not [f for f in os.listdir(a.workdir) if f.startswith("RuntimeProfilerJson")]
    # The user did: MindSpore keeps them (and writes them at exit), and the shim still names the kernels.
    b = run_kbk(tmp_path / "b", "--profile-steps", env={"MS_ENABLE_RUNTIME_PROFILER": "1"})
    files = [f for f in os.listdir(b.workdir) if f.startswith("RuntimeProfilerJson")]
    assert len(files) == 1
    text = open(os.path.join(b.workdir, files[0])).read()
    assert text.count("\"Kernel::KernelLaunch::MatMul\"") == 5 * STEPS  # five MatMul kernels a step
    assert kernel_name(*KERNELS[2]) in b.dump.folder(0, None).data


def test_acl_graph_capture_every_replay_captured_kernel_by_kernel_as_the_eager_steps_are(plain, tmp_path):
    # The first step captures each range of kernels (nothing runs then) and replays it; later steps only replay. Every
    # step's kernels are in the dump as the eager run has them: same names, that step's tensors, the graphs' kernels
    # with the note naming the graph and the replay (issue 43).
    r0, _ = plain
    r = run_kbk(tmp_path, "--capture", "--dump", str(tmp_path / "run.npz"))
    assert r.losses() == r0.losses(), "the shim changed the captured training"
    _, _, expected = replay(np.load(tmp_path / "run.npz"))
    assert "not captured kernel by kernel" not in r.stderr
    assert r.dump.steps() == list(range(STEPS))
    want_names = [kernel_name(op, full) for op, full in KERNELS]
    for step in range(STEPS):
        folder = r.dump.folder(step, None)
        assert list(folder.data) == want_names, f"step {step}: {list(folder.data)}"
        for i, ((op, full), name) in enumerate(zip(KERNELS, want_names)):
            e = folder.data[name]
            assert_kernel_matches(folder, name, e, expected[step][full])
            if op == "ReluGrad":  # launched normally between the two graphs: captured as ever
                assert "acl_graph" not in e
                continue
            graph = "acl_graph_0" if i < 12 else "acl_graph_1"
            assert e["acl_graph"] == f"replay {step} of ACL graph {graph} (stack from the capture)", e


def test_name_filters_select_by_the_profilers_names(plain, tmp_path):
    # The names are known only after the launch: the kernels are copied first, and those the list does not select are
    # let go once named. Ordinals count every kernel, selected or not.
    r = run_kbk(tmp_path, "--dump", str(tmp_path / "run.npz"), env={"MSPROBE_LIST": "name-regex(.*_fc1-Dense_.*)"})
    _, _, expected = replay(np.load(tmp_path / "run.npz"))
    fc1 = [(op, full) for op, full in KERNELS if "/fc1-Dense/" in full]
    assert len(fc1) == 4
    for step in range(STEPS):
        folder = r.dump.folder(step, None)
        assert list(folder.data) == [kernel_name(op, full) for op, full in fc1]
        for op, full in fc1:
            assert_kernel_matches(folder, kernel_name(op, full), folder.data[kernel_name(op, full)], expected[step][full])
