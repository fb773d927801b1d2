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
OPS = ["HcclAllReduce", "HcclBroadcast", "HcclAllGather", "HcclReduceScatter", "HcclSend", "HcclRecv"]


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
        # Named and counted per rank: each thread's two rounds of the six calls, .0 then .1, as a process's would be.
        assert sorted(names) == sorted(f"{op}.Default.{n}.forward" for op in OPS for n in (0, 1)), (rank, names)
        for name, entry in f.data.items():
            assert entry["comm"]["rank"] == rank and entry["comm"]["size"] == 4, (rank, name, entry["comm"])
        names_by_comm = {e["comm"]["name"] for e in f.data.values()}
        assert len(names_by_comm) == 1, names_by_comm
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
