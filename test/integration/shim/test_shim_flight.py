"""The flight task (issue 20): the last K kernels' tensors kept in a ring on the device, written only when a kernel's
output goes non-finite (train.py --overflow-at S plants an inf through one Muls kernel), or at exit/signal when
MSPROBE_FLIGHT_ON_EXIT=1 asks for it. The record must be exactly the K kernels before the trigger and the trigger
(compared with a tensor-task run of the same program), each tensor equal to numpy's recomputation, and nothing else
written; the host's losses and exit status are its own.
"""
import json
import os
import signal
import subprocess
import time

import pytest

import shimtest
from shimtest import fail_report, run_train

K = 10


def entries_in_launch_order(dump):
    return sorted(((e["launch"]["index"], name, f.step, e) for f in dump.folders() for name, e in f.entries()),
                  key=lambda row: row[0])


def all_files(root):
    """Every file under the root but the runs' markers."""
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names
                  if not shimtest.is_run_marker(n))


def check_record_contents(dump):
    """Files referenced and parseable, every output recomputed by numpy from the dumped inputs, statistics equal
    numpy's on the files."""
    problems, _ = shimtest.check_files(dump)
    assert not problems, fail_report(problems)
    problems, checked = shimtest.check_recomputation(dump)
    assert not problems, fail_report(problems)
    problems, n = shimtest.check_statistics(dump)
    assert not problems, fail_report(problems)
    return sum(checked.values()), n


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A tensor-task run of the same program: the launch order (launch index -> kernel name)."""
    r = run_train(tmp_path_factory.mktemp("ref") / "t", "--steps", "6", "--overflow-at", "4", task="tensor")
    return {i: name for i, name, _, _ in entries_in_launch_order(r.dump)}, r


def test_record_is_the_k_kernels_before_the_overflow_and_it(tmp_path, reference):
    order, tensor_run = reference
    r = run_train(tmp_path / "f", "--steps", "6", "--overflow-at", "4", task="flight",
                  env={"MSPROBE_FLIGHT_KERNELS": str(K)})
    rows = entries_in_launch_order(r.dump)
    assert len(rows) == K + 1, [n for _, n, _, _ in rows]
    trigger_index, trigger, trigger_step, trigger_entry = rows[-1]
    assert shimtest.op_type(trigger) == "Muls" and trigger_step == 4, trigger
    # Exactly the K launches before it, by the tensor task's numbering of the same program.
    assert [i for i, _, _, _ in rows] == list(range(trigger_index - K, trigger_index + 1))
    assert [n for _, n, _, _ in rows] == [order[i] for i in range(trigger_index - K, trigger_index + 1)]
    assert {s for _, _, s, _ in rows} == {3, 4}, "the record spans the end of step 3 and step 4"
    for _, name, _, e in rows:
        assert e["flight_trigger"] == "overflow" and e["flight_trigger_kernel"] == trigger, (name, e)
        assert "flight_note" not in e
    assert "+Inf" in trigger_entry["overflow"] and "overflow" not in rows[0][3]
    # The counts come from the bytes: they equal numpy's on the written output.
    folder = r.dump.folder(4, None)
    import numpy as np
    y = folder.load(trigger_entry["output"][0])
    assert trigger_entry["overflow"] == "output.0: %d NaN, %d +Inf, %d -Inf" % (
        np.isnan(y).sum(), np.isposinf(y).sum(), np.isneginf(y).sum())
    kernels, tensors = check_record_contents(r.dump)
    assert kernels == K + 1 and tensors > 2 * K
    # The tensors are the tensor task's, bit for bit.
    ref = {name: e for _, name, _, e in entries_in_launch_order(tensor_run.dump)}
    ref_folders = {f.step: f for f in tensor_run.dump.folders()}
    for _, name, step, e in rows:
        for got, want in zip(shimtest.tensors(e), shimtest.tensors(ref[name])):
            a, b = r.dump.folder(step, None).load(got.info), ref_folders[step].load(want.info)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (name, got.side, got.slot)
    # Nothing else: two step folders holding their journals and tensor files, no lock file left.
    assert {p.split("/")[0] for p in all_files(r.dump.root)} == {"step3", "step4"}, all_files(r.dump.root)
    assert dump_task(r.dump) == {"tensor"}
    reports = [line for line in r.stderr.splitlines() if "flight record" in line]
    assert len(reports) == 1 and trigger in reports[0] and "written with the %d kernels before it" % K in reports[0]
    plain = run_train(tmp_path / "p", "--steps", "6", "--overflow-at", "4", shim=False)
    assert r.stdout == plain.stdout and r.returncode == plain.returncode


def dump_task(dump):
    tasks = set()
    for f in dump.folders():
        with open(os.path.join(f.path, "dump.json")) as fh:
            tasks.add(json.load(fh)["task"])
    return tasks


def test_clean_run_writes_nothing_and_keeps_tensors_on_the_device(tmp_path):
    copies = tmp_path / "copies.json"
    r = run_train(tmp_path / "f", "--steps", "3", task="flight", env={"FAKE_CANN_COPY_COUNTERS": str(copies)})
    assert not os.path.exists(r.dump.root) or all_files(r.dump.root) == [], all_files(r.dump.root)
    assert "flight record" not in r.stderr and "overflow" not in r.stderr
    # Issue 38: a quiet run says what it watched, at the default level (a user must tell it from a broken one).
    said = [line for line in r.stderr.splitlines() if line.startswith("msprobe-shim: flight: watched ")]
    assert len(said) == 1 and "over 3 steps" in said[0] and said[0].endswith("no NaN/Inf: nothing written"), r.stderr
    assert int(said[0].split("watched ")[1].split()[0]) > 0 and "MiB" in said[0], said
    with open(copies) as f:
        shim_copies = json.load(f)["preloaded"]
    # The ring is filled device-to-device; only the outputs' extremes (a few bytes a kernel) come to the host.
    tensor_run = run_train(tmp_path / "t", "--steps", "3", task="tensor",
                           env={"FAKE_CANN_COPY_COUNTERS": str(tmp_path / "t.json")})
    with open(tmp_path / "t.json") as f:
        tensor_d2h = json.load(f)["preloaded"]["d2h"]
    kernels = sum(len(f.names()) for f in tensor_run.dump.folders())
    assert shim_copies["d2d"] >= tensor_d2h, (shim_copies, tensor_d2h)
    assert shim_copies["d2h"] <= 64 * kernels, (shim_copies, kernels)
    plain = run_train(tmp_path / "p", "--steps", "3", shim=False)
    assert r.stdout == plain.stdout


def test_a_kept_output_costs_one_reduction(tmp_path):
    """Issue 29: the ring keeps every tensor's bytes, so the check needs each floating output's extremes only: one
    aclnnAminmaxAll (no Mean, no Norm) per output, counted by the stand-in; nothing for the inputs."""
    phase2 = {}
    for shim in (False, True):
        path = tmp_path / f"calls_{shim}.json"
        run_train(tmp_path / f"run_{shim}", "--steps", "3", shim=shim, task="flight" if shim else None,
                  env={"FAKE_CANN_CALL_COUNTERS": str(path)})
        with open(path) as f:
            phase2[shim] = json.load(f)["phase2"]
    # The outputs the device reduces (device_stats.h): fp32/fp16/bf16, at least one dimension, more bytes than the
    # four results would be; counted on a tensor-task run of the same program.
    itemsize = {"Float32": 4, "Float16": 2, "BFloat16": 2}
    reduced = 0
    for f in run_train(tmp_path / "t", "--steps", "3", task="tensor").dump.folders():
        for _, e in f.entries():
            for t in shimtest.tensors(e):
                shape, dtype = t.info["shape"], t.info["dtype"]
                numel = 1
                for d in shape:
                    numel *= d
                reduced += t.side == "output" and dtype in itemsize and len(shape) > 0 and numel * itemsize[dtype] > 16
    assert reduced > 20
    assert phase2[True] - phase2[False] == reduced, (phase2, reduced)


# A job that hangs after its last kernels (waiting on a peer, a lock, a queue) with its device still open, and is then
# stopped with SIGTERM. argv[1] "hang" waits; anything else ends normally (the reference run).
HUNG_HOST = """
import sys, time
import numpy as np
import tiny_npu
from tiny_npu import ops
from tiny_npu.tensor import Tensor
tiny_npu.init(device=0)
rng = np.random.RandomState(5)
x = Tensor.from_numpy(rng.uniform(-1, 1, (16, 32)).astype(np.float32), tiny_npu.float32)
w = Tensor.from_numpy(rng.uniform(-0.5, 0.5, (32, 32)).astype(np.float32), tiny_npu.float32)
for step in range(6):
    x = ops.gelu(ops.matmul(x, w))
    print("step %d sum %.6f" % (step, float(np.asarray(x.numpy(), dtype=np.float64).sum())), flush=True)
if sys.argv[1] == "hang":
    print("hung", flush=True)
    time.sleep(600)
"""


def test_on_exit_writes_the_last_k_kernels_at_sigterm(tmp_path):
    work = tmp_path / "term"
    os.makedirs(work)
    env = shimtest.clean_env({"LD_PRELOAD": shimtest.SHIM, "MSPROBE_TASK": "flight", "MSPROBE_FLIGHT_KERNELS": str(K),
                              "MSPROBE_FLIGHT_ON_EXIT": "1", "MSPROBE_DUMP_PATH": str(work / "dump")})
    p = subprocess.Popen([shimtest.PYTHON, "-c", HUNG_HOST, "hang"], env=env, cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            assert line, p.stderr.read()
            if line.startswith("hung"):
                break
        assert p.poll() is None and not os.path.exists(work / "dump" / "step0"), "written before the signal"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == -signal.SIGTERM, err
    dump = shimtest.Dump(str(work / "dump"))
    try:
        rows = entries_in_launch_order(dump)
    except ValueError as e:
        raise AssertionError(f"{e}\n--- stderr\n{err}") from e
    assert len(rows) == K, [n for _, n, _, _ in rows]
    # The last K launches of the run, by the tensor task's numbering of the same program.
    ref = shimtest.run([shimtest.PYTHON, "-c", HUNG_HOST, "end"], tmp_path / "t", env={"MSPROBE_TASK": "tensor"}).check()
    order = [n for _, n, _, _ in entries_in_launch_order(ref.dump)]
    assert len(order) == 12 and [n for _, n, _, _ in rows] == order[-K:], (order, rows)
    assert [i for i, _, _, _ in rows] == list(range(len(order) - K, len(order))), "the last K consecutive launches"
    for _, name, _, e in rows:
        assert e["flight_trigger"] == "signal SIGTERM" and "flight_trigger_kernel" not in e, (name, e)
    kernels, _ = check_record_contents(dump)
    assert kernels == K
    assert "flight record: signal SIGTERM: writing the last %d kernels" % K in err, err


def test_on_exit_at_a_normal_end(tmp_path):
    r = run_train(tmp_path / "f", "--steps", "2", task="flight",
                  env={"MSPROBE_FLIGHT_KERNELS": "5", "MSPROBE_FLIGHT_ON_EXIT": "1"})
    rows = entries_in_launch_order(r.dump)
    assert len(rows) == 5
    triggers = {e["flight_trigger"] for _, _, _, e in rows}
    assert len(triggers) == 1 and triggers <= {"exit", "aclFinalize", "aclrtResetDevice"}, triggers
    # The last five kernels of the run: the optimizer's.
    assert all(shimtest.op_type(n).startswith("ApplyAdamW") for _, n, _, _ in rows), rows
    check_record_contents(r.dump)
    said = [line for line in r.stderr.splitlines() if line.startswith("msprobe-shim: flight: watched ")]
    assert len(said) == 1 and "no NaN/Inf; the last 5 kernels written to" in said[0], r.stderr


def test_overflow_nums_two_records(tmp_path):
    # From the planted inf on, the next kernel's output is non-finite too: the second record is that kernel alone.
    r = run_train(tmp_path / "f", "--steps", "3", "--overflow-at", "1", task="flight",
                  env={"MSPROBE_FLIGHT_KERNELS": "4", "MSPROBE_OVERFLOW_NUMS": "2"})
    rows = entries_in_launch_order(r.dump)
    records = {}
    for i, name, _, e in rows:
        records.setdefault(e["flight_trigger_kernel"], []).append(i)
    assert len(records) == 2, records
    (first, a), (second, b) = sorted(records.items(), key=lambda kv: kv[1][0])
    assert shimtest.op_type(first) == "Muls" and len(a) == 5 and a == list(range(a[0], a[0] + 5))
    assert b == [a[-1] + 1], (a, b)
    assert sum("flight record" in line for line in r.stderr.splitlines()) == 2


def test_tensor_larger_than_the_ring_is_statistics_only(tmp_path):
    # --hidden 512: the first Linear's weight is 512 x 1024 fp32 = 2 MiB, more than a 1 MiB ring; its activations
    # (32 x 512 and 32 x 1024 fp32) fit. Only Matmul and Muls kernels are captured, so the ring holds both.
    args = ("--steps", "3", "--overflow-at", "2", "--hidden", "512")
    r = run_train(tmp_path / "f", *args, task="flight",
                  env={"MSPROBE_BUFFER_MB": "1", "MSPROBE_FLIGHT_KERNELS": "1", "MSPROBE_LIST": "Matmul,Muls",
                       "MSPROBE_LOG_LEVEL": "info"})
    rows = entries_in_launch_order(r.dump)
    assert [shimtest.op_type(n) for _, n, _, _ in rows] == ["Matmul", "Muls"], rows
    _, matmul, step, e = rows[0]
    assert e["flight_note"] == "input.1 (2097152 bytes) is larger than the ring: statistics only", e["flight_note"]
    x, w, y = (t.info for t in shimtest.tensors(e))
    assert "data_name" not in w and w["shape"] == [512, 1024]
    assert "data_name" in x and "data_name" in y
    # Its statistics, computed on the device, are numpy's on the same weight as the tensor task saved it.
    t = run_train(tmp_path / "t", *args, task="tensor", env={"MSPROBE_LIST": "Matmul"})
    want = t.dump.folder(step, None).data[matmul]["input_args"][1]
    expected = shimtest.expected_stats(t.dump.folder(step, None).load(want), "Float32")
    for key, value in zip(shimtest.STAT_KEYS, expected):
        assert shimtest.stat_close(w[key], value, "Float32"), (key, w[key], value)
    assert "refused: " in r.stderr and "larger than the ring" in r.stderr
    # The trigger's own tensors were kept: its output is the input scaled by inf, element for element.
    import numpy as np
    folder, muls = r.dump.folder(step, None), rows[1][3]
    a, b = folder.load(muls["input_args"][0]), folder.load(muls["output"][0])
    with np.errstate(invalid="ignore", over="ignore"):
        assert np.array_equal(b, a * np.float32(muls["input_args"][1]["value"]), equal_nan=True)


def test_ring_in_host_memory_when_the_device_has_no_room(tmp_path):
    r = run_train(tmp_path / "f", "--steps", "3", "--overflow-at", "2", task="flight",
                  env={"MSPROBE_FLIGHT_KERNELS": str(K), "MSPROBE_BUFFER_MB": "1100", "FAKE_CANN_DEVICE_MEMORY_GB": "1"})
    assert "no 1100 MiB of device memory for the ring; it is in host memory" in r.stderr, r.stderr
    rows = entries_in_launch_order(r.dump)
    assert len(rows) == K + 1 and shimtest.op_type(rows[-1][1]) == "Muls"
    check_record_contents(r.dump)


def test_filters_apply(tmp_path):
    r = run_train(tmp_path / "f", "--steps", "3", "--overflow-at", "2", task="flight",
                  env={"MSPROBE_FLIGHT_KERNELS": "3", "MSPROBE_LIST": "Matmul,Muls"})
    names = [n for _, n, _, _ in entries_in_launch_order(r.dump)]
    assert len(names) == 4 and {shimtest.op_type(n) for n in names} == {"Matmul", "Muls"}, names
    assert shimtest.op_type(names[-1]) == "Muls"
