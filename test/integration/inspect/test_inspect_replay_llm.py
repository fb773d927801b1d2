"""msprobe-inspect replay on REAL tensor dumps of examples/llm_train.py made by the shim: every kernel the LLM step
launches has a CPU reference (FlashAttention, RoPE, SwiGlu, RmsNorm, cross entropy, the MoE ops, the MC2 kernels and
the collectives, each with its grad), so a clean run of 1 or 2 ranks, dense or --moe, in either tensor-parallel mode,
in bf16 (and fp16, fp32), is judged kernel by kernel with no SKIP and every kernel passes. A planted wrong kernel is named, alone, and every
kernel launched before it passes: a NaN written into FlashAttentionScore's first output at one step of one rank
(llm_train.py --nan-kind kernel: FAKE_CANN_NAN_OP for that launch), and one element of NLLLoss's loss made 1 % too
large (FAKE_CANN_PERTURB_ELEMENT, the stand-in's seam for a kernel wrong in one place).
"""
import csv
import functools
import json
import subprocess
from pathlib import Path

import pytest

from inspect_support import PYTHON, SHIM, SRC, clean_env, folders, inspect

LLM = SRC / "examples" / "llm_train.py"
HCCL = {"HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "60"}
RUNS = {"1rank": [], "1rank-moe": ["--moe"], "2rank": ["--ranks", "2"], "2rank-moe": ["--ranks", "2", "--moe"],
        "2rank-sequence-moe": ["--ranks", "2", "--tp-mode", "sequence", "--moe"],
        "1rank-moe-fp32": ["--moe", "--dtype", "fp32"], "2rank-moe-fp16": ["--ranks", "2", "--moe", "--dtype", "fp16"]}


def llm_dump(dest, *args, steps=2, **env):
    """A tensor dump of llm_train.py under the shim in `dest`; extra keyword arguments become environment variables."""
    e = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": "tensor", "LD_PRELOAD": str(SHIM), **HCCL, **env})
    r = subprocess.run([PYTHON, str(LLM), "--steps", str(steps), "--mark-steps", *map(str, args)], env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"llm_train.py under the shim failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    assert folders(dest), f"no dump written in {dest}:\n{r.stderr}"
    return dest, r


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm")

    @functools.lru_cache(maxsize=None)
    def get(name):
        return llm_dump(root / name, *RUNS[name])[0]
    return get


def replay(dump, out):
    """(exit status, stdout, result rows in (step, rank, launch index) order)."""
    r = inspect("replay", dump, "--out", out, "-j", "2")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    with open(next(Path(out).glob("accuracy_checking_result_*.csv")), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda x: (int(x["Step"]), x["Rank"], int(x["Launch Index"])))
    return r.returncode, r.stdout, rows


def dumped_kernels(dump):
    """{(step, rank folder): kernel names} as dump.json lists them."""
    out = {}
    for folder in folders(dump):
        out[(int(folder.parent.name[4:]), folder.name)] = set(json.loads((folder / "dump.json").read_text())["data"])
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_every_kernel_of_a_clean_llm_step_passes(clean, tmp_path, name):
    dump = clean(name)
    code, stdout, rows = replay(dump, tmp_path / "out")
    kernels = dumped_kernels(dump)
    n = sum(len(v) for v in kernels.values())
    assert f"{n} kernels: {n} compared ({n} pass, 0 warning, 0 error), 0 skipped" in stdout, stdout[:3000]
    assert code == 0
    # Every kernel of every folder is a row, and passes.
    assert {(int(r["Step"]), r["Rank"], r["API name"]) for r in rows} == \
        {(step, rank, k) for (step, rank), names in kernels.items() for k in names}
    assert {r["Forward Test Success"] for r in rows} == {"pass"}
    ops = {r["API name"].split(".")[0] for r in rows}
    expected = {"FlashAttentionScore", "FlashAttentionScoreGrad", "RotaryPositionEmbedding",
                "RotaryPositionEmbeddingGrad", "RmsNorm", "RmsNormGrad", "LogSoftmax", "LogSoftmaxBackward", "NLLLoss",
                "NLLLossBackward", "ApplyAdamWV2"}
    expected |= {"SwiGlu", "SwiGluGrad"}  # the dense MLP and each expert
    if "moe" in name:
        expected |= {"MoeGatingTopKSoftmaxV2", "MoeInitRoutingV2", "MoeInitRoutingV2Grad", "GroupedMatmulV5",
                     "MoeFinalizeRoutingV2", "MoeFinalizeRoutingV2Grad"}
    if name.startswith("2rank"):
        expected |= {"HcclAllReduce"}
        expected |= {"AllGatherMatmul", "MatmulReduceScatter"} if "sequence" in name else {"MatmulAllReduce"}
    assert expected <= ops, expected - ops


def assert_only_failing(rows, name_prefix, step, rank, status):
    """Exactly one kernel fails, `name_prefix...` in (step, rank) with `status`, and every kernel launched before it
    in that folder and every kernel of the earlier steps pass."""
    failing = [r for r in rows if r["Forward Test Success"] != "pass"]
    assert len(failing) == 1, [(r["API name"], r["Forward Test Success"], r["Message"]) for r in failing]
    bad = failing[0]
    assert bad["API name"].startswith(name_prefix) and bad["Forward Test Success"] == status, bad
    assert (int(bad["Step"]), bad["Rank"]) == (step, rank), bad
    earlier = [r for r in rows if int(r["Step"]) < step or
               (int(r["Step"]) == step and r["Rank"] == rank and int(r["Launch Index"]) < int(bad["Launch Index"]))]
    assert earlier and all(r["Forward Test Success"] == "pass" for r in earlier)
    return bad


def test_planted_nan_in_flash_attention_is_the_one_error(tmp_path):
    """--nan-at 1 --nan-rank 1: the stand-in writes a NaN into the first output (softmaxMax) of step 1's first
    FlashAttentionScore on rank 1. Replay names that kernel; the kernels that take the NaN in later (the grad that
    rebuilds P from it, the all-reduced gradients, AdamW) computed right from what they were given, and pass."""
    dump, _ = llm_dump(tmp_path / "dump", "--ranks", "2", "--moe", "--nan-at", "1", "--nan-rank", "1",
                       "--nan-kind", "kernel")
    code, stdout, rows = replay(dump, tmp_path / "out")
    assert code == 1
    bad = assert_only_failing(rows, "FlashAttentionScore.", 1, "rank1", "error")
    first_fa = min(int(r["Launch Index"]) for r in rows if (r["Step"], r["Rank"]) == ("1", "rank1") and
                   r["API name"].startswith("FlashAttentionScore."))
    assert int(bad["Launch Index"]) == first_fa
    assert "output.0 error" in bad["Message"], bad["Message"]
    assert f"(launch_index {first_fa}): error" in stdout


def test_one_element_one_percent_off_is_named(tmp_path):
    """FAKE_CANN_PERTURB_ELEMENT=NLLLoss: the loss (one fp32 element) 1 % too large in the step's one NLLLoss."""
    dump, _ = llm_dump(tmp_path / "dump", steps=1, FAKE_CANN_PERTURB_ELEMENT="NLLLoss")
    code, _, rows = replay(dump, tmp_path / "out")
    assert code == 1
    assert_only_failing(rows, "NLLLoss.", 0, "rank", "error")


def test_perturbing_past_the_output_changes_nothing(tmp_path):
    """An index past the output's elements: the stand-in says so on stderr and the run is clean."""
    dump, r = llm_dump(tmp_path / "dump", steps=1, FAKE_CANN_PERTURB_ELEMENT="NLLLoss:1")
    assert "NLLLoss's first floating-point output has 1 elements, index 1 changes nothing" in r.stderr
    code, _, rows = replay(dump, tmp_path / "out")
    assert code == 0 and {x["Forward Test Success"] for x in rows} == {"pass"}
