"""tiny_npu's launch path: phase 2 on the native queue thread (which set its device), errors of queued
calls surfacing at drain, ops on strided views against numpy, and the executor cache."""
import ctypes
import math
import threading

import numpy as np
import pytest

from tiny_npu import acl, ops
from tiny_npu.runtime import TNQ_CALL, TNQ_RELEASE, Runtime
from tiny_npu.tensor import Tensor

CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def test_queue_runs_calls_in_order_on_one_native_thread(rt):
    seen = []

    def record(a0, a1, a2, a3):
        seen.append((a0, threading.get_native_id()))
        return 0

    cb = CALLBACK(record)
    addr = ctypes.cast(cb, ctypes.c_void_p).value
    for i in range(1, 6):
        rt.submit(f"probe{i}", [(TNQ_CALL, addr, i, 0, 0, 0)])
    rt.drain()
    assert [a for a, _ in seen] == [1, 2, 3, 4, 5]
    threads = {t for _, t in seen}
    assert len(threads) == 1 and threading.get_native_id() not in threads


def test_task_queue_disabled_runs_inline(rt, monkeypatch):
    monkeypatch.setenv("TASK_QUEUE_ENABLE", "0")
    inline = Runtime(0)
    try:
        seen = []
        cb = CALLBACK(lambda *a: seen.append(threading.get_native_id()) or 0)
        inline.submit("probe", [(TNQ_CALL, ctypes.cast(cb, ctypes.c_void_p).value, 0, 0, 0, 0)])
        assert seen == [threading.get_native_id()]  # ran before submit returned, on this thread
        bogus = ctypes.create_string_buffer(64)
        with pytest.raises(acl.AclError, match="destroy bogus"):  # raised at the call site
            inline.submit("destroy bogus", [(TNQ_RELEASE, inline.destroy_fn["tensor"], ctypes.addressof(bogus))])
    finally:
        inline.shutdown()
    rt.synchronize()  # the session runtime is unaffected


def test_queue_thread_has_set_its_device(rt):
    dev = ctypes.c_int32(-1)
    get_device = ctypes.cast(rt.libs.ascendcl.aclrtGetDevice, ctypes.c_void_p).value
    rt.submit("aclrtGetDevice", [(TNQ_RELEASE, get_device, ctypes.addressof(dev))])
    rt.drain()
    assert dev.value == rt.device


def test_failed_queued_call_raises_at_drain_once(rt):
    bogus = ctypes.create_string_buffer(64)  # not an aclTensor: aclDestroyTensor refuses it
    rt.submit("destroy bogus", [(TNQ_RELEASE, rt.destroy_fn["tensor"], ctypes.addressof(bogus))])
    with pytest.raises(acl.AclError, match="destroy bogus"):
        rt.drain()
    rt.drain()  # the error was reported once and cleared


def test_matmul_on_transposed_views_matches_numpy(rt):
    rng = np.random.RandomState(2)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    g = rng.standard_normal((5, 4)).astype(np.float32)
    tx, tw, tg = Tensor.from_numpy(x), Tensor.from_numpy(w), Tensor.from_numpy(g)
    np.testing.assert_allclose(ops.matmul(tx, tw.T).numpy(), x @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.matmul(tg.T, tx).numpy(), g.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.reduce_sum(tg, (0,)).numpy(), g.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.add(ops.matmul(tx, tw.T), Tensor.from_numpy(g[0])).numpy(), x @ w.T + g[0],
                               rtol=1e-5, atol=1e-6)


def test_layer_norm_and_gelu_match_numpy(rt):
    rng = np.random.RandomState(3)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    out, mean, rstd = ops.layer_norm(Tensor.from_numpy(x), (6,), Tensor.from_numpy(w), Tensor.from_numpy(b), 1e-5)
    mu = x.astype(np.float64).mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.numpy(), (x - mu) * r * w + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), r, rtol=1e-5)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(ops.gelu(Tensor.from_numpy(x)).numpy(), 0.5 * x * (1 + erf(x / math.sqrt(2))),
                               rtol=1e-5, atol=1e-6)


def test_workspace_ops_many_times(rt):
    # Softmax asks for a workspace; a long queue of them reuses pooled blocks in stream order.
    x = np.random.RandomState(4).standard_normal((8, 16)).astype(np.float32)
    tx = Tensor.from_numpy(x)
    outs = [ops.softmax(tx) for _ in range(50)]
    e = np.exp(x - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    for o in outs[::7]:
        np.testing.assert_allclose(o.numpy(), want, rtol=1e-5, atol=1e-7)


@pytest.fixture
def executor_cache(rt):
    saved = rt.executor_cache
    cache = ops.enable_executor_cache(rt, capacity=4)
    yield cache
    cache.clear()
    rt.synchronize()
    rt.executor_cache = saved


def test_executor_cache_rebinds_addresses(rt, executor_cache):
    rng = np.random.RandomState(5)
    pairs = [(rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32))
             for _ in range(3)]
    outs = [ops.add(Tensor.from_numpy(a), Tensor.from_numpy(b), alpha=2.0) for a, b in pairs]
    assert executor_cache.misses == 1 and executor_cache.hits == 2
    for (a, b), o in zip(pairs, outs):
        np.testing.assert_allclose(o.numpy(), a + 2.0 * b, rtol=1e-6)
    ops.add(Tensor.from_numpy(pairs[0][0]), Tensor.from_numpy(pairs[0][1]), alpha=3.0)  # scalar in the key
    assert executor_cache.misses == 2


def test_executor_cache_views_lists_and_eviction(rt, executor_cache):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(100, 112, dtype=np.float32).reshape(3, 4)
    ta, tb = Tensor.from_numpy(a), Tensor.from_numpy(b)
    # Same view geometry, different storages: one executor, rebound.
    r1, r2 = ops.matmul(ta[1:], ta.T), ops.matmul(tb[1:], tb.T)
    np.testing.assert_allclose(r1.numpy(), a[1:] @ a.T, rtol=1e-6)
    np.testing.assert_allclose(r2.numpy(), b[1:] @ b.T, rtol=1e-6)
    # A tensor list is one slot, its members rebound by relative index.
    c1, c2 = ops.cat([ta, tb], 0), ops.cat([tb, ta], 0)
    np.testing.assert_allclose(c1.numpy(), np.concatenate([a, b]))
    np.testing.assert_allclose(c2.numpy(), np.concatenate([b, a]))
    # More distinct ops than the capacity: evictions destroy executors on the queue, without errors.
    for n in range(1, 8):
        np.testing.assert_allclose(ops.muls(Tensor.from_numpy(np.ones(n, np.float32)), float(n)).numpy(),
                                   np.full(n, n, np.float32))
    assert len(executor_cache.entries) == 4
    rt.synchronize()


def test_task_queue_level_2_makes_no_acl_call_on_the_python_thread(rt, monkeypatch):
    """TASK_QUEUE_ENABLE=2 (torch_npu's EXEC_NPU_CMD_V2): the arguments are described, and converted, prepared and
    launched on the queue thread; a phase-1 error surfaces at the next drain."""
    from tiny_npu import runtime
    rt.synchronize()
    monkeypatch.setenv("TASK_QUEUE_ENABLE", "2")
    level2 = Runtime(0)
    try:
        assert level2.queue_level == 2
        monkeypatch.setattr(runtime, "_current", level2)

        def forbidden(*a, **k):
            raise AssertionError("an ACL argument object or phase 1 on the Python thread")
        monkeypatch.setattr(ops, "_create_tensor", forbidden)
        monkeypatch.setattr(ops, "_phase1", forbidden)
        rng = np.random.RandomState(2)
        a = Tensor.from_numpy(rng.uniform(-1, 1, (6, 8)).astype(np.float32), rt=level2)
        b = Tensor.from_numpy(rng.uniform(-1, 1, (6, 4)).astype(np.float32), rt=level2)
        wide = a[:, ::2]  # a strided view, as a device tensor description
        got = ops.add(wide, b, alpha=0.5)
        cat = ops.cat([a[:2], a[3:]], 0)
        lo, hi = ops.aminmax_all(b)
        np.testing.assert_allclose(got.numpy(), a.numpy()[:, ::2] + 0.5 * b.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(cat.numpy(), np.concatenate([a.numpy()[:2], a.numpy()[3:]]))
        assert lo.item() == b.numpy().min() and hi.item() == b.numpy().max()
        ops.add(a, a, out=b)  # an out of shape (6, 4) for a (6, 8) sum: phase 1 fails on the queue thread
        with pytest.raises(acl.AclError, match="aclnnAddGetWorkspaceSize"):
            level2.drain()
    finally:
        monkeypatch.undo()
        level2.shutdown()
    rt.synchronize()
