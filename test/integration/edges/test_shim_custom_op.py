"""A brand-new op the shim was never built against (issue 3, "Done when"): the msprobe_test vendor's
libcust_opapi.so (test/integration/custom_op/, laid out as CANN installs custom ops), loaded by a Python host
with dlopen + dlsym as torch_npu loads custom ops, runs under the shim:

* with its header on the search path (ASCEND_CUSTOM_OPP_PATH/op_api/include): tensors classified from the
  prototype, by-value double/float/int64/bool recorded exactly, results bit-identical to a run without the shim;
* without the header: results still bit-identical (every register and stack slot forwarded) and the kernel
  captured with its tensors classified by the header-less rule (the last tensor is the output);
* an op whose 250-character name makes its tensor file names longer than 255 characters: 32-digit file names
  with their mapping.csv rows (spec §5).
"""
import csv
import json
import os
import re
import shutil
import struct
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_helpers import (CUSTOM_HOST, CUSTOM_LIB, PYTHON, SHIM, TESTS_BIN, VENDOR_DIR, clean_env,  # noqa: E402
                          describe, dump_dirs, entries_of, load_dump, require_built, run, shim_lines, with_shim)

SCALE = 0.1 + 2.0 ** -40          # needs all 53 bits: any rounding on the way shows
SHIFT = float(np.float32(-0.3))   # a float with a full 24-bit mantissa
MODE = -3
FLAG = True
LONG_OP = "MsprobeTestVeryLongKernelName" + "Abcdefghij" * 22 + "Z"
ALPHA = 3.0 + 2.0 ** -45
NUMPY = {"fp64": np.float64, "fp32": np.float32}
DTYPE_NAME = {"fp64": "Float64", "fp32": "Float32"}  # MindSpore spelling: the host is not torch_npu


def bits(x):
    return struct.pack("<d", x)


def run_host(args, env, dtype="fp64", lib=CUSTOM_LIB, launches=1, wrapper=()):
    cmd = [*wrapper, PYTHON, CUSTOM_HOST, "--lib", lib, "--dtype", dtype, "--launches", str(launches), *args]
    p = run(cmd, env)
    assert p.returncode == 0, describe(p)
    lines = p.stdout.decode().splitlines()
    assert len(lines) == 1, describe(p)
    result = json.loads(lines[0])
    np_dtype = NUMPY[dtype]
    arrays = {k: np.frombuffer(bytes.fromhex(v), np_dtype).reshape(result["shape"]) for k, v in result["inputs"].items()}
    outs = [np.frombuffer(bytes.fromhex(h), np_dtype).reshape(result["shape"]) for h in result["outputs"]]
    return arrays, outs, p


def scale_shift_args(scale=SCALE, shift=SHIFT, mode=MODE, flag=FLAG):
    # --x=value: argparse would take a negative value given separately for an option.
    return ["scale_shift", f"--scale={float.hex(scale)}", f"--shift={float.hex(shift)}", f"--mode={mode}",
            f"--flag={int(flag)}"]


def scale_shift_reference(x, y, scale, shift, mode, flag, np_dtype):
    """(-1)^flag * 2^mode * (x*scale + y*shift) in float64, one rounding per operation, then the tensor dtype."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    v = np.ldexp(x * np.float64(scale) + y * np.float64(np.float32(shift)), mode)
    return (-v if flag else v).astype(np_dtype)


def only_rank_dir(dump_root):
    dirs = dump_dirs(dump_root)
    assert list(dirs) == [("step0", "rank")], f"expected one step0/rank folder, got {sorted(dirs)}"
    return dirs[("step0", "rank")]


def check_tensor(arg, expected, dtype, rank_dir, data_name=None):
    """A dumped tensor: metadata, statistics against numpy, and the npy file holding exactly `expected`."""
    assert isinstance(arg, dict) and arg.get("type") == "mindspore.Tensor", arg
    assert arg["dtype"] == DTYPE_NAME[dtype], arg
    assert arg["shape"] == list(expected.shape), arg
    e = expected.astype(np.float64)
    for key, want in (("Max", e.max()), ("Min", e.min()), ("Mean", e.mean()), ("Norm", np.sqrt((e * e).sum()))):
        assert arg[key] == pytest.approx(want, rel=1e-6, abs=1e-12), (key, arg, want)
    if data_name is not None:
        assert arg["data_name"] == data_name, arg
    path = os.path.join(rank_dir, "dump_tensor_data", arg["data_name"])
    loaded = np.load(path)
    assert loaded.dtype == expected.dtype and loaded.shape == expected.shape, (loaded.dtype, loaded.shape)
    assert loaded.tobytes() == expected.tobytes(), f"{arg['data_name']}: {loaded} != {expected}"


def launch_count(log_path, op):
    with open(log_path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip() == op)


@pytest.fixture(scope="module", autouse=True)
def built():
    require_built(SHIM, CUSTOM_LIB, os.path.join(VENDOR_DIR, "op_api", "include", "aclnn_scale_shift.h"),
                  os.path.join(VENDOR_DIR, "op_api", "include", "aclnn_long_kernel.h"))


@pytest.mark.parametrize("dtype", ["fp64", "fp32"])
def test_custom_op_with_header_is_captured_with_exact_arguments(tmp_path, dtype):
    base = clean_env(ASCEND_CUSTOM_OPP_PATH=VENDOR_DIR)
    x_plain, outs_plain, _ = run_host(scale_shift_args(), base, dtype, launches=2)
    want = scale_shift_reference(x_plain["self"], x_plain["other"], SCALE, SHIFT, MODE, FLAG, NUMPY[dtype])
    for out in outs_plain:
        assert out.tobytes() == want.tobytes(), (out, want)
    # Element 0 is scale itself, element 1 shift itself (times -2^mode): the kernel saw their exact bits.
    if dtype == "fp64":
        assert outs_plain[0][0, 0] == -SCALE / 8 and outs_plain[0][0, 1] == -SHIFT / 8

    dump = tmp_path / "dump"
    env = with_shim(dict(base, MSPROBE_TASK="tensor", MSPROBE_DUMP_PATH=str(dump),
                         FAKE_CANN_LAUNCH_LOG=str(tmp_path / "launches.log")))
    x_shim, outs_shim, p = run_host(scale_shift_args(), env, dtype, launches=2)
    assert [o.tobytes() for o in outs_shim] == [o.tobytes() for o in outs_plain], "results differ under the shim"
    assert shim_lines(p.stderr) == [], describe(p)

    rank_dir = only_rank_dir(dump)
    data = load_dump(rank_dir)
    entries = entries_of(data, "ScaleShift")
    assert len(entries) == launch_count(tmp_path / "launches.log", "ScaleShift") == 2, sorted(data["data"])
    assert sorted(k.split(".")[2] for k in entries) == ["0", "1"], sorted(entries)
    for kernel, entry in entries.items():
        args = entry["input_args"]
        assert len(args) == 6, json.dumps(args)[:2000]
        check_tensor(args[0], x_shim["self"], dtype, rank_dir, f"{kernel}.input.0.npy")
        assert args[1]["type"] == "float" and bits(args[1]["value"]) == bits(SCALE), \
            f"double scale recorded as {args[1]!r}, want {SCALE!r} exactly"
        check_tensor(args[2], x_shim["other"], dtype, rank_dir, f"{kernel}.input.2.npy")
        assert args[3]["type"] == "float" and bits(args[3]["value"]) == bits(SHIFT), \
            f"float shift recorded as {args[3]!r}, want {SHIFT!r} exactly"
        assert args[4] == {"type": "int", "value": MODE}, args[4]
        assert args[5] == {"type": "bool", "value": FLAG}, args[5]
        assert len(entry["output"]) == 1, entry["output"]
        check_tensor(entry["output"][0], want, dtype, rank_dir, f"{kernel}.output.0.npy")


def test_custom_op_other_values_forwarded(tmp_path):
    """A tiny double, a denormal float, a large mode and flag false pass through bit-exactly."""
    scale, shift, mode = 1.0e-300, float(np.float32(1.0e-40)), 60
    base = clean_env(ASCEND_CUSTOM_OPP_PATH=VENDOR_DIR)
    args = scale_shift_args(scale, shift, mode, False)
    x, plain, _ = run_host(args, base)
    env = with_shim(dict(base, MSPROBE_DUMP_PATH=str(tmp_path / "dump")))
    _, shimmed, _ = run_host(args, env)
    want = scale_shift_reference(x["self"], x["other"], scale, shift, mode, False, np.float64)
    assert plain[0].tobytes() == want.tobytes() == shimmed[0].tobytes()
    entry = next(iter(entries_of(load_dump(only_rank_dir(tmp_path / "dump")), "ScaleShift").values()))
    got = entry["input_args"]
    assert bits(got[1]["value"]) == bits(scale) and bits(got[3]["value"]) == bits(shift), got
    assert got[4]["value"] == mode and got[5]["value"] is False, got


# The header-less rule reads argument slots that may not be pointers through the kernel (process_vm_readv). Where
# a container's seccomp profile refuses that call (EPERM; qemu-user: ENOSYS), the shim reads them through a pipe.
@pytest.mark.parametrize("probe", ["process_vm_readv", "seccomp_denies_process_vm_readv"])
def test_custom_op_without_header_forwards_exactly_and_classifies_tensors(tmp_path, probe):
    wrapper = (os.path.join(TESTS_BIN, "deny_process_vm_readv"),) if probe.startswith("seccomp") else ()
    require_built(*wrapper)
    # A copy of the vendor folder without op_api/include: no header declares aclnnScaleShiftGetWorkspaceSize.
    vendor = tmp_path / "vendors" / "msprobe_test"
    (vendor / "op_api" / "lib").mkdir(parents=True)
    lib = str(vendor / "op_api" / "lib" / "libcust_opapi.so")
    shutil.copy2(CUSTOM_LIB, lib)
    base = clean_env(ASCEND_CUSTOM_OPP_PATH=str(vendor))
    if wrapper and run([*wrapper, "true"], base).returncode == 77:
        # qemu-user cannot install seccomp filters; there process_vm_readv is ENOSYS anyway, so the pipe fallback
        # is what the other parameter exercises.
        pytest.skip("seccomp filters cannot be installed here (qemu-user)")

    x, plain, _ = run_host(scale_shift_args(), base, lib=lib, wrapper=wrapper)
    want = scale_shift_reference(x["self"], x["other"], SCALE, SHIFT, MODE, FLAG, np.float64)
    assert plain[0].tobytes() == want.tobytes()

    dump = tmp_path / "dump"
    env = with_shim(dict(base, MSPROBE_TASK="tensor", MSPROBE_DUMP_PATH=str(dump)))
    _, shimmed, p = run_host(scale_shift_args(), env, lib=lib, wrapper=wrapper)
    assert shimmed[0].tobytes() == plain[0].tobytes(), "header-less forwarding changed the result"

    rank_dir = only_rank_dir(dump)
    entries = entries_of(load_dump(rank_dir), "ScaleShift")
    assert len(entries) == 1, sorted(load_dump(rank_dir)["data"])
    (kernel, entry), = entries.items()
    # Header-less rule (shim/aclnn/aclnn_capture.cpp, call_from_slots): the argument slots are scanned for handles the
    # shim saw created; tensors in order, the last one is the output, every other one an input. By-value
    # arguments cannot be told apart from garbage without a prototype and are not recorded.
    args = entry["input_args"]
    assert len(args) == 2, json.dumps(args)[:2000]
    check_tensor(args[0], x["self"], "fp64", rank_dir, f"{kernel}.input.0.npy")
    check_tensor(args[1], x["other"], "fp64", rank_dir, f"{kernel}.input.1.npy")
    assert len(entry["output"]) == 1
    check_tensor(entry["output"][0], want, "fp64", rank_dir, f"{kernel}.output.0.npy")


def test_long_kernel_name_gets_mapping_csv(tmp_path):
    assert len(LONG_OP) == 250
    base = clean_env(ASCEND_CUSTOM_OPP_PATH=VENDOR_DIR)
    args = ["long", f"--op-name={LONG_OP}", f"--alpha={float.hex(ALPHA)}"]
    x, plain, _ = run_host(args, base, "fp32")
    want = (x["self"].astype(np.float64) * ALPHA).astype(np.float32)
    assert plain[0].tobytes() == want.tobytes()

    dump = tmp_path / "dump"
    _, shimmed, p = run_host(args, with_shim(dict(base, MSPROBE_TASK="tensor", MSPROBE_DUMP_PATH=str(dump))), "fp32")
    assert shimmed[0].tobytes() == plain[0].tobytes()
    rank_dir = only_rank_dir(dump)
    entries = entries_of(load_dump(rank_dir), LONG_OP)
    assert len(entries) == 1, describe(p)
    (kernel, entry), = entries.items()
    assert kernel.startswith(LONG_OP + ".") and len(f"{kernel}.output.0.npy") > 255

    tensor_dir = os.path.join(rank_dir, "dump_tensor_data")
    with open(os.path.join(tensor_dir, "mapping.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert all(len(r) == 2 for r in rows), rows
    mapping = dict(rows)  # new_name -> original_name, no header row
    assert len(mapping) == len(rows) == 2, rows

    in_arg, alpha_arg = entry["input_args"]
    out_arg, = entry["output"]
    assert alpha_arg["type"] == "float" and bits(alpha_arg["value"]) == bits(ALPHA), alpha_arg  # header was found
    for arg, original, expected in ((in_arg, f"{kernel}.input.0.npy", x["self"]),
                                    (out_arg, f"{kernel}.output.0.npy", want)):
        new = arg["data_name"]
        assert re.fullmatch(r"\d{32}\.npy", new), new
        assert mapping[new] == original, (new, mapping)
        check_tensor(arg, expected, "fp32", rank_dir)
    assert all(len(name) <= 255 for name in os.listdir(tensor_dir)), os.listdir(tensor_dir)
    assert sorted(os.listdir(tensor_dir)) == sorted([*mapping, "mapping.csv"])
