"""msprobe-inspect first-nan and first-diff through the LLM's fused MC2 kernels and its expert all-to-alls (issue 42):
REAL dumps of examples/llm_train.py (two tensor- and expert-parallel ranks, --moe) made by the shim on the CANN
stand-in, alone and under mpirun -n 2.

A NaN planted in one rank's attention (--nan-kind data: the QKV projection overflows) reaches the other rank only
through the output projection's MC2 kernel (MatmulAllReduce, or MatmulReduceScatter with --tp-mode sequence); one
planted in one rank's experts (GroupedMatmulV5 writes a NaN) reaches the other only through the combine all-to-all
(HcclAlltoAllV). The answer must name the planted rank and kernel, and the route the kernel that carried it, joined
at the communicator and sequence number the two ranks' dump.json entries hold.
"""
import functools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from inspect_support import BUILD, INSPECT, PYTHON, SHIM, SRC, clean_env, inspect, load_dump

LLM = SRC / "examples" / "llm_train.py"
MPI_DRIVER = BUILD / "bin" / "msprobe-inspect-mpi"
MPIRUN = shutil.which("mpirun")

# name -> (llm_train.py arguments, planted rank, planted op, carrier op)
RUNS = {
    "mc2-allreduce": (["--nan-at", "1", "--nan-rank", "0", "--nan-kind", "data"], 0, "Muls", "MatmulAllReduce"),
    "mc2-sequence": (["--nan-at", "1", "--nan-rank", "1", "--nan-kind", "data", "--tp-mode", "sequence"], 1, "Muls",
                     "MatmulReduceScatter"),
    "all-to-all": (["--nan-at", "1", "--nan-rank", "1", "--nan-kind", "kernel", "--nan-op", "GroupedMatmulV5"], 1,
                   "GroupedMatmulV5", "HcclAlltoAllV"),
}
CLEAN = {"allreduce": [], "sequence": ["--tp-mode", "sequence"]}


def llm(dest, *args):
    """llm_train.py under the shim: two ranks, MoE, two marked steps, statistics."""
    e = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": "statistics", "LD_PRELOAD": str(SHIM),
                   "HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "60"})
    r = subprocess.run([PYTHON, str(LLM), "--steps", "2", "--ranks", "2", "--moe", "--mark-steps", *args], env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"llm_train.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return Path(dest)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm")

    @functools.lru_cache(maxsize=None)
    def get(name):
        return llm(root / name, *(RUNS[name][0] if name in RUNS else CLEAN[name]))
    return get


def mode_of(name):
    return "sequence" if "--tp-mode" in RUNS[name][0] else "allreduce"


def check_answer(root, doc, name):
    """The planted rank's kernel at step 1 is the only origin; the other rank is reached through one hop, the carrier
    kernel, which both ranks' dump.json entries hold at the hop's communicator and sequence number."""
    _, rank, op, carrier = RUNS[name]
    assert (doc["rank"], doc["step"]) == (rank, 1) and doc["kernel"].startswith(op + "."), doc["kernel"]
    assert len(doc["origins"]) == 1 and doc["reached"] == [0, 1]
    (hop,) = doc["spread"]
    assert hop["kernel"].startswith(carrier + ".") and hop["op_kind"] == "collective", hop
    assert (hop["from"], hop["to"], hop["depth"], hop["presumed"]) == ([rank], [1 - rank], 1, False), hop
    for r in (0, 1):
        comm = load_dump(root / "step1" / f"rank{r}")["data"][hop["kernel"]]["comm"]
        assert (comm["name"], comm["seq"], comm["rank"], comm["size"]) == (hop["comm"], hop["seq"], r, 2), comm
    roles = {p["rank"]: (p["role"], p["kernel"]) for p in doc["per_rank"]}
    assert roles == {rank: ("origin", doc["kernel"]), 1 - rank: ("reached", hop["kernel"])}, roles


@pytest.mark.parametrize("name", list(RUNS))
def test_first_nan_through_mc2_and_all_to_all(runs, name):
    root = runs(name)
    r = inspect("first-nan", root, "--json", expect=1)
    doc = json.loads(r.stdout)
    check_answer(root, doc, name)
    assert doc["kind"] == "compute" and doc["op_kind"] == "compute"
    planted = load_dump(root / "step1" / f"rank{doc['rank']}")["data"][doc["kernel"]]
    assert all(t["Max"] == t["Max"] and abs(t["Max"]) != float("inf")
               for t in planted["input_args"] if isinstance(t, dict) and "Max" in t)  # finite inputs
    text = inspect("first-nan", root, expect=1).stdout
    hop = doc["spread"][0]
    assert f"step 1 {hop['kernel']} (comm {hop['comm']}, seq {hop['seq']}): rank {doc['rank']} -> rank " \
           f"{1 - doc['rank']}" in text, text


@pytest.mark.parametrize("name", list(RUNS))
def test_first_diff_through_mc2_and_all_to_all(runs, name):
    """Against the same run without the planted bug: the same rank, kernel and route. The data kind's Muls is a
    kernel only the planted run has (kind "only in A"); the kernel kind's GroupedMatmulV5 computes differently from
    the same inputs (kind "compute", verdict "kernel")."""
    root, clean = runs(name), runs(mode_of(name))
    doc = json.loads(inspect("first-diff", root, clean, "--json", expect=1).stdout)
    check_answer(root, doc, name)
    if RUNS[name][2] == "Muls":
        assert doc["kind"] == "only in A" and doc["only_a"] > 0, doc["kind"]
    else:
        assert (doc["kind"], doc["verdict"]) == ("compute", "kernel"), (doc["kind"], doc["verdict"])


needs_mpi = pytest.mark.skipif(not (MPIRUN and MPI_DRIVER.exists()),
                               reason="no mpirun or no msprobe-inspect-mpi (Open MPI not installed at build time)")


def under_mpirun(n, *args):
    env = clean_env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                     "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
                     "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_pml": "ob1",
                     "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    return subprocess.run([MPIRUN, "-n", str(n), "--oversubscribe", str(INSPECT), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


@needs_mpi
@pytest.mark.parametrize("name", list(RUNS))
def test_same_answers_under_mpirun(runs, name):
    root, clean = runs(name), runs(mode_of(name))
    for args in (["first-nan", root, "--json"], ["first-diff", root, clean, "--json"]):
        alone = json.loads(inspect(*args, expect=1).stdout)
        r = under_mpirun(2, *args)
        assert r.returncode == 1, f"mpirun -n 2 {args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert json.loads(r.stdout) == alone
        check_answer(root, alone, name)
