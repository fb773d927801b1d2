"""The capture on both of the stand-in's CANN library layouts (issue 40, item 2; test/fake_cann/README.md "Two
layouts"): CANN 8.x's install (build/fake_cann: libascendcl holds the ACL) and 9.x's (build/fake_cann9: libacl_rt
-Bsymbolic, libascend_dump, libacl_mdl, libacl_op_executor, libhcomm beside libhccl, libascendcl the compatibility
library). Each workload that matters runs under the shim on both, with CANN's set_env.sh environment for each
(ASCEND_HOME_PATH, lib64 on LD_LIBRARY_PATH), each host finding its libraries as on that layout: the Python hosts
(torch_npu-, MindSpore-shaped) dlopen $ASCEND_HOME_PATH/lib64/libascendcl.so as torch_npu and MindSpore still do on
CANN 9; a C++ program built for 8.x runs on 9.x as it was linked (through the compatibility library), and the same
source built for 9.x links libacl_rt and the rest. The dumps must be the same, file for file (shimtest.comparable:
all but run ids, time stamps, random communicator names; code offsets too between two builds of one program); the
8.x dumps themselves are checked against numpy by the tests of each workload (test_shim_dump.py, test_shim_graph.py,
test_ms_kbk.py, ...), and here again for the program that links only libacl_rt, libnnopbase and libopapi."""
import os
import subprocess

import pytest

import shimtest
from shimtest import comparable, differences, fail_report, layout_env, program

TRAIN = shimtest.TRAIN
GRAPH_TRAIN = os.path.join(shimtest.SOURCE, "examples", "graph_train.py")
MS_KBK = os.path.join(shimtest.SOURCE, "examples", "ms_kbk_train.py")


def run_on(layout, cmd, workdir, task, env=None):
    """`cmd` under the shim on `layout`, with the loader's account of the objects it initialised (LD_DEBUG=files: one
    file per process, every rank's too), checked: CANN's libraries came from that layout's install only."""
    e = {**layout_env(layout), "MSPROBE_TASK": task, "LD_DEBUG": "files",
         "LD_DEBUG_OUTPUT": os.path.join(str(workdir), "ld"), **(env or {})}
    r = shimtest.run(cmd, workdir, env=e).check()
    files = loaded_files(workdir)
    mine, other = (os.path.join(shimtest.LAYOUTS[x], "lib64") + "/" for x in
                   (layout, "9.x" if layout == "8.x" else "8.x"))
    core = "libacl_rt.so" if layout == "9.x" else "libascendcl.so"
    assert mine + core in files and not any(f.startswith(other) for f in files), sorted(
        f for f in files if "fake_cann" in f)
    return r


def loaded_files(workdir):
    """The objects the runs' processes initialised (LD_DEBUG=files lines "calling init: <path>"), by path."""
    out = set()
    for name in os.listdir(workdir):
        if name.startswith("ld."):
            with open(os.path.join(workdir, name), errors="replace") as f:
                out.update(line.split("calling init: ", 1)[1].strip() for line in f if "calling init: " in line)
    return out


def assert_same_dumps(runs, offsets=True):
    """Every run's dump equals the first's."""
    first = comparable(runs[0].dump, offsets)
    assert first, f"{runs[0].dump.root}: nothing captured"
    for r in runs[1:]:
        other = comparable(r.dump, offsets)
        assert other == first, f"{r.dump.root} differs from {runs[0].dump.root}:\n" + "\n".join(
            differences(first, other))


def needed(binary):
    """DT_NEEDED entries of an ELF file."""
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


# Every task; overflow_check and flight need a NaN/Inf to write anything: train.py plants an overflow at step 1.
@pytest.mark.parametrize("task,args", [("statistics", ["--steps", "3"]), ("tensor", ["--steps", "2"]),
                                       ("structure", ["--steps", "2"]),
                                       ("overflow_check", ["--steps", "2", "--overflow-at", "1"]),
                                       ("flight", ["--steps", "2", "--overflow-at", "1"])])
def test_train_py_is_captured_alike_on_both_layouts(tmp_path, task, args):
    runs = [run_on(layout, [shimtest.PYTHON, TRAIN, *args], tmp_path / layout, task) for layout in shimtest.LAYOUTS]
    assert runs[0].stdout == runs[1].stdout  # the host's own results, too
    assert_same_dumps(runs)


def test_two_rank_train_py_is_captured_alike_on_both_layouts(tmp_path):
    # HCCL's communicators live in libhcomm on 9.x, the collectives in libhccl over it.
    runs = [run_on(layout, [shimtest.PYTHON, TRAIN, "--steps", "2", "--ranks", "2"], tmp_path / layout, "statistics")
            for layout in shimtest.LAYOUTS]
    assert runs[0].stdout == runs[1].stdout
    assert runs[0].dump.ranks() == [0, 1]
    assert any(shimtest.op_type(n) == "HcclAllReduce" for _, n, _ in runs[0].dump.kernels())
    assert_same_dumps(runs)


def test_graph_train_is_captured_alike_on_both_layouts(tmp_path):
    # The model API is libacl_mdl's on 9.x, the dump switches libacl_rt's, the dump itself libascend_dump's.
    runs = [run_on(layout, [shimtest.PYTHON, GRAPH_TRAIN, "--steps", "3"], tmp_path / layout, "statistics")
            for layout in shimtest.LAYOUTS]
    assert runs[0].stdout == runs[1].stdout
    assert sum(1 for _ in runs[0].dump.kernels()) > 0
    assert_same_dumps(runs)


def test_ms_kbk_train_is_captured_alike_on_both_layouts(tmp_path):
    runs = [run_on(layout, [shimtest.PYTHON, MS_KBK, "--steps", "3"], tmp_path / layout, "tensor")
            for layout in shimtest.LAYOUTS]
    assert runs[0].stdout == runs[1].stdout
    assert_same_dumps(runs)


def test_acl_app_built_for_either_layout_is_captured_alike(tmp_path):
    """acl_app built for 8.x, on 8.x; the same binary on 9.x (through the compatibility libascendcl); the same source
    built for 9.x (libacl_rt, libacl_mdl, libacl_op_executor, ..., libhccl over libhcomm), on 9.x."""
    old, new = program("acl_app", "8.x"), program("acl_app", "9.x")
    if not (os.path.exists(old) and os.path.exists(new)):
        pytest.skip("acl_app not built for both layouts (the examples target)")
    # libhcomm comes with libhccl: hccl_comm.h declares the communicator functions weak, as CANN's does.
    assert "libascendcl.so" not in needed(new) and {"libacl_rt.so", "libhccl.so"} <= set(needed(new))
    runs = [run_on("8.x", [old], tmp_path / "old8", "tensor"), run_on("9.x", [old], tmp_path / "old9", "tensor"),
            run_on("9.x", [new], tmp_path / "new9", "tensor")]
    for r in runs:
        assert r.stdout.splitlines()[-1] == "acl_app: all results match", r.stdout
        # The raw kernel's buffers are known device allocations (tensors, not integers) on every layout: z from
        # aclrtMallocAlign32, whose aclrtMalloc inside libacl_rt (-Bsymbolic) never passes through a PLT entry.
        [folder] = r.dump.folders()  # rank0: the communicator's rank adopted (test_shim_rank_threads.py)
        add = folder.data["fake_vector_add.Default.0.forward"]
        assert [a["type"].endswith("Tensor") for a in add["input_args"]] == [True, True, True, False], add
    assert_same_dumps(runs[:2])
    assert_same_dumps([runs[0], runs[2]], offsets=False)


def test_graph_app_built_for_either_layout_is_captured_alike(tmp_path):
    """A C++ inference program over the model API (libacl_mdl on 9.x, with libacl_rt): graph kernels through CANN's
    data dump, its switches libacl_rt's and its callback libascend_dump's on 9.x."""
    old, new = program("graph_app", "8.x"), program("graph_app", "9.x")
    if not (os.path.exists(old) and os.path.exists(new)):
        pytest.skip("graph_app not built for both layouts (the examples target)")
    assert set(needed(new)) >= {"libacl_rt.so", "libacl_mdl.so"} and "libascendcl.so" not in needed(new)
    runs = [run_on("8.x", [old], tmp_path / "8", "tensor"), run_on("9.x", [new], tmp_path / "9", "tensor")]
    assert runs[0].stdout == runs[1].stdout
    assert sum(1 for _ in runs[0].dump.kernels()) > 0
    assert_same_dumps(runs, offsets=False)


def test_a_program_linking_only_libacl_rt_nnopbase_and_opapi_is_captured_like_on_8x(tmp_path):
    """The issue's "done when": aclnn_app built against the 9.x headers and linked with libacl_rt, libnnopbase and
    libopapi alone runs under the shim and is captured as the same source built for 8.x (libascendcl) is: the same
    kernels, names, stacks, statistics and tensor files, each kernel's outputs equal to numpy's from its inputs."""
    old, new = program("aclnn_app", "8.x"), program("aclnn_app", "9.x")
    if not (os.path.exists(old) and os.path.exists(new)):
        pytest.skip("aclnn_app not built for both layouts (the examples target)")
    cann = {"libacl_rt.so", "libnnopbase.so", "libopapi.so", "libascendcl.so", "libruntime.so", "libascend_dump.so"}
    assert set(needed(new)) & cann == {"libacl_rt.so", "libnnopbase.so", "libopapi.so"}, needed(new)
    assert set(needed(old)) & cann == {"libascendcl.so", "libnnopbase.so", "libopapi.so"}, needed(old)
    runs = [run_on("8.x", [old], tmp_path / "8", "tensor"), run_on("9.x", [new], tmp_path / "9", "tensor")]
    for r in runs:
        assert r.stdout.splitlines()[-1] == "aclnn_app: all results match", r.stdout
    problems, checked = shimtest.check_recomputation(runs[1].dump)
    assert not problems, fail_report(problems)
    assert checked == {"Matmul": 2, "Add": 2, "Relu": 2, "InplaceAdd": 2}, checked
    assert_same_dumps(runs, offsets=False)


def test_addresses_as_the_kernel_sees_them_on_both_layouts(tmp_path):
    """Issue 40 item 4's four address cases (cann9_host addresses: a repeatable Add after aclSetRawTensorAddr,
    FlashAttentionScore rebound between the phases, Cat after aclSetDynamicInputTensorAddr, aclSetInputTensorAddr with
    an ignored index), whose values test_shim_cann9.py checks against numpy on 8.x: the same program on 9.x (through
    the compatibility libascendcl) dumps the same files."""
    host = os.path.join(shimtest.BUILD, "tests", "cann9_host")
    if not os.path.exists(host):
        pytest.skip("cann9_host not built")
    runs = [run_on(layout, [host, "addresses"], tmp_path / layout, "tensor") for layout in ("8.x", "9.x")]
    for r in runs:
        assert r.stdout.splitlines()[-1] == "cann9_host: all results match", r.stdout
    [folder] = runs[1].dump.folders()
    assert sorted(shimtest.op_type(n) for n in folder.data) == ["Add", "Add", "Add", "Add", "Cat", "Cat",
                                                                "FlashAttentionScore"]
    assert_same_dumps(runs)
