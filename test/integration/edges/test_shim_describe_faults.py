"""One capture skeleton, one exception policy (issue 28): a describe step that throws - in every family that launches
kernels (raw runtime kernels, aclop and aclnn in examples/acl_app; HCCL collectives and aclnn in train.py with two
ranks) - drops that kernel's record, never the host's call. The test seam SHIM_TEST_DESCRIBE_THROWS=inputs|outputs
makes every describe step of that side throw; the host's results and exit status must be those of a run without the
shim, the kernels must be missing from the dump, and one line must say so.
"""
import os

import pytest

import shimtest

ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
DROPPED = "a kernel could not be recorded (test seam: describe step throws)"


def recorded_op_types(run):
    return {shimtest.op_type(n) for _, n, _ in run.dump.kernels()} if run.dump.exists() else set()


def check_dropped(run):
    lines = [line for line in run.stderr.splitlines() if "could not be recorded" in line]
    assert len(lines) == 1 and DROPPED in lines[0], run.stderr  # said once, whatever the count


@pytest.mark.parametrize("side", ["inputs", "outputs"])
def test_acl_app_rt_aclop_and_aclnn_calls_go_through(tmp_path, side):
    plain = shimtest.run([ACL_APP], tmp_path / "plain", shim=False).check()
    clean = shimtest.run([ACL_APP], tmp_path / "clean", env={"MSPROBE_TASK": "tensor"}).check()
    # The families this host exercises, as recorded when nothing throws.
    families = recorded_op_types(clean)
    assert "fake_vector_add" in families and len(families) >= 3, families
    faulty = shimtest.run([ACL_APP], tmp_path / "faulty",
                          env={"MSPROBE_TASK": "tensor", "SHIM_TEST_DESCRIBE_THROWS": side}).check()
    assert faulty.stdout == plain.stdout and faulty.stdout.splitlines()[-1] == "acl_app: all results match"
    assert recorded_op_types(faulty) == set(), "a kernel whose describe step threw was recorded"
    check_dropped(faulty)


@pytest.mark.parametrize("side", ["inputs", "outputs"])
def test_train_two_ranks_hccl_and_aclnn_calls_go_through(tmp_path, side):
    plain = shimtest.run_train(tmp_path / "plain", "--steps", "2", "--ranks", "2", shim=False)
    faulty = shimtest.run_train(tmp_path / "faulty", "--steps", "2", "--ranks", "2", task="statistics",
                                env={"SHIM_TEST_DESCRIBE_THROWS": side})
    assert faulty.losses() == plain.losses()  # bit-identical: every all-reduce and aclnn kernel ran as without the shim
    assert recorded_op_types(faulty) == set()
    # Each rank's process says it once.
    lines = [line for line in faulty.stderr.splitlines() if "could not be recorded" in line]
    assert len(lines) == 2 and all(DROPPED in line for line in lines), faulty.stderr


def test_the_seam_is_off_by_default(tmp_path):
    r = shimtest.run_train(tmp_path, "--steps", "1", "--ranks", "2", task="statistics")
    assert any(op.startswith("Hccl") for op in recorded_op_types(r))
    assert "could not be recorded" not in r.stderr
