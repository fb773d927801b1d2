"""examples/llm_train.py under the shim in every task (issue 41): every kernel of the LLM host is in the dump, and
its values are numpy's on the host's own inputs. The tensor task's outputs are recomputed in float64 from their dumped
inputs (npu_refs, the collectives from every member's inputs); the tasks that write no files are compared with the
files of a tensor-task run of the same arguments (the program is deterministic: the runs are bit-identical, which
their equal losses and kernel names confirm)."""
import functools

import numpy as np
import pytest

import npu_refs
import shimtest
from shimtest import fail_report
from test_llm_train import run_llm

STEPS = ["--steps", "2", "--mark-steps"]
CONFIGS = {"1rank-dense": [], "2rank-sequence-moe": ["--ranks", "2", "--moe", "--tp-mode", "sequence"],
           "2rank-allreduce-moe": ["--ranks", "2", "--moe", "--tp-mode", "allreduce"]}
DENSE_OPS = {"Add", "Adds", "ApplyAdamWV2", "Cast", "Cat", "Embedding", "EmbeddingDenseBackward", "FlashAttentionScore",
             "FlashAttentionScoreGrad", "InplaceCopy", "InplaceZero", "LogSoftmax", "LogSoftmaxBackward", "Matmul",
             "NLLLoss", "NLLLossBackward", "RmsNorm", "RmsNormGrad", "RotaryPositionEmbedding",
             "RotaryPositionEmbeddingGrad", "SwiGlu", "SwiGluGrad"}
MOE_2RANK_OPS = DENSE_OPS | {"BatchMatMul", "GroupedMatmulV5", "HcclAllGather", "HcclAllReduce", "HcclAlltoAllV",
                             "MoeFinalizeRoutingV2", "MoeFinalizeRoutingV2Grad", "MoeGatingTopKSoftmaxV2",
                             "MoeInitRoutingV2", "MoeInitRoutingV2Grad", "SoftmaxBackward"}
OP_TYPES = {"1rank-dense": DENSE_OPS, "2rank-sequence-moe": MOE_2RANK_OPS | {"AllGatherMatmul", "MatmulReduceScatter"},
            "2rank-allreduce-moe": MOE_2RANK_OPS | {"MatmulAllReduce"}}
DEVICE_STATS = {"device-stats": (), "host-stats": (("MSPROBE_DEVICE_STATS", "off"),)}
PLANTED = {"kernel": (1, "FlashAttentionScore"), "data": (0, "Muls")}  # --nan-kind: (--nan-rank, the kernel)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """run(config, task, env pairs, extra args) under the shim, each run once for the module."""
    root = tmp_path_factory.mktemp("llm")

    @functools.lru_cache(maxsize=None)
    def get(config, task, env=(), extra=()):
        where = root / "-".join([config, task] + [v for _, v in env] + list(extra))
        return run_llm(where, *STEPS, *CONFIGS[config], *extra, shim=True, task=task, env=dict(env))
    return get


def assert_every_launch_captured(r):
    """Every aclnn kernel the stand-in launched (its launch log, both ranks) is in the dump, as often."""
    captured, launched = r.dump.op_counts(), r.launches()
    assert launched and {op: captured[op] for op in launched} == dict(launched)


@pytest.mark.parametrize("config", CONFIGS)
def test_tensor_task_every_output_is_numpys(runs, config):
    r = runs(config, "tensor")
    assert_every_launch_captured(r)
    # Named from the Python stack (the other tasks' names are these): main() -> train() -> the model or optimizer.
    unnamed = [n for _, n, _ in r.dump.kernels() if not n.split(".")[1].startswith("main_train_")]
    assert not unnamed, unnamed[:5]
    problems, _ = shimtest.check_files(r.dump)
    assert not problems, fail_report(problems)
    problems, checked = shimtest.check_recomputation(r.dump)
    assert not problems, fail_report(problems)
    assert checked == r.dump.op_counts(), "every kernel recomputed once"
    assert set(checked) == OP_TYPES[config]
    problems, n = shimtest.check_statistics(r.dump)
    assert not problems, fail_report(problems)
    assert n > 1000


@pytest.mark.parametrize("stats", DEVICE_STATS)
@pytest.mark.parametrize("config", CONFIGS)
def test_statistics_task_equals_numpy_on_the_same_kernels_data(runs, config, stats):
    """Max/Min/Mean/Norm of every tensor, with the statistics reduced on the device (the default) and on the host."""
    r, t = runs(config, "statistics", DEVICE_STATS[stats]), runs(config, "tensor")
    assert r.stdout == t.stdout and r.dump.names_by_folder() == t.dump.names_by_folder()
    assert all(f.files() == [] for f in r.dump.folders())
    problems, n = shimtest.check_statistics(r.dump, files=t.dump)
    assert not problems, fail_report(problems)
    assert n == sum(len(list(shimtest.tensors(e))) for _, _, e in t.dump.kernels())


@pytest.mark.parametrize("config", CONFIGS)
def test_md5_is_the_crc32_of_each_tensors_data(runs, config):
    r, t = runs(config, "statistics", (("MSPROBE_SUMMARY_MODE", "md5"),)), runs(config, "tensor")
    assert r.stdout == t.stdout and r.dump.names_by_folder() == t.dump.names_by_folder()
    assert all(f.files() == [] for f in r.dump.folders())
    problems, n = shimtest.check_md5(r.dump, files=t.dump)
    assert not problems, fail_report(problems)
    assert n > 1000


def without_name(comm):
    return comm and {k: v for k, v in comm.items() if k != "name"}


@pytest.mark.parametrize("config", CONFIGS)
def test_structure_task_names_every_kernel_and_copies_no_data(runs, config):
    r, t = runs(config, "structure"), runs(config, "tensor")
    assert r.stdout == t.stdout and r.dump.names_by_folder() == t.dump.names_by_folder()
    assert_every_launch_captured(r)
    for f in r.dump.folders():
        assert f.files() == [] and set(f.construct) == f.names()
        for name, e in f.entries():
            # A root-info communicator's name is HCCL's identifier of that run's root info: it differs between runs.
            assert without_name(e.get("comm")) == without_name(t.dump.folder(f.step, f.rank).data[name].get("comm"))
            for ref in shimtest.tensors(e):
                assert ref.info["Max"] is None and "data_name" not in ref.info, (name, ref)


@pytest.mark.parametrize("task", ["overflow_check", "flight"])
def test_a_clean_run_writes_nothing(runs, task):
    r = runs("2rank-sequence-moe", task)
    assert r.stdout == runs("2rank-sequence-moe", "tensor").stdout
    assert r.dump.folders() == [] and "overflow" not in r.stderr


def assert_data_equal(got, want, where):
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes(), where


@pytest.mark.parametrize("kind", PLANTED)
def test_overflow_check_writes_the_planted_kernel(runs, kind):
    """--nan-at 1 on one rank: that rank's only kernel written is the planted one, with its tensor files (kernel kind:
    its inputs are the clean run's, the tensor run's files of the same kernel, and its outputs too but where the plant
    wrote; data kind: finite inputs, outputs numpy's with the infinities). The other rank's is the first collective
    that brings the values over: all its own inputs finite, an output not."""
    rank, op = PLANTED[kind]
    plant = ("--nan-at", "1", "--nan-rank", str(rank), "--nan-kind", kind)
    r, clean = runs("2rank-sequence-moe", "overflow_check", (), plant), runs("2rank-sequence-moe", "tensor")
    assert [(f.step, f.rank) for f in r.dump.folders()] == [(1, 0), (1, 1)]
    problems, _ = shimtest.check_files(r.dump)
    assert not problems, fail_report(problems)
    for f in r.dump.folders():
        (name, e), = f.entries()
        data = {(t.side, t.slot): f.load(t.info) for t in shimtest.tensors(e)}
        outputs = [a for (side, _), a in data.items() if side == "output"]
        assert e["overflow"] == "; ".join(f"output.{slot}: {np.isnan(a).sum()} NaN, {np.isposinf(a).sum()} +Inf, "
                                         f"{np.isneginf(a).sum()} -Inf" for (side, slot), a in data.items()
                                         if side == "output" and not np.isfinite(a).all()), e["overflow"]
        if f.rank != rank:
            assert "comm" in e and all(np.isfinite(a).all() for (side, _), a in data.items() if side == "input"), name
            continue
        assert shimtest.op_type(name) == op, name
        if kind == "data":
            args = [shimtest.arg_value(f, a) for a in e["input_args"]]
            assert all(np.isfinite(a).all() for a in args if isinstance(a, np.ndarray))
            with np.errstate(over="ignore"):  # the plant's overflow, rounded to bf16
                for want, out, got in zip(npu_refs.REFS[op](args, None), e["output"], outputs):
                    assert npu_refs.compare(got, want, out["dtype"]) is None and not np.isfinite(got).all()
            continue
        base = clean.dump.folder(1, rank)
        for t in shimtest.tensors(base.data[name]):
            a, b = data[(t.side, t.slot)], base.load(t.info)
            kept = np.isfinite(a) if t.side == "output" else np.ones(a.shape, bool)
            assert np.array_equal(a[kept], b[kept]), (name, t.side, t.slot)


def launches(dump, rank):
    """(launch index, folder, kernel name, entry) of one rank's kernels, in launch order."""
    return sorted(((e["launch"]["index"], f, name, e) for f in dump.folders() if f.rank == rank
                   for name, e in f.entries()), key=lambda row: row[0])


def test_flight_record_is_the_kernels_before_the_planted_one(runs):
    """--nan-kind kernel at step 1 on rank 1, MSPROBE_FLIGHT_KERNELS=K: rank 1's record is its K launches before the
    planted FlashAttentionScore and that kernel, as the tensor task numbers them, every tensor before the trigger equal
    to the clean tensor run's bit for bit, every entry marked with the trigger. Rank 0's record ends with the
    collective that brought the NaN over."""
    k, plant = 12, ("--nan-at", "1", "--nan-rank", "1", "--nan-kind", "kernel")
    r = runs("2rank-sequence-moe", "flight", (("MSPROBE_FLIGHT_KERNELS", str(k)),), plant)
    clean = runs("2rank-sequence-moe", "tensor")
    problems, _ = shimtest.check_files(r.dump)
    assert not problems, fail_report(problems)
    assert "comm" in launches(r.dump, 0)[-1][3]
    rows = launches(r.dump, 1)
    assert len(rows) == k + 1, [n for _, _, n, _ in rows]
    order = {i: (f.step, name) for i, f, name, _ in launches(clean.dump, 1)}
    first, trigger = rows[0][0], rows[-1][2]
    assert [i for i, _, _, _ in rows] == list(range(first, first + k + 1))
    assert [(f.step, n) for _, f, n, _ in rows] == [order[i] for i in range(first, first + k + 1)]
    assert shimtest.op_type(trigger) == "FlashAttentionScore" and rows[-1][1].step == 1, trigger
    for _, f, name, e in rows:
        assert e["flight_trigger"] == "overflow" and e["flight_trigger_kernel"] == trigger, (name, e)
        assert "flight_note" not in e
        if name == trigger:
            continue
        base = clean.dump.folder(f.step, 1)
        for got, want in zip(shimtest.tensors(e), shimtest.tensors(base.data[name])):
            assert_data_equal(f.load(got.info), base.load(want.info), (name, got.side, got.slot))
    assert "NaN" in rows[-1][3]["overflow"]
