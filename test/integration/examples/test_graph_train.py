"""examples/graph_train.py: MindSpore-O2-shaped training (forward, backward and SGD as one model, one aclmdlExecute per
step). Losses and parameters against an independent numpy recomputation with the device's rounding (each kernel
accumulates in double and rounds once to float32, sums in index order), so equality is exact; and the MindSpore-like
hook calls of libms_hook_runner.so, seen by libhook_probe.so."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import shimtest  # noqa: E402

SCRIPT = os.path.join(shimtest.SOURCE, "examples", "graph_train.py")
PROBE = os.path.join(shimtest.BUILD, "tests", "libhook_probe.so")
PROBE_NO_END = os.path.join(shimtest.BUILD, "tests", "libhook_probe_no_end.so")
STEPS = 5
F32 = np.float32


def train(tmp_path, *args, hook=None, tag="run"):
    """Runs graph_train.py without the shim; hook: env of the hook (MS_HOOK_ENABLE, HOOK_TOOL_PATH), else none."""
    env = shimtest.clean_env({"HOOK_PROBE_LOG": str(tmp_path / f"{tag}.probe")})
    for k in ("MS_HOOK_ENABLE", "HOOK_TOOL_PATH"):
        env.pop(k, None)
    env.update(hook or {})
    cmd = [shimtest.PYTHON, SCRIPT, "--steps", str(STEPS), "--dump", str(tmp_path / f"{tag}.npz"),
           "--save-model", str(tmp_path / f"{tag}.om"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def probe_lines(tmp_path, tag="run"):
    path = tmp_path / f"{tag}.probe"
    return path.read_text().splitlines() if path.exists() else []


# ---- the numpy reference: the same training, written independently of the script ----

def matmul(a, b):
    """float32 matmul as the stand-in's kernel: exact products summed in double in index order, rounded once."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float64)
    for p in range(a.shape[1]):
        acc += a[:, p, None].astype(np.float64) * b[None, p, :].astype(np.float64)
    return acc.astype(F32)


def colsum(a):
    """ReduceSumD over axis 0: double accumulation row by row."""
    acc = np.zeros(a.shape[1:], np.float64)
    for row in a:
        acc += row
    return acc.astype(F32)


def total(a):
    return F32(np.cumsum(a.astype(np.float64).ravel())[-1])


def reference_training(d, steps):
    x, t, lr = d["x"], d["t"], F32(d["lr"])
    w1, b1, w2, b2 = (d["init_" + p] for p in ("w1", "b1", "w2", "b2"))
    n = F32(x.shape[0] * t.shape[1])
    losses = []
    for _ in range(steps):
        h = matmul(x, w1) + b1
        a = np.maximum(h, F32(0))
        diff = (matmul(a, w2) + b2) - t
        losses.append(total(diff * diff) * (F32(1) / n))
        dy = diff * (F32(2) / n)
        dw2, db2 = matmul(a.T, dy), colsum(dy)
        dh = np.where(a > 0, matmul(dy, w2.T), F32(0))
        dw1, db1 = matmul(x.T, dh), colsum(dh)
        w1, b1, w2, b2 = w1 - dw1 * lr, b1 - db1 * lr, w2 - dw2 * lr, b2 - db2 * lr
    return np.array(losses, F32), {"w1": w1, "b1": b1, "w2": w2, "b2": b2}


def printed_losses(p, rank=None):
    prefix = "" if rank is None else f"[rank {rank}] "
    lines = [line[len(prefix):] for line in p.stdout.splitlines() if line.startswith(prefix)]
    assert [line.split()[:2] for line in lines] == [["step", str(i)] for i in range(STEPS)], p.stdout
    return [float(line.split()[3]) for line in lines]


def node_names(model_path):
    with open(model_path, "rb") as f:
        data = f.read()
    assert data[:8] == b"FAKEOM01"
    return [n["name"] for n in json.loads(data[8:])["nodes"]]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    p = train(tmp)
    return p, dict(np.load(tmp / "run.npz")), tmp


# ---- training ----

def test_losses_decrease(baseline):
    p, _, _ = baseline
    losses = printed_losses(p)
    assert all(b < a for a, b in zip(losses, losses[1:])), losses


def test_losses_and_parameters_equal_numpy(baseline):
    p, d, _ = baseline
    losses, params = reference_training(d, STEPS)
    np.testing.assert_array_equal(d["losses"], losses)
    assert printed_losses(p) == [float(f"{v:.6f}") for v in losses]
    for name, want in params.items():
        np.testing.assert_array_equal(d["final_" + name], want, err_msg=name)


def test_one_model_holds_forward_backward_and_optimizer(baseline):
    _, _, tmp = baseline
    with open(tmp / "run.om", "rb") as f:
        graph = json.loads(f.read()[8:])
    types = [n["type"] for n in graph["nodes"]]
    assert {"MatMul", "Relu", "ReluGrad", "ReduceSumD", "Muls", "Sub"} <= set(types)
    assert graph["inputs"] == ["x", "t", "w1", "b1", "w2", "b2"]
    assert graph["outputs"] == ["loss", "w1_new", "b1_new", "w2_new", "b2_new"]


def test_runs_are_deterministic(baseline, tmp_path):
    p, d, _ = baseline
    again = train(tmp_path)
    assert again.stdout == p.stdout
    d2 = np.load(tmp_path / "run.npz")
    for k, v in d.items():
        np.testing.assert_array_equal(d2[k], v, err_msg=k)


# ---- the hook runner ----

def test_hooks_see_one_begin_end_pair_per_step(baseline, tmp_path):
    p = train(tmp_path, hook={"MS_HOOK_ENABLE": "on", "HOOK_TOOL_PATH": PROBE})
    assert p.stdout == baseline[0].stdout, "the hooks change nothing in training"
    assert "WARNING" not in p.stderr, p.stderr
    lines = probe_lines(tmp_path)
    assert len(lines) == 2 * STEPS, lines
    names = node_names(tmp_path / "run.om")
    assert len(names) == 24 and names[0] == "Default/network-WithLossCell/_backbone-MLP/fc1-Dense/MatMul-op0"
    assert all("//" not in n and n.endswith(f"-op{i}") for i, n in enumerate(names)), names
    for step in range(STEPS):
        begin, end = lines[2 * step], lines[2 * step + 1]
        head, kernels = begin.split(" kernels=")
        assert head == f"begin device=0 step={step} keys=0,1 kbyk=0", begin
        assert kernels.split("|") == names
        assert end == "end keys=", end


@pytest.mark.parametrize("enable", [None, "1", "ON", "off"])
def test_hooks_only_with_ms_hook_enable_on(tmp_path, enable):
    hook = {"HOOK_TOOL_PATH": PROBE}
    if enable is not None:
        hook["MS_HOOK_ENABLE"] = enable
    p = train(tmp_path, hook=hook)
    assert probe_lines(tmp_path) == []
    assert p.stderr == ""


def bad_tool(tmp_path, kind):
    if kind == "missing":
        return str(tmp_path / "nowhere" / "libhook.so")
    if kind == "unset":
        return None
    if kind == "versioned":  # a real hook library, but the text after the last '.' is "1"
        shutil.copy(PROBE, tmp_path / "libhook_probe.so.1")
        return str(tmp_path / "libhook_probe.so.1")
    if kind == "directory":
        os.mkdir(tmp_path / "dir.so")
        return str(tmp_path / "dir.so")
    if kind == "not_elf":
        (tmp_path / "text.so").write_text("not a library\n")
        return str(tmp_path / "text.so")
    return PROBE_NO_END  # lacks MS_DbgOnStepEnd


@pytest.mark.parametrize("kind", ["missing", "unset", "versioned", "directory", "not_elf", "no_end_symbol"])
def test_bad_hook_tool_path_leaves_hooks_off_with_a_warning(baseline, tmp_path, kind):
    hook = {"MS_HOOK_ENABLE": "on"}
    path = bad_tool(tmp_path, kind)
    if path is not None:
        hook["HOOK_TOOL_PATH"] = path
    p = train(tmp_path, hook=hook)
    assert p.stdout == baseline[0].stdout, "training is unaffected"
    warnings = [line for line in p.stderr.splitlines() if "[WARNING] ms_hook_runner:" in line]
    assert len(warnings) == 1, p.stderr  # once: the tool is tried on the first step only
    assert "hooks are off" in warnings[0]
    assert probe_lines(tmp_path) == []


# ---- ranks ----

def test_ranks_train_on_their_own_device_and_batch(baseline, tmp_path):
    p = train(tmp_path, "--ranks", "2", hook={"MS_HOOK_ENABLE": "on", "HOOK_TOOL_PATH": PROBE}, tag="rank{rank}")
    assert printed_losses(p, 0) == printed_losses(baseline[0]), "rank 0 is the single-process run"
    dumps = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    for r, d in enumerate(dumps):
        losses, _ = reference_training(d, STEPS)
        np.testing.assert_array_equal(d["losses"], losses)
        assert printed_losses(p, r) == [float(f"{v:.6f}") for v in losses]
    assert not np.array_equal(dumps[0]["x"], dumps[1]["x"]), "each rank has its own batch"
    np.testing.assert_array_equal(dumps[0]["init_w1"], dumps[1]["init_w1"])
    # Both processes append to one probe log: the begin lines by device, each with steps 0..N-1.
    lines = (tmp_path / "rank{rank}.probe").read_text().splitlines()
    begins = [line.split(" kernels=")[0] for line in lines if line.startswith("begin")]
    for r in range(2):
        mine = [b for b in begins if b.startswith(f"begin device={r} ")]
        assert mine == [f"begin device={r} step={i} keys=0,1 kbyk=0" for i in range(STEPS)], lines
    assert lines.count("end keys=") == 2 * STEPS


def test_launcher_fails_when_a_rank_fails(tmp_path):
    env = shimtest.clean_env({"MS_HOOK_RUNNER_LIB": str(tmp_path / "missing.so")})
    p = subprocess.run([shimtest.PYTHON, SCRIPT, "--ranks", "2", "--steps", "1"], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "rank 0 failed" in p.stderr and "rank 1 failed" in p.stderr
