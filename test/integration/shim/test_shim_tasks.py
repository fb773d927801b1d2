"""The overflow_check task on a planted overflow, and the aclop path of acl_app (issue 4).

train.py --overflow-at S multiplies the first layer's activation by inf at step S with one Muls kernel:
under MSPROBE_TASK=overflow_check that kernel, and only it, must be reported and saved.
"""
import os

import numpy as np
import pytest

import shimtest
from shimtest import Dump, run, run_train

ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")


def test_planted_overflow_is_the_first_and_only_kernel_reported(tmp_path):
    r = run_train(tmp_path / "o", "--steps", "3", "--overflow-at", "1", task="overflow_check")
    folders = r.dump.folders()
    assert [f.step for f in folders] == [1], "only the step with the overflow has a folder"
    names = folders[0].names()
    assert len(names) == 1, names
    muls, = names  # Muls.{scope of TinyModel.blow_up}.0
    assert shimtest.op_type(muls) == "Muls" and shimtest.ordinal(muls) == 0, names
    entry = folders[0].data[muls]
    assert "inf" in entry["overflow"].lower()
    # Both sides saved as the tensor task does: the input is finite, the output holds the infs.
    x = folders[0].load(entry["input_args"][0])
    y = folders[0].load(entry["output"][0])
    assert np.isfinite(x).all()
    scale = entry["input_args"][1]["value"]
    assert scale == float("inf")
    with np.errstate(invalid="ignore"):
        assert np.array_equal(np.isinf(y), np.isinf(x * np.float32(scale)))
    # One line on stderr names it; the host's output and status are its own.
    reports = [line for line in r.stderr.splitlines() if "overflow" in line]
    assert len(reports) == 1 and muls in reports[0] and "step 1" in reports[0], r.stderr
    plain = run_train(tmp_path / "p", "--steps", "3", "--overflow-at", "1", shim=False)
    assert r.stdout == plain.stdout and r.returncode == plain.returncode


def test_overflow_nums_limits_the_reports(tmp_path):
    # From step 1 on every later kernel of the step sees inf/nan: with a limit of 3 exactly 3 are written.
    r = run_train(tmp_path / "o", "--steps", "2", "--overflow-at", "1", task="overflow_check",
                  env={"MSPROBE_OVERFLOW_NUMS": "3"})
    entries = sorted((e["launch"]["index"], n) for f in r.dump.folders() for n, e in f.entries())
    assert len(entries) == 3 and shimtest.op_type(entries[0][1]) == "Muls" and shimtest.ordinal(entries[0][1]) == 0, \
        entries


def test_clean_run_writes_nothing(tmp_path):
    r = run_train(tmp_path / "o", "--steps", "2", task="overflow_check")
    assert not r.dump.exists() or r.dump.folders() == []
    assert "overflow" not in r.stderr


def test_structure_task_writes_no_tensor_bytes(tmp_path):
    r = run_train(tmp_path / "s", "--steps", "2", task="structure")
    full = run_train(tmp_path / "f", "--steps", "2")
    assert r.dump.names_by_folder() == full.dump.names_by_folder()
    for folder in r.dump.folders():
        assert folder.files() == []
        for _, entry in folder.entries():
            for t in shimtest.tensors(entry):
                assert t.info["Max"] is None and "data_name" not in t.info


@pytest.mark.skipif(not os.path.exists(ACL_APP), reason="acl_app not built")
def test_acl_app_aclop_add_is_captured_with_its_data(tmp_path):
    r = run([ACL_APP], tmp_path / "a", env={"MSPROBE_TASK": "tensor"}).check()
    folder = r.dump.folders()[0]
    add, = [n for n in folder.names() if shimtest.op_type(n) == "Add"]
    entry = folder.data[add]
    x, y = (folder.load(t) for t in entry["input_args"][:2])
    out = folder.load(entry["output"][0])
    np.testing.assert_array_equal(out, x + y)
    # Kernels of every launch path are numbered in launch order across API families.
    order = sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])
    assert [name.split(".")[0] for name, _ in order][:3] == ["Add", "fake_vector_add", "Mul"]


def test_scope_dumps_from_first_match_to_next_last_match_in_each_step(tmp_path):
    # Per step: from the first Gelu through the next GeluBackward, inclusive.
    full = run_train(tmp_path / "f", "--steps", "2")
    r = run_train(tmp_path / "s", "--steps", "2", env={"MSPROBE_SCOPE": "Gelu,GeluBackward"})
    for folder in full.dump.folders():
        order = [n for n, _ in sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])]
        first = next(i for i, n in enumerate(order) if n.startswith("Gelu."))
        last = next(i for i, n in enumerate(order) if n.startswith("GeluBackward.") and i > first)
        got = r.dump.folder(folder.step, folder.rank).names()
        assert got == set(order[first:last + 1]), (folder, sorted(got))


def test_rank_filter_keeps_only_the_selected_rank(tmp_path):
    r = run_train(tmp_path / "r", "--steps", "2", "--ranks", "2", env={"MSPROBE_RANK": "1"})
    assert {f.rank for f in r.dump.folders()} == {1}
    assert r.dump.steps() == [0, 1]
