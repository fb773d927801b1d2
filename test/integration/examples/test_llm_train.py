"""examples/llm_train.py end to end: the model's loss and gradients against a float64 numpy model written out here,
the loss falling over 20 steps on 1 and 2 ranks (both tensor-parallel modes, dense and MoE), the tensor-parallel
runs equal to the one-rank run up to rounding, the task-queue levels bit-identical, the shim changing nothing the
program computes (statistics and tensor tasks, every kernel captured), two runs writing the same names and
arguments (what msprobe's compare pairs and checks), and the planted-NaN seams found by
msprobe-inspect first-nan where they were planted."""
import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import shimtest

LLM = os.path.join(shimtest.SOURCE, "examples", "llm_train.py")
INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")
# Collectives of a failed rank should fail the run, not hang it.
HCCL = {"HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "60"}


def run_llm(workdir, *args, shim=False, task=None, env=None, check=True, timeout=300):
    e = dict(HCCL, **(env or {}))
    if task is not None:
        e["MSPROBE_TASK"] = task
    r = shimtest.run([shimtest.PYTHON, LLM, *map(str, args)], workdir, shim=shim, env=e, timeout=timeout)
    return r.check() if check else r


def losses(run):
    """{rank: [float losses]}; every rank printed the same lines."""
    by_rank = {r: [float(v) for v in vals] for r, vals in run.losses().items()}
    first = next(iter(by_rank.values()))
    assert all(v == first for v in by_rank.values()), f"the ranks printed different losses: {by_rank}"
    return by_rank


def assert_same_arrays(a, b):
    da, db = np.load(a), np.load(b)
    assert sorted(da.files) == sorted(db.files) and len(da.files) > 10
    for k in da.files:
        assert da[k].tobytes() == db[k].tobytes(), f"{k} differs"


# ---- the model against numpy --------------------------------------------------------------------------------------
def rms_norm(x, g, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def rope(x, d, base=10000.0):
    """x [S, B, N, D] at positions 0..S-1, the "half" rotation."""
    inv = 1.0 / base ** (np.arange(0, d, 2) / d)
    angles = np.arange(x.shape[0])[:, None] * inv[None]
    angles = np.concatenate([angles, angles], 1)[:, None, None, :]
    rotated = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * np.cos(angles) + rotated * np.sin(angles)


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention(x, w_qkv, w_o, cfg):
    s, b, nq, nkv, d = cfg.seq, cfg.batch, cfg.heads, cfg.kv_heads, cfg.head_dim
    qkv = x @ w_qkv.T  # rows: position-major (s, b)
    q = rope(qkv[:, :nq * d].reshape(s, b, nq, d), d)
    k = rope(qkv[:, nq * d:(nq + nkv) * d].reshape(s, b, nkv, d), d)
    v = qkv[:, (nq + nkv) * d:].reshape(s, b, nkv, d)
    k, v = np.repeat(k, nq // nkv, axis=2), np.repeat(v, nq // nkv, axis=2)  # query head n reads kv head n // group
    scores = np.einsum("sbnd,tbnd->bnst", q, k) / np.sqrt(d)
    scores = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, scores)  # causal
    out = np.einsum("bnst,tbnd->sbnd", softmax(scores), v)
    return out.reshape(s * b, nq * d) @ w_o.T


def swiglu(h):
    gate, up = np.split(h, 2, axis=-1)
    return gate / (1 + np.exp(-gate)) * up


def moe(x, w_router, w_gate_up, w_down, k):
    p = softmax(x @ w_router.T)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for e in sorted(range(p.shape[1]), key=lambda e: -p[t, e])[:k]:  # ties: the lower expert
            out[t] += p[t, e] * (swiglu(x[t] @ w_gate_up[e]) @ w_down[e])
    return out


def reference_loss(P, tokens, target, cfg):
    """The mean cross entropy of llm_train.Decoder in float64, from its named parameters."""
    x = P["embed"][tokens]
    for i in range(cfg.layers):
        def w(name):
            return P[f"layers.{i}.{name}"]
        x = x + attention(rms_norm(x, w("attn_norm.weight")), w("attention.qkv.weight"), w("attention.o.weight"), cfg)
        h = rms_norm(x, w("mlp_norm.weight"))
        if cfg.experts:
            x = x + moe(h, w("mlp.router"), w("mlp.gate_up"), w("mlp.down"), cfg.top_k)
        else:
            x = x + swiglu(h @ w("mlp.gate_up.weight").T) @ w("mlp.down.weight").T
    logits = rms_norm(x, P["norm.weight"]) @ P["lm_head"].T
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(target)), target].mean()


@pytest.fixture(scope="module")
def device():
    sys.path.insert(0, os.path.dirname(LLM))
    import tiny_npu
    rt = tiny_npu.init(0)
    yield
    rt.shutdown()


@pytest.mark.parametrize("experts", [0, 4], ids=["dense", "moe"])
def test_loss_and_gradients_match_numpy(device, experts):
    """fp32 on one rank: the loss is the numpy model's, and every parameter's gradient G agrees with the numpy loss's
    derivative along a random direction D, (L(P + eD) - L(P - eD)) / 2e = <G, D>: the backward of every op is wired
    right (operand order, layouts, the causal mask's side, the halves of SwiGlu, the experts' groups)."""
    import llm_train
    import tiny_npu
    from tiny_npu.transformer import Parallel

    cfg = llm_train.Config(experts=experts)
    model = llm_train.Decoder(cfg, Parallel(), np.random.RandomState(0), tiny_npu.float32)
    tokens, target = llm_train.synthetic_batch(np.random.RandomState(1), cfg)
    params = {k: p.numpy().astype(np.float64) for k, p in model.named_parameters()}
    loss = model.forward(tiny_npu.Tensor.from_numpy(tokens), tiny_npu.Tensor.from_numpy(target)).item()
    model.backward()
    grads = {k: p.grad.numpy().astype(np.float64) for k, p in model.named_parameters()}
    assert len(params) == (17 if experts else 15)
    assert loss == pytest.approx(reference_loss(params, tokens, target, cfg), rel=1e-5)
    rng, eps = np.random.RandomState(5), 1e-4
    for name, p in params.items():
        d = rng.normal(size=p.shape)
        d /= np.linalg.norm(d)
        up, down = dict(params), dict(params)
        up[name], down[name] = p + eps * d, p - eps * d
        numeric = (reference_loss(up, tokens, target, cfg) - reference_loss(down, tokens, target, cfg)) / (2 * eps)
        assert (grads[name] * d).sum() == pytest.approx(numeric, rel=1e-4, abs=1e-8), name


# ---- training ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    """20 steps of one configuration, run once for the module: {rank: losses}."""
    root = tmp_path_factory.mktemp("twenty")

    @functools.lru_cache(maxsize=None)
    def get(ranks, mode, moe):
        args = ["--steps", "20", "--ranks", ranks, "--tp-mode", mode] + (["--moe"] if moe else [])
        return losses(run_llm(root / f"{ranks}-{mode}-{moe}", *args, timeout=600))
    return get


CONFIGS = [(1, "allreduce", False), (1, "allreduce", True), (2, "allreduce", False), (2, "sequence", False),
           (2, "allreduce", True), (2, "sequence", True)]


@pytest.mark.parametrize("ranks,mode,moe", CONFIGS, ids=[f"{r}rank-{m}-{'moe' if e else 'dense'}"
                                                          for r, m, e in CONFIGS])
def test_loss_falls_over_20_steps(twenty, ranks, mode, moe):
    got = twenty(ranks, mode, moe)
    assert sorted(got) == list(range(ranks))
    loss = got[0]
    assert len(loss) == 20 and all(np.isfinite(loss)), loss
    assert max(loss[-5:]) < 0.5 * loss[0] and np.mean(loss[-5:]) < 0.1 * loss[0], loss
    if ranks > 1:
        # The same model sharded: the one-rank run's losses up to rounding. Not exactly: a rank rounds its partial
        # matmul to bf16 before the ranks' sums are added (MatmulAllReduce, MatmulReduceScatter, the gradients'
        # all-reduce), where one rank rounds the whole sum once; training carries the differences on.
        one = twenty(1, "allreduce", moe)[0]
        assert loss[0] == pytest.approx(one[0], rel=1e-3)
        assert all(abs(a - b) <= 0.02 + 0.05 * b for a, b in zip(loss, one)), list(zip(loss, one))


@pytest.mark.parametrize("dtype,args", [("fp16", ["--ranks", "2", "--tp-mode", "sequence", "--moe"]),
                                        ("fp32", ["--moe"])], ids=["fp16-2rank-sequence-moe", "fp32-1rank-moe"])
def test_other_dtypes_train(tmp_path, dtype, args):
    loss = losses(run_llm(tmp_path, "--steps", "3", "--dtype", dtype, *args))[0]
    assert len(loss) == 3 and loss[2] < 0.6 * loss[0], loss


def test_task_queue_levels_are_bit_identical(tmp_path):
    """TASK_QUEUE_ENABLE 0 (inline), 1 (phase 2 on the queue thread) and 2 (everything there: the char * arguments
    travel in the item) compute the same bits: the loss and the parameters after one step (forward, backward and
    update), on one rank and on two with MC2 and expert parallelism."""
    for ranks, mode in ((1, "allreduce"), (2, "sequence")):
        runs = []
        for level in ("0", "1", "2") if ranks == 1 else ("1", "2"):
            dump = tmp_path / f"{ranks}-{level}-r{{rank}}.npz"
            r = run_llm(tmp_path / f"{ranks}-{level}", "--steps", "1", "--moe", "--ranks", ranks, "--tp-mode", mode,
                        "--dump", dump, env={"TASK_QUEUE_ENABLE": level})
            runs.append((r.stdout, [str(dump).replace("{rank}", str(k)) for k in range(ranks)]))
        for stdout, dumps in runs[1:]:
            assert stdout == runs[0][0]
            for a, b in zip(dumps, runs[0][1]):
                assert_same_arrays(a, b)


# ---- under the shim ---------------------------------------------------------------------------------------------
SHIM_RUNS = {"1rank": ["--moe"], "2rank-sequence": ["--ranks", "2", "--tp-mode", "sequence", "--moe"],
             "2rank-allreduce": ["--ranks", "2", "--moe"]}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = tmp_path_factory.mktemp("plain")

    @functools.lru_cache(maxsize=None)
    def get(name):
        dump = root / f"{name}-r{{rank}}.npz"
        return run_llm(root / name, "--steps", "2", "--mark-steps", "--dump", dump, *SHIM_RUNS[name]), dump
    return get


@pytest.mark.parametrize("task", ["statistics", "tensor"])
@pytest.mark.parametrize("name", ["1rank", "2rank-sequence"])
def test_shim_changes_nothing_and_captures_every_kernel(plain, tmp_path, task, name):
    base, base_dump = plain(name)
    dump = tmp_path / "r{rank}.npz"
    r = run_llm(tmp_path, "--steps", "2", "--mark-steps", "--dump", dump, *SHIM_RUNS[name], shim=True, task=task)
    assert r.stdout == base.stdout
    ranks = 2 if "2rank" in name else 1
    for k in range(ranks):
        assert_same_arrays(str(dump).replace("{rank}", str(k)), str(base_dump).replace("{rank}", str(k)))
    assert r.dump.steps() == [0, 1] and r.dump.ranks() == (list(range(ranks)) if ranks > 1 else [None])
    captured = r.dump.op_counts()
    launched = r.launches()  # every aclnn kernel the stand-in ran, both ranks
    assert {op: captured[op] for op in launched} == dict(launched)
    for op in ("FlashAttentionScore", "FlashAttentionScoreGrad", "RotaryPositionEmbedding", "SwiGluGrad",
               "GroupedMatmulV5", "MoeInitRoutingV2Grad", "NLLLossBackward", "ApplyAdamWV2"):
        assert captured[op] > 0, op
    if ranks > 1:
        for op in ("AllGatherMatmul", "MatmulReduceScatter", "HcclAllGather", "HcclAllReduce"):
            assert captured[op] > 0, op
    if task == "tensor":
        problems, dtypes = shimtest.check_files(r.dump)
        assert not problems, problems[:5]
        assert {"BFloat16", "Float32", "Int32", "Int64", "Bool"} <= dtypes


COMM_KERNELS = {"MatmulAllReduce", "AllGatherMatmul", "MatmulReduceScatter", "HcclAlltoAllV", "HcclAllGather",
                "HcclAllReduce"}


@pytest.mark.parametrize("mode", ["sequence", "allreduce"])
def test_mc2_and_all_to_all_kernels_carry_their_communicator(tmp_path, mode):
    """Two tensor- and expert-parallel ranks: the fused MC2 kernels (named by their group argument) and the
    all-to-alls carry the communicator as HCCL's kernels do, numbered with its collectives in one sequence that never
    restarts, the same kernel holding the same number on both ranks; no other kernel has a "comm"."""
    r = run_llm(tmp_path, "--steps", "2", "--mark-steps", "--ranks", "2", "--moe", "--tp-mode", mode, shim=True,
                task="statistics")
    by_rank = {0: {}, 1: {}}
    ops = set()
    for f in r.dump.folders():
        for name, e in f.data.items():
            op = shimtest.op_type(name)
            if op not in COMM_KERNELS:
                assert "comm" not in e, name
                continue
            ops.add(op)
            c = e["comm"]
            assert (c["rank"], c["size"]) == (f.rank, 2) and c["name"], (f.rank, name, c)
            by_rank[f.rank][(c["name"], c["seq"])] = (f.step, name)
    mc2 = {"MatmulAllReduce"} if mode == "allreduce" else {"AllGatherMatmul", "MatmulReduceScatter"}
    assert ops == mc2 | {"HcclAlltoAllV", "HcclAllGather", "HcclAllReduce"}, ops
    assert by_rank[0] == by_rank[1]
    for name in {n for n, _ in by_rank[0]}:
        seqs = sorted(q for n, q in by_rank[0] if n == name)
        assert seqs == list(range(len(seqs))), seqs


MC2_GROUP = {"MatmulAllReduce": 3, "AllGatherMatmul": 3, "MatmulReduceScatter": 3}  # the group's input_args slot


@pytest.mark.parametrize("mode", ["allreduce", "sequence"])
def test_two_runs_write_the_same_arguments(tmp_path, mode):
    """msprobe's compare pairs two runs' kernels by name and flags every argument that differs (a string argument by
    its value, a tensor by its CRC-32 in md5 mode): two runs of one program must write the same names and the same
    arguments. HCCL names a communicator afresh in each run, so an MC2 kernel's group argument is written as the
    communicator's label (comm0: the first communicator the process met); HCCL's name is in "comm" only."""
    runs = [run_llm(tmp_path / run, "--steps", "2", "--mark-steps", "--ranks", "2", "--moe", "--tp-mode", mode,
                    shim=True, task="statistics", env={"MSPROBE_SUMMARY_MODE": "md5"}) for run in ("a", "b")]
    folders = [{(f.step, f.rank): f.data for f in r.dump.folders()} for r in runs]
    assert sorted(folders[0]) == sorted(folders[1]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    names, groups = set(), 0
    for place, a in folders[0].items():
        b = folders[1][place]
        assert list(a) == list(b), place
        for name, entry in a.items():
            for key in ("input_args", "output"):
                assert entry.get(key) == b[name].get(key), (place, name, key)
            if (slot := MC2_GROUP.get(shimtest.op_type(name))) is not None:
                assert entry["input_args"][slot] == {"type": "str", "value": "comm0"}, (name, entry["input_args"])
                names.add((entry["comm"]["name"], b[name]["comm"]["name"]))
                groups += 1
    assert groups >= 8, groups
    assert all(x != y for x, y in names), names  # HCCL's names do differ between the runs


# ---- the planted bugs -------------------------------------------------------------------------------------------
def first_nan(root):
    p = subprocess.run([INSPECT, "first-nan", "--json", str(root)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, f"first-nan found nothing ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


@pytest.mark.parametrize("kind,rank,op,values,carrier", [("kernel", 1, "FlashAttentionScore", ["NaN"], "HcclAllReduce"),
                                                         ("data", 0, "Muls", ["+Inf", "-Inf"], "MatmulAllReduce")])
def test_planted_nan_is_found_where_it_was_planted(tmp_path, kind, rank, op, values, carrier):
    """--nan-at 1 --nan-rank R on two tensor-parallel ranks: msprobe-inspect first-nan names that rank's kernel at
    step 1 (FlashAttentionScore's softmax max for the kernel kind, the stand-in's first floating-point output; the
    overflowing Muls for the data kind), and the other rank as reached through the collective that carried it: the
    kernel kind's softmax max is read only by the backward, whose gradients an HCCL all-reduce sums; the data kind's
    infinities go through attention (NaN rows) into the output projection's MatmulAllReduce."""
    r = run_llm(tmp_path, "--steps", "2", "--ranks", "2", "--moe", "--mark-steps", "--nan-at", "1", "--nan-rank", rank,
                "--nan-kind", kind, shim=True, task="statistics", check=False)
    assert r.returncode == 0, r.stderr
    doc = first_nan(r.dump.root)
    assert (doc["rank"], doc["step"]) == (rank, 1) and doc["kernel"].startswith(op + "."), doc["kernel"]
    assert doc["kind"] == "compute" and doc["values"] == values
    assert len(doc["origins"]) == 1
    roles = {p["rank"]: (p["role"], p["kernel"].split(".")[0]) for p in doc["per_rank"]}
    assert roles == {rank: ("origin", op), 1 - rank: ("reached", carrier)}, roles


def test_bad_arguments_are_refused(tmp_path):
    cases = [(["--ranks", "2", "--dtype", "fp32"], 2, "take fp16 or bf16 only"),
             (["--ranks", "4"], 2, "--ranks must divide the 2 key-value heads"),
             (["--nan-at", "0", "--nan-kind", "kernel", "--nan-op", "Bogus"], 2, "--nan-op Bogus is no aclnn op"),
             (["--nan-at", "0", "--nan-kind", "kernel", "--nan-op", "MoeGatingTopKSoftmaxV2"], 1,
              "step 0 launched no aclnnMoeGatingTopKSoftmaxV2"),
             (["--nan-at", "0", "--nan-rank", "1"], 2, "--nan-rank must be a rank of the run")]
    for i, (args, status, message) in enumerate(cases):
        r = run_llm(tmp_path / str(i), "--steps", "1", *args, check=False)
        assert r.returncode == status and message in r.stderr, (args, r.returncode, r.stderr)
