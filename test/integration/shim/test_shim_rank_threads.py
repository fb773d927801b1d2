"""One rank folder per rank in a process that drives several devices (issue 40; spec §4): examples/hccl_threads, in
the shape of CANN's own HCCL samples (a thread per device, aclrtSetDevice on each, one root info), dumps four folders,
rank0 to rank3, each holding its own thread's collectives named and counted per rank, each with its communicator; the
tools read them as they read four processes' folders. And one process on one device writes one folder, its kernels
before HCCL's initialisation included (issue 39: examples/acl_app)."""
import json
import os

import numpy as np

import shimtest
from inspect_support import inspect

HOST = os.path.join(shimtest.BUILD, "bin", "hccl_threads")
ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
OPS = ["HcclAllReduce", "HcclBroadcast", "HcclAllGather", "HcclReduceScatter", "HcclSend", "HcclRecv", "HcclReduce",
       "HcclScatter", "HcclAlltoAll", "HcclAlltoAllV", "HcclAlltoAllVC", "HcclBarrier"]
COLLECTIVES = [op for op in OPS if op not in ("HcclSend", "HcclRecv")]


def run(tmp_path, *args, task="tensor"):
    return shimtest.run([HOST, *args], tmp_path, env={"MSPROBE_TASK": task}).check()


def test_four_threads_four_devices_four_rank_folders(tmp_path):
    plain = shimtest.run([HOST], tmp_path / "plain", shim=False).check()
    r = run(tmp_path / "dump")
    assert sorted(r.stdout.splitlines()) == sorted(plain.stdout.splitlines())  # the host's results unchanged
    folders = {f.rank: f for f in r.dump.folders()}
    assert sorted(folders) == [0, 1, 2, 3] and r.dump.steps() == [0], folders
    for rank, f in folders.items():
        names = list(f.data)
        # Named and counted per rank: each thread's two rounds of the twelve calls, .0 then .1, as a process's would be.
        assert sorted(names) == sorted(f"{op}.Default.{n}.forward" for op in OPS for n in (0, 1)), (rank, names)
        for name, entry in f.data.items():
            assert entry["comm"]["rank"] == rank and entry["comm"]["size"] == 4, (rank, name, entry["comm"])
        names_by_comm = {e["comm"]["name"] for e in f.data.values()}
        assert len(names_by_comm) == 1, names_by_comm
        # The collectives are numbered in the order the thread issued them, the same on every rank.
        seqs = sorted((e["comm"]["seq"], n) for n, e in f.data.items() if shimtest.op_type(n) in COLLECTIVES)
        assert [q for q, _ in seqs] == list(range(2 * len(COLLECTIVES))), seqs
        assert seqs == sorted((e["comm"]["seq"], n) for n, e in folders[0].data.items()
                              if shimtest.op_type(n) in COLLECTIVES)
        for op, root in (("HcclReduce", 1), ("HcclScatter", 0)):
            assert f.data[f"{op}.Default.0.forward"]["comm"]["root"] == root
    # The values: each rank's all-reduce output is the sum of the four ranks' inputs, as numpy adds them.
    for n in (0, 1):
        key = f"HcclAllReduce.Default.{n}.forward"
        inputs = [f.load(f.data[key]["input_args"][0]).astype(np.float64) for f in folders.values()]
        for f in folders.values():
            np.testing.assert_allclose(f.load(f.data[key]["output"][0]), np.sum(inputs, axis=0), rtol=1e-6)
        # The broadcast delivers rank 0's buffer everywhere.
        b = f"HcclBroadcast.Default.{n}.forward"
        for f in folders.values():
            np.testing.assert_array_equal(f.load(f.data[b]["output"][0]), folders[0].load(folders[0].data[b]["output"][0]))


def test_rooted_and_all_to_all_kernels_hold_what_numpy_says(tmp_path):
    """HcclReduce, HcclScatter and the three all-to-alls, read back from the four rank folders and recomputed with
    numpy from the dumped send buffers: a reduce's output only at its root, a scatter's input only at its root, and
    the all-to-all-v counts as the kernels' arguments."""
    folders = {f.rank: f for f in run(tmp_path).dump.folders()}
    n = len(folders)

    def arrays(op, side, step=0):
        key = f"{op}.Default.{step}.forward"
        return {r: [None if a is None else f.load(a) if "dtype" in a else a for a in f.data[key][side]]
                for r, f in folders.items()}

    sends = arrays("HcclReduce", "input_args")
    outs = arrays("HcclReduce", "output")
    assert [r for r in outs if outs[r][0] is not None] == [1], outs  # only the root writes
    np.testing.assert_array_equal(outs[1][0], np.sum([sends[r][0] for r in range(n)], axis=0, dtype=np.float32))
    ins, outs = arrays("HcclScatter", "input_args"), arrays("HcclScatter", "output")
    assert all(ins[r][0] is None for r in range(1, n)) and ins[0][0].shape == (64,)
    for r in range(n):
        np.testing.assert_array_equal(outs[r][0], np.split(ins[0][0], n)[r])
    ins, outs = arrays("HcclAlltoAll", "input_args"), arrays("HcclAlltoAll", "output")
    for r in range(n):
        np.testing.assert_array_equal(outs[r][0], np.concatenate([np.split(ins[q][0], n)[r] for q in range(n)]))
    for op in ("HcclAlltoAllV", "HcclAlltoAllVC"):
        ins, outs = arrays(op, "input_args"), arrays(op, "output")
        counts = {r: [leaf["value"] for leaf in ins[r][1]] for r in range(n)}
        assert counts[2] == [3, 4, 5, 6], counts  # rank i sends i + j + 1 elements to rank j
        for r in range(n):
            blocks = [np.split(ins[q][0], np.cumsum(counts[q])[:-1])[r] for q in range(n)]
            np.testing.assert_array_equal(outs[r][0], np.concatenate(blocks))
    assert all(not f.data["HcclBarrier.Default.0.forward"]["input_args"] for f in folders.values())


def test_a_nan_planted_on_one_thread_is_traced_to_its_rank(tmp_path):
    clean, bad = run(tmp_path / "clean"), run(tmp_path / "bad", "--nan-rank", "2")
    out = inspect("first-nan", bad.dump.root, "--json", expect=1).stdout
    origins = json.loads(out)["origins"]
    assert [(o["rank"], o["kernel"]) for o in origins] == [(2, "HcclAllReduce.Default.1.forward")], out
    # first-diff pairs the ranks' folders of the two runs as it pairs processes' folders.
    diff = inspect("first-diff", clean.dump.root, bad.dump.root, "--json").stdout
    first = json.loads(diff)["origins"][0]
    assert first["rank"] == 2 and first["kernel"] == "HcclAllReduce.Default.1.forward", diff


def test_one_process_on_one_device_writes_one_rank_folder(tmp_path):
    """acl_app launches kernels, then makes its communicator (rank 0), then all-reduces: every kernel in rank0."""
    r = shimtest.run([ACL_APP], tmp_path, env={"MSPROBE_TASK": "tensor"}).check()
    [folder] = r.dump.folders()
    assert folder.rank == 0 and os.path.basename(folder.path) == "rank0", folder.path
    assert {shimtest.op_type(n) for n in folder.data} >= {"Add", "HcclAllReduce"}
    with open(os.path.join(folder.path, "dump.json")) as f:
        header = json.load(f)
    assert header["dump_data_dir"] == os.path.join(os.path.realpath(folder.path), "dump_tensor_data") or \
        header["dump_data_dir"] == os.path.join(folder.path, "dump_tensor_data"), header["dump_data_dir"]
    assert shimtest.root_entries(r.dump.root) == ["step0"]
    problems, _ = shimtest.check_files(r.dump)
    assert not problems, problems
