"""examples/train.py end to end: losses decrease (fp32, fp16, bf16), runs are deterministic, the
executor cache changes nothing, two HCCL ranks agree, and the fp32 run matches a numpy reference of
the same model, gradients and AdamW written out by hand."""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

SOURCE = os.environ.get("MSPROBE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build"))
TRAIN = os.path.join(SOURCE, "examples", "train.py")
LINE = re.compile(r"^(?:\[rank (\d+)\] )?step (\d+) loss (-?\d+\.\d{6})$")


def run_train(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("TINY_NPU_EXECUTOR_CACHE", None)
    for var in ("RANK_ID", "RANK_SIZE", "TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING"):
        e.pop(var, None)
    e.update(env or {})
    p = subprocess.run([sys.executable, TRAIN, *args], env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"train.py {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    losses = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        assert m, f"unexpected output line: {line!r}"
        rank = int(m.group(1) or 0)
        losses.setdefault(rank, []).append(float(m.group(3)))
        assert int(m.group(2)) == len(losses[rank]) - 1
    return losses, p


def strictly_decreasing(xs):
    return all(b < a for a, b in zip(xs, xs[1:]))


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_three_steps_loss_decreases(dtype):
    losses, _ = run_train("--steps", "3", "--dtype", dtype)
    assert len(losses[0]) == 3 and strictly_decreasing(losses[0]), losses


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_default_five_steps(dtype):
    losses, _ = run_train("--dtype", dtype)
    assert len(losses[0]) == 5 and losses[0][4] < losses[0][0], losses


def test_runs_are_deterministic(tmp_path):
    a, pa = run_train("--steps", "3", "--dump", str(tmp_path / "a.npz"))
    b, pb = run_train("--steps", "3", "--dump", str(tmp_path / "b.npz"))
    assert pa.stdout == pb.stdout
    assert_identical(tmp_path / "a.npz", tmp_path / "b.npz")


def assert_identical(path_a, path_b):
    da, db = np.load(path_a), np.load(path_b)
    assert sorted(da.files) == sorted(db.files) and len(da.files) > 5
    for k in da.files:
        assert da[k].tobytes() == db[k].tobytes(), f"{k} differs"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_executor_cache_is_bit_identical(tmp_path, dtype):
    plain, pp = run_train("--steps", "3", "--dtype", dtype, "--dump", str(tmp_path / "plain.npz"))
    cached, pc = run_train("--steps", "3", "--dtype", dtype, "--dump", str(tmp_path / "cached.npz"), "-v",
                           env={"TINY_NPU_EXECUTOR_CACHE": "1"})
    assert plain == cached
    assert_identical(tmp_path / "plain.npz", tmp_path / "cached.npz")
    hits = re.search(r"executor cache: (\d+) hits, (\d+) misses", pc.stderr)
    assert hits and int(hits.group(1)) > int(hits.group(2)), pc.stderr  # the cache really was used


def test_inline_launch_is_bit_identical(tmp_path):
    queued, _ = run_train("--steps", "3", "--dump", str(tmp_path / "queued.npz"))
    inline, _ = run_train("--steps", "3", "--dump", str(tmp_path / "inline.npz"), env={"TASK_QUEUE_ENABLE": "0"})
    assert queued == inline
    assert_identical(tmp_path / "queued.npz", tmp_path / "inline.npz")


def test_two_ranks_agree(tmp_path):
    losses, _ = run_train("--steps", "3", "--ranks", "2", "--dump", str(tmp_path / "r{rank}.npz"))
    assert sorted(losses) == [0, 1]
    assert losses[0] == losses[1] and strictly_decreasing(losses[0]), losses
    # Averaged gradients keep the replicas identical.
    assert_identical(tmp_path / "r0.npz", tmp_path / "r1.npz")
    single, _ = run_train("--steps", "3")
    assert losses[0][0] != single[0][0]  # each rank trained on its own shard


def test_failing_rank_fails_the_launch():
    e = dict(os.environ, FAKE_CANN_DEVICE_COUNT="1")  # rank 1 cannot set device 1
    p = subprocess.run([sys.executable, TRAIN, "--steps", "2", "--ranks", "2", "--timeout", "60"], env=e,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "rank 1 failed" in p.stderr


def test_mark_steps_calls_the_shim_step_marker():
    probe = os.path.join(BUILD, "tests", "libstep_probe.so")
    _, p = run_train("--steps", "3", "--mark-steps", env={"LD_PRELOAD": probe})
    assert "msprobe_shim_step called 3 times" in p.stderr
    _, p = run_train("--steps", "2", env={"LD_PRELOAD": probe})  # without the flag: never called
    assert "msprobe_shim_step" not in p.stderr


# ---- numpy reference -------------------------------------------------------------------------------
_erf = np.vectorize(math.erf)


def reference_training(params, batches, lr, steps, betas=(0.9, 0.999), eps=1e-8, wd=1e-2, ln_eps=1e-5):
    """float64 forward, hand-derived backward and torch-style AdamW of train.TinyModel."""
    P = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in P.items()}
    v2 = {k: np.zeros_like(v) for k, v in P.items()}
    losses = []
    for t in range(1, steps + 1):
        tok, target = batches[t - 1]
        x0 = P["embed.weight"][tok]
        mu = x0.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt(((x0 - mu) ** 2).mean(-1, keepdims=True) + ln_eps)
        xhat = (x0 - mu) * rstd
        x1 = xhat * P["norm.weight"] + P["norm.bias"]
        h = x1 @ P["fc1.weight"].T + P["fc1.bias"]
        a = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
        z = a @ P["fc2.weight"].T + P["fc2.bias"]
        e = np.exp(z - z.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        losses.append(((p - target) ** 2).mean())

        g = {}
        dp = 2.0 * (p - target) / p.size
        dz = p * (dp - (dp * p).sum(-1, keepdims=True))
        g["fc2.weight"], g["fc2.bias"] = dz.T @ a, dz.sum(0)
        da = dz @ P["fc2.weight"]
        dh = da * (0.5 * (1 + _erf(h / math.sqrt(2))) + h * np.exp(-0.5 * h * h) / math.sqrt(2 * math.pi))
        g["fc1.weight"], g["fc1.bias"] = dh.T @ x1, dh.sum(0)
        dx1 = dh @ P["fc1.weight"]
        g["norm.weight"], g["norm.bias"] = (dx1 * xhat).sum(0), dx1.sum(0)
        dxhat = dx1 * P["norm.weight"]
        dx0 = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
        g["embed.weight"] = np.zeros_like(P["embed.weight"])
        np.add.at(g["embed.weight"], tok, dx0)

        b1, b2 = betas
        for k in P:
            P[k] *= 1 - lr * wd
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v2[k] = b2 * v2[k] + (1 - b2) * g[k] ** 2
            P[k] -= lr / (1 - b1 ** t) * m[k] / (np.sqrt(v2[k]) / math.sqrt(1 - b2 ** t) + eps)
    return losses, P


def test_fp32_training_matches_numpy_reference():
    sys.path.insert(0, os.path.dirname(TRAIN))
    import train  # noqa: E402
    import tiny_npu  # noqa: E402

    rt = tiny_npu.init(0)
    try:
        model = train.TinyModel(np.random.RandomState(0), tiny_npu.float32)
        init = {k: p.numpy() for k, p in model.named_parameters()}
        opt = train.AdamW(model.parameters(), lr=0.02)
        rng = np.random.RandomState(7)
        batches = [train.synthetic_batch(rng) for _ in range(3)]
        losses = []
        for tok, target in batches:
            loss = model.forward(tiny_npu.Tensor.from_numpy(tok), tiny_npu.Tensor.from_numpy(target))
            model.backward()
            opt.step()
            losses.append(loss.item())
            opt.zero_grad()
        final = {k: p.numpy() for k, p in model.named_parameters()}
    finally:
        rt.shutdown()
    ref_losses, ref_params = reference_training(init, batches, lr=0.02, steps=3)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for k, want in ref_params.items():
        np.testing.assert_allclose(final[k], want, rtol=1e-4, atol=1e-5, err_msg=k)
