"""msprobe-inspect first-nan and first-diff across ranks (issue 30), on REAL dumps of examples/train.py made by the
shim on the CANN stand-in, alone and under mpirun -n 1, 2 and 4, and on synthetic dumps (bench/gen_multirank.py)
for the causal cases that a tiny model cannot stage (concurrent origins in two groups, a reduction that overflows,
-inf masks).

The planted bug (train.py --nan-at STEP --nan-rank R) makes one rank's kernel non-finite at one step; the values
reach every rank through the collectives. first-nan must name that rank's kernel, not the collective that carried
the values and not rank 0.
"""
import functools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from inspect_support import BUILD, INSPECT, PYTHON, SHIM, SRC, TRAIN, clean_env, folders, inspect, load_dump

GEN = SRC / "bench" / "gen_multirank.py"
MPI_DRIVER = BUILD / "bin" / "msprobe-inspect-mpi"
MPIRUN = shutil.which("mpirun")


def train(dest, ranks, *args, task="tensor", timeout=300, **env):
    """train.py under the shim: `ranks` processes, tiny model, two steps."""
    e = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": task, "LD_PRELOAD": str(SHIM),
                   "HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "60", **env})
    r = subprocess.run([PYTHON, str(TRAIN), "--ranks", str(ranks), "--steps", "2", "--hidden", "16", *map(str, args)],
                       env=e, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"train.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return Path(dest)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")

    @functools.lru_cache(maxsize=None)
    def get(name):
        if name == "groups-nan":  # 8 ranks in 2 groups; rank 5's Gelu writes a NaN at step 1
            return train(root / name, 8, "--groups", "2", "--nan-at", "1", "--nan-rank", "5", "--nan-kind", "kernel")
        if name == "groups-clean":
            return train(root / name, 8, "--groups", "2")
        if name == "chain-data":  # 4 ranks, send/recv chain; rank 1's activation overflows float32 at step 1
            return train(root / name, 4, "--chain", "--nan-at", "1", "--nan-rank", "1", "--nan-kind", "data")
        raise KeyError(name)
    return get


def first_nan(root, *extra, expect=1):
    r = inspect("first-nan", root, "--json", *extra, expect=expect)
    return json.loads(r.stdout), r


def mpi_env():
    # Root in containers; loopback TCP and no shared-memory single copy (container pitfalls, docs/inspect.md).
    return clean_env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                      "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
                      "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_pml": "ob1",
                      "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})


def under_mpirun(n, *args):
    """`mpirun -n N --oversubscribe msprobe-inspect ARGS`: the documented command (msprobe-inspect execs its MPI
    sibling); returns the completed process."""
    return subprocess.run([MPIRUN, "-n", str(n), "--oversubscribe", str(INSPECT), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=mpi_env())


needs_mpi = pytest.mark.skipif(not (MPIRUN and MPI_DRIVER.exists()),
                               reason="no mpirun or no msprobe-inspect-mpi (Open MPI not installed at build time)")


def entry(root, step, rank, kernel):
    return load_dump(Path(root) / f"step{step}" / f"rank{rank}")["data"][kernel]


# ---- train.py: 8 ranks in two groups ----------------------------------------------------------------------------

def test_comm_objects_join_the_ranks(runs):
    """Every HCCL kernel's entry says which communicator, this rank's place in it, its members and the seq."""
    root = runs("groups-nan")
    members = {}  # (communicator, step, seq) -> ranks that recorded the instance
    for f in folders(root):
        rank = int(f.name[4:])
        for name, e in load_dump(f)["data"].items():
            if not name.startswith("Hccl"):
                assert "comm" not in e
                continue
            c = e["comm"]
            assert set(c) == {"name", "rank", "size", "ranks", "seq"}, c
            assert c["ranks"][c["rank"]] == rank and len(c["ranks"]) == c["size"]
            members.setdefault((c["name"], f.parent.name, c["seq"]), set()).add(rank)
            assert not any(isinstance(v, (int, float)) for v in e.values())  # msprobe's rule 2
    names = {n for n, _, _ in members}
    # The rank table's communicator (the loss), two data-parallel groups (subCommId 0, 1) and four across them.
    assert names == {"hccl_world_group"} | {f"hccl_world_group_sub_{i}" for i in (0, 1, 100, 101, 102, 103)}
    for (name, _, _), ranks in members.items():
        want = 8 if name == "hccl_world_group" else (4 if name.endswith(("_0", "_1")) else 2)
        assert len(ranks) == want, (name, ranks)  # every member recorded every instance, with the same seq


def test_comm_seq_counts_collectives_not_captured(tmp_path):
    """Default data parallelism (one root-info communicator): only step 1 is captured, yet the first captured
    all-reduce has seq 8 (step 0 issued 7 gradients' and the loss's). The members of a root-info communicator are not
    known locally: no "ranks". Both ranks agree on name and seq."""
    root = train(tmp_path / "d", 2, task="statistics", MSPROBE_STEP="1")
    seqs = {}
    for f in folders(root):
        assert f.parent.name == "step1"
        data = load_dump(f)["data"]
        hccl = sorted((e["launch"]["index"], e["comm"]) for n, e in data.items() if n.startswith("HcclAllReduce."))
        assert [c["seq"] for _, c in hccl] == list(range(8, 16))
        assert all(set(c) == {"name", "rank", "size", "seq"} and c["size"] == 2 for _, c in hccl)
        assert {c["rank"] for _, c in hccl} == {int(f.name[4:])}
        seqs[f.name] = [(c["name"], c["seq"]) for _, c in hccl]
    assert seqs["rank0"] == seqs["rank1"]


def test_first_nan_names_the_planted_kernel_not_the_allreduce(runs):
    root = runs("groups-nan")
    doc, r = first_nan(root)
    assert doc["rank"] == 5 and doc["step"] == 1, r.stdout
    assert doc["kernel"].startswith("Gelu.") and doc["kind"] == "compute"
    assert doc["values"] == ["NaN"]
    gelu = entry(root, 1, 5, doc["kernel"])
    assert gelu["launch"]["index"] == doc["launch_index"]
    assert all(t["Max"] == t["Max"] for t in gelu["input_args"] if isinstance(t, dict))  # finite inputs
    assert gelu["output"][0]["Max"] != gelu["output"][0]["Max"]  # NaN output
    # The stand-in's Gelu wrote the NaN: the CPU reference is finite there.
    assert doc["verdict"] == "kernel", doc["verdict_reason"]
    assert any("train.py" in frame and "forward" in frame for frame in doc["stack"]), doc["stack"]
    # The route: rank 5's group all-reduce carried it to 4, 6, 7; the cross-group ones to the other group.
    spread = doc["spread"]
    assert spread and spread[0]["from"] == [5] and spread[0]["to"] == [4, 6, 7], spread
    assert spread[0]["kernel"].startswith("HcclAllReduce.")
    assert spread[0]["comm"] == "hccl_world_group_sub_1"
    assert sorted(doc["reached"]) == list(range(8))
    assert len(doc["origins"]) == 1
    roles = {p["rank"]: p["role"] for p in doc["per_rank"]}
    assert roles == {r: ("origin" if r == 5 else "reached") for r in range(8)}
    # Rank 0's first non-finite kernel is a collective's output, and is not the answer.
    rank0 = next(p for p in doc["per_rank"] if p["rank"] == 0)
    assert rank0["kernel"].startswith("HcclAllReduce.") and rank0["op_kind"] == "collective"
    assert not rank0["inputs_anomalous"] and rank0["outputs_anomalous"]
    text = inspect("first-nan", root, expect=1).stdout
    assert f"origin: rank 5, step 1: {doc['kernel']}" in text
    assert "verdict   kernel:" in text and "spread (how the values travelled):" in text


def test_statistics_only_dump_gives_the_same_origin_without_verdict(runs, tmp_path):
    """The same run without its tensor files (a statistics dump): same answer, no verdict."""
    root = tmp_path / "stats"
    shutil.copytree(runs("groups-nan"), root, ignore=shutil.ignore_patterns("dump_tensor_data"))
    for f in folders(root):
        d = load_dump(f)
        d["task"] = "statistics"
        d["dump_data_dir"] = None
        for e in d["data"].values():
            for side in ("input_args", "output"):
                for t in e.get(side) or []:
                    if isinstance(t, dict):
                        t.pop("data_name", None)
        (f / "dump.json").write_text(json.dumps(d))
    doc, _ = first_nan(root)
    tensor_doc, _ = first_nan(runs("groups-nan"))
    assert (doc["rank"], doc["step"], doc["kernel"]) == (tensor_doc["rank"], tensor_doc["step"], tensor_doc["kernel"])
    assert doc["verdict"] is None and "no tensor data" in doc["verdict_reason"]
    assert doc["spread"] == tensor_doc["spread"]


def test_chain_of_send_recv(runs):
    """4 ranks, rank r receives the partial sum from r-1 and sends to r+1; the last broadcasts. The overflow on
    rank 1 goes 1 -> 2 -> 3 by HcclSend/HcclRecv and back to 0 by the broadcast."""
    root = runs("chain-data")
    for f in folders(root):
        for name, e in load_dump(f)["data"].items():
            if name.startswith(("HcclSend.", "HcclRecv.")):
                c = e["comm"]
                assert set(c) == {"name", "rank", "size", "ranks", "peer", "pair_seq"}, c
                assert c["peer"] == c["rank"] + (1 if name.startswith("HcclSend.") else -1)
            if name.startswith("HcclBroadcast."):
                assert e["comm"]["root"] == 3
    doc, r = first_nan(root)
    assert doc["rank"] == 1 and doc["step"] == 1 and doc["kernel"].startswith("Muls."), r.stdout
    assert doc["verdict"] == "data", doc["verdict_reason"]  # 3e38 * x leaves float32: the reference overflows too
    assert set(doc["values"]) >= {"+Inf"}
    hops = [(h["op_kind"], h["from"], h["to"]) for h in doc["spread"]]
    assert hops[:2] == [("recv", [1], [2]), ("recv", [2], [3])], doc["spread"]
    assert ("collective", [3], [0]) in hops  # the broadcast from the last rank
    assert doc["spread"][0]["kernel"].startswith("HcclRecv.") and doc["spread"][0]["src"] == 1


def test_first_diff_finds_the_planted_rank(runs):
    a, b = runs("groups-nan"), runs("groups-clean")
    r = inspect("first-diff", a, b, "--json", expect=1)
    doc = json.loads(r.stdout)
    assert doc["rank"] == 5 and doc["step"] == 1 and doc["kernel"].startswith("Gelu."), r.stdout
    assert doc["kind"] == "compute" and doc["verdict"] == "kernel"
    assert doc["only_a"] == 0 and doc["only_b"] == 0 and doc["paired"] > 500
    assert doc["spread"][0]["from"] == [5] and doc["spread"][0]["to"] == [4, 6, 7]
    same = inspect("first-diff", b, b, "--json", expect=0)
    assert json.loads(same.stdout)["rank"] is None
    assert "no kernel departs from run B" in inspect("first-diff", b, b, expect=0).stdout


def test_damaged_and_missing_rank_folders(runs, tmp_path):
    root = tmp_path / "damaged"
    shutil.copytree(runs("groups-nan"), root, ignore=shutil.ignore_patterns("dump_tensor_data"))
    shutil.rmtree(root / "step1" / "rank6")
    cut = root / "step1" / "rank3" / "dump.json"
    text = cut.read_text()
    cut.write_text(text[: len(text) // 2])
    doc, r = first_nan(root, "--no-replay")
    assert doc["rank"] == 5 and doc["kernel"].startswith("Gelu.")
    # Rank 2 received rank 5's values from rank 6, whose step 1 is gone: reached (presumed), not a second origin
    # named first or second by the clock (once, in an ASan run, it came first).
    assert [o["rank"] for o in doc["origins"]] == [5] and not doc["uncertain"], doc["origins"]
    assert {p["rank"]: p["role"] for p in doc["per_rank"]}[2] == "reached"
    assert any(p.startswith("step1/rank3: dump.json was not closed (the run that wrote it was killed or crashed)") for p in doc["problems"]), doc["problems"]
    assert "step1/rank6: no folder" in doc["missing"], doc["missing"]
    text = inspect("first-nan", root, "--no-replay", expect=1).stdout
    assert "missing: step1/rank6: no folder" in text and "problem: step1/rank3: dump.json was not closed" in text
    r = inspect("first-nan", tmp_path / "nowhere", expect=2)
    assert "nowhere" in r.stderr


@needs_mpi
@pytest.mark.parametrize("n", [1, 2, 4])
def test_same_answer_under_mpirun(runs, n):
    for args in (("first-nan", runs("groups-nan"), "--json"), ("first-nan", runs("chain-data"), "--json"),
                 ("first-diff", runs("groups-nan"), runs("groups-clean"), "--json")):
        alone = inspect(*args, expect=1)
        r = under_mpirun(n, *args)
        assert r.returncode == 1, f"mpirun -n {n} {args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert json.loads(r.stdout) == json.loads(alone.stdout), (n, args)


# ---- Synthetic dumps: the causal cases --------------------------------------------------------------------------

def generate(dest, *args):
    subprocess.run([PYTHON, str(GEN), str(dest), "--jobs", "1", *map(str, args)], check=True, timeout=120)
    return dest


def test_earlier_origin_on_a_higher_rank_in_another_group(tmp_path):
    """msprobe's nan_analyze drops this one (reference multirank.md 1.1): groups {0,1} and {2,3}, no collective
    across them; rank 2's origin comes first, rank 0's later. Both are origins, rank 2's first."""
    root = generate(tmp_path / "g", "--ranks", 4, "--group", 2, "--kernels", 120, "--groups-only",
                    "--origin", "2:0:20", "--origin", "0:0:70")
    doc, _ = first_nan(root)
    assert [(o["rank"], o["launch_index"]) for o in doc["origins"]] == [(2, 20), (0, 70)]
    assert doc["origins"][0]["reached"] == [2, 3] and doc["origins"][1]["reached"] == [0, 1]


def test_receiver_is_not_an_origin_and_world_order(tmp_path):
    """With collectives over all ranks: rank 6's origin reaches everyone; a later independent-looking NaN on rank 1
    (after it received rank 6's values) is downstream, not an origin."""
    root = generate(tmp_path / "w", "--ranks", 8, "--group", 4, "--kernels", 200, "--steps", 2,
                    "--origin", "6:1:30", "--origin", "1:1:150")
    doc, _ = first_nan(root)
    assert doc["rank"] == 6 and doc["step"] == 1 and doc["launch_index"] == 230
    assert len(doc["origins"]) == 1 and doc["reached"] == list(range(8))
    first, world = doc["spread"][0], doc["spread"][1]
    assert (first["comm"], first["from"], first["to"], first["depth"]) == ("dp1", [6], [4, 5, 7], 1)
    assert first["launch_index"] == 235  # the next group collective after kernel 230
    # The next world collective: everyone in group 1 fed it (rank 6 itself among them: depth 1).
    assert (world["comm"], world["from"], world["to"], world["depth"]) == ("world", [4, 5, 6, 7], [0, 1, 2, 3], 1)


def cut_line(path, n):
    """Cuts a synthetic dump.json in the middle of its n-th line (one kernel entry a line): a killed run's file."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:n - 1]) + lines[n - 1][: len(lines[n - 1]) // 2])


def across_groups(dest, origin, *extra):
    """8 ranks in two groups of 4 (dp0, dp1), then pairs across them (x0..x3), as train.py --groups 2; two steps of
    48 kernels, every 12th a collective: dp at 11 and 35, x at 23 and 47 of each step."""
    return generate(dest, "--ranks", 8, "--group", 4, "--across", "--kernels", 48, "--every", 12, "--world-every", 2,
                    "--steps", 2, "--origin", origin, *extra)


@pytest.mark.parametrize("damage", ["missing", "cut"])
def test_reached_through_a_rank_without_data_is_not_an_origin(tmp_path, damage):
    """Rank 5's NaN reaches rank 6 (dp1) and, through it, rank 2 (x2); rank 6's step 1 is missing or cut before its
    collectives, so no record shows rank 6 sending it. Rank 2 is reached through rank 6 (presumed), not an origin,
    though its clock is earlier than rank 5's (as a rank that launched ahead is): the answer must not depend on the
    time stamps. (Before: rank 2 was an origin of kind "communication", named first by the clock.)"""
    root = across_groups(tmp_path / damage, "5:1:2", "--clock", "2:-100000")
    if damage == "missing":
        shutil.rmtree(root / "step1" / "rank6")
        cut_line(root / "step1" / "rank3" / "dump.json", 8)  # also a damaged member elsewhere, as the real-dump test
    else:
        cut_line(root / "step1" / "rank6" / "dump.json", 6)  # before its first collective of step 1 (kernel 11)
    doc, _ = first_nan(root)
    assert (doc["rank"], doc["launch_index"], doc["kind"]) == (5, 50, "compute"), doc["origins"]
    assert [o["rank"] for o in doc["origins"]] == [5] and doc["uncertain"] is False
    assert {p["rank"]: p["role"] for p in doc["per_rank"]}[2] == "reached"
    hop = next(h for h in doc["spread"] if h["comm"] == "x2")
    assert (hop["from"], hop["to"], hop["presumed"], hop["depth"]) == ([6], [2], True, 2)
    assert not any("uncertain" in p for p in doc["problems"]), doc["problems"]
    damaged = "step1/rank3" if damage == "missing" else "step1/rank6"
    assert any(p.startswith(damaged + ": dump.json was not closed") for p in doc["problems"]), doc["problems"]


def test_origin_without_data_is_uncertain(tmp_path):
    """The origin itself (rank 6) has no step 1 folder: every rank that holds NaN received it through an instance rank
    6 was in. No origin is certain; first-nan says so instead of presenting the earliest clock as the answer."""
    root = across_groups(tmp_path / "u", "6:1:2")
    shutil.rmtree(root / "step1" / "rank6")
    doc, _ = first_nan(root)
    assert sorted(o["rank"] for o in doc["origins"]) == [2, 4, 5, 7]
    assert any(p.startswith("the first origin is uncertain") for p in doc["problems"]), doc["problems"]
    assert doc["uncertain"] is True and all(o["uncertain"] for o in doc["origins"])
    assert all(any("rank 6" in n for n in o["notes"]) for o in doc["origins"])
    assert "step1/rank6: no folder" in doc["missing"]
    assert "communication (uncertain)" in inspect("first-nan", root, expect=1).stdout


def test_reduction_overflow_is_a_communication_origin(tmp_path):
    root = generate(tmp_path / "o", "--ranks", 4, "--group", 4, "--kernels", 60, "--overflow", "0:23")
    doc, _ = first_nan(root)
    assert doc["kind"] == "communication" and doc["op_kind"] == "collective" and doc["launch_index"] == 23
    assert doc["values"] == ["+Inf"]
    # Every member saw the same clean inputs and a non-finite output: four origins at one instance.
    assert sorted(o["rank"] for o in doc["origins"]) == [0, 1, 2, 3]


def test_reduce_reaches_only_its_root(tmp_path):
    """An HcclReduce to comm rank 1 after rank 2's NaN: rank 1's output is the only one that holds it (the others
    write nothing), so rank 1 is reached through the reduce, from rank 2 alone, though its own input was clean (before:
    the reduce was taken as a broadcast from its root, and rank 1 became an origin of kind "communication"); ranks 0
    and 3 are reached by the next all-reduce."""
    root = generate(tmp_path / "r", "--ranks", 4, "--group", 4, "--kernels", 60, "--origin", "2:0:5",
                    "--rooted", "0:11:reduce:1")
    doc, _ = first_nan(root)
    assert [(o["rank"], o["launch_index"], o["kind"]) for o in doc["origins"]] == [(2, 5, "compute")]
    hops = [(h["kernel"].split(".")[0], h["from"], h["to"], h["launch_index"]) for h in doc["spread"]]
    assert hops == [("HcclReduce", [2], [1], 11), ("HcclAllReduce", [1, 2], [0, 3], 23)], hops
    reduce = entry(root, 0, 1, doc["spread"][0]["kernel"])
    assert reduce["comm"]["root"] == 1 and entry(root, 0, 0, doc["spread"][0]["kernel"])["output"] == [None]


def test_scatter_sends_only_the_roots_input(tmp_path):
    """An HcclScatter from comm rank 3: rank 3's NaN reaches ranks 1 and 2 through it; rank 0's own NaN, made before
    the scatter, is an origin of its own and does not make the others reached through it."""
    root = generate(tmp_path / "s", "--ranks", 4, "--group", 4, "--kernels", 60, "--origin", "3:0:5",
                    "--origin", "0:0:7", "--rooted", "0:11:scatter:3")
    doc, _ = first_nan(root)
    assert sorted((o["rank"], o["launch_index"]) for o in doc["origins"]) == [(0, 7), (3, 5)]
    (hop,) = doc["spread"]
    assert (hop["kernel"].split(".")[0], hop["from"], hop["to"]) == ("HcclScatter", [3], [1, 2]), hop


def test_llm_shaped_step_mc2_and_all_to_all(tmp_path):
    """--llm: the group collectives are MatmulAllReduce (MC2) and HcclAlltoAllV on "tp{g}". Rank 9's NaN reaches its
    group through the next MC2 kernel and the other groups through the gradient all-reduce over all ranks; an MC2
    kernel that overflows from clean inputs on every member is a communication origin whose note says it computes
    too."""
    root = generate(tmp_path / "l", "--ranks", 16, "--group", 4, "--kernels", 120, "--llm", "--origin", "9:0:30")
    doc, _ = first_nan(root)
    assert (doc["rank"], doc["launch_index"], doc["kind"]) == (9, 30, "compute")
    assert doc["kernel"].startswith("FlashAttentionScore.")
    hops = [(h["kernel"].split(".")[0], h["comm"], h["from"], h["to"]) for h in doc["spread"]]
    assert hops == [("MatmulAllReduce", "tp2", [9], [8, 10, 11]),
                    ("HcclAllReduce", "world", [8, 9, 10, 11], [r for r in range(16) if r // 4 != 2])], hops
    root = generate(tmp_path / "o", "--ranks", 4, "--group", 4, "--kernels", 60, "--llm", "--overflow", "0:23")
    doc, _ = first_nan(root)
    assert doc["kernel"].startswith("HcclAlltoAllV.") and doc["kind"] == "communication", doc["kernel"]
    root = generate(tmp_path / "m", "--ranks", 4, "--group", 4, "--kernels", 60, "--llm", "--overflow", "0:11")
    doc, _ = first_nan(root)
    assert doc["kernel"].startswith("MatmulAllReduce.") and doc["kind"] == "communication", doc["kernel"]
    assert sorted(o["rank"] for o in doc["origins"]) == [0, 1, 2, 3]
    assert any("fused kernel" in n for n in doc["notes"]), doc["notes"]


def test_neg_inf_masks(tmp_path):
    """-inf attention masks: by default the first mask is an origin (-Inf from finite inputs); --nan-only ignores
    infinities and finds the planted NaN."""
    root = generate(tmp_path / "m", "--ranks", 4, "--group", 2, "--kernels", 120, "--mask", 10,
                    "--origin", "3:0:55")
    doc, _ = first_nan(root)
    assert doc["values"] == ["-Inf"] and doc["launch_index"] == 0
    doc, _ = first_nan(root, "--nan-only")
    assert doc["rank"] == 3 and doc["launch_index"] == 55 and doc["values"] == ["NaN"]


def test_nan_from_before_the_dump(tmp_path):
    """Only step 1 is on disk and rank 2's values were already NaN when it began (an origin at step 0): the first
    kernel that reads them is named, as an input origin."""
    root = generate(tmp_path / "p", "--ranks", 4, "--group", 4, "--kernels", 60, "--steps", 2,
                    "--origin", "2:0:58")
    shutil.rmtree(root / "step0")
    doc, _ = first_nan(root)
    assert doc["kind"] == "input" and doc["step"] == 1
    assert any("before the dump" in n for n in doc["notes"])


def test_clean_dump_exit_zero(tmp_path):
    root = generate(tmp_path / "c", "--ranks", 4, "--kernels", 40)
    doc, _ = first_nan(root, expect=0)
    assert doc["rank"] is None and doc["origins"] == [] and doc["spread"] == []
    assert {p["role"] for p in doc["per_rank"]} == {"clean"}


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_synthetic_same_answer_under_mpirun(tmp_path, n):
    root = generate(tmp_path / "s", "--ranks", 16, "--group", 4, "--kernels", 120, "--groups-only",
                    "--origin", "9:0:30", "--origin", "2:0:80")
    alone = inspect("first-nan", root, "--json", expect=1)
    r = under_mpirun(n, "first-nan", root, "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout) == json.loads(alone.stdout)
    assert [o["rank"] for o in json.loads(r.stdout)["origins"]] == [9, 2]


def test_without_the_mpi_driver_process_zero_runs_alone(runs, tmp_path):
    """An msprobe-inspect started as if by mpirun, with no msprobe-inspect-mpi beside it: process 0 answers alone
    and says so; another process does nothing."""
    lone = tmp_path / "bin"
    lone.mkdir()
    shutil.copy2(INSPECT, lone / "msprobe-inspect")
    root = runs("chain-data")
    env = clean_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    r = subprocess.run([str(lone / "msprobe-inspect"), "first-nan", str(root), "--json"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 1 and json.loads(r.stdout)["rank"] == 1
    assert "this build has no MPI driver" in r.stderr
    env["OMPI_COMM_WORLD_RANK"] = "1"
    r = subprocess.run([str(lone / "msprobe-inspect"), "first-nan", str(root)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
