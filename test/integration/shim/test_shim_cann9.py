"""The shim on CANN 9 (issue 40 items 3 and 5): cann9_host (test/integration/shim/cann9_host.cpp), a plain ACL program
linked against the stand-in, under libmsprobe_shim.so.

* The ACL kernel API: kernels loaded with aclrtBinaryLoadFromData / FromFile, named by aclrtBinaryGetFunction and
  launched with aclrtLaunchKernelWithHostArgs (placeholders included), aclrtLaunchKernelWithConfig (an args handle,
  updated between two launches) and aclrtLaunchKernel (args in device memory), over buffers from aclrtMallocAlign32,
  aclrtMallocCached, aclrtMallocWithCfg, aclrtMalloc and a mapping of physical memory: every buffer is a tensor, its
  values checked against numpy.
* The model API's other loads and executions (aclmdlLoadFromFileWithMem, aclmdlLoadWithConfig, aclmdlExecuteV2,
  aclmdlExecuteAsyncV2) turn the graph dump on: one entry per model kernel per execution, recomputed with numpy.
* A program whose aclInit config turns CANN's data dump on keeps it: its callback gets every chunk it gets without the
  shim, its files are the same, and the shim captures graph kernels only from what its callback receives.
* Teardown: the flight record is written before the call that really ends the device or ACL (reference counts of
  aclrtSetDevice / aclInit followed), named after it.
"""
import json
import os
import re

import numpy as np
import pytest

import shimtest
from shimtest import fail_report, op_type, run

HOST = os.path.join(shimtest.BUILD, "tests", "cann9_host")
GRAPH_MLP = os.path.join(shimtest.SOURCE, "examples", "graph_mlp.json")
GRAPH_MLP_OM = os.path.join(shimtest.BUILD, "examples", "graph_mlp.om")
N = 8
X = 0.5 * np.arange(N, dtype=np.float32) - 1.0  # cann9_host's x_at, y_at, hx_at
Y = 2.0 + 0.25 * np.arange(N, dtype=np.float32)
HX = 10.0 - np.arange(N, dtype=np.float32)


def host(workdir, *args, env=None, shim=True):
    r = run([HOST, *args], workdir, shim=shim, env=env).check()
    assert r.stdout.splitlines()[-1] == "cann9_host: all results match", r.stdout
    return r


def floats(folder, arg):
    """A raw kernel buffer (UInt8 [32]) as the kN floats it holds."""
    assert shimtest.is_tensor(arg) and arg["dtype"] == "UInt8" and arg["shape"] == [4 * N], arg
    return folder.load(arg).view(np.float32)


def value(arg):
    assert not shimtest.is_tensor(arg), arg
    return arg["value"]


# ---- the ACL kernel API --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    r = host(tmp_path_factory.mktemp("kernels"), "kernels", env={"MSPROBE_TASK": "tensor"})
    [folder] = r.dump.folders()
    return folder, sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])


def test_every_launch_of_the_acl_kernel_api_is_one_kernel_named_by_its_function(kernels):
    _, entries = kernels
    assert [op_type(n) for n, _ in entries] == ["fake_vector_add", "fake_vector_add", "fake_scale", "fake_scale",
                                              "fake_vector_add", "fake_relu"]


def test_host_args_buffers_are_tensors_from_every_allocator(kernels):
    """Launch 1: x (aclrtMallocAlign32), y (aclrtMallocCached), z (aclrtMallocWithCfg) are device buffers, not
    integers; z = x + y after the launch."""
    f, entries = kernels
    e = entries[0][1]
    x, y, z = (floats(f, a) for a in e["input_args"][:3])
    assert value(e["input_args"][3]) == N
    np.testing.assert_array_equal(x, X)
    np.testing.assert_array_equal(y, Y)
    xo, yo, zo = (floats(f, a) for a in e["output"])
    np.testing.assert_array_equal(xo, X)
    np.testing.assert_array_equal(yo, Y)
    np.testing.assert_array_equal(zo, X + Y)


def test_a_placeholders_host_data_is_no_slot(kernels):
    """Launch 2: x's slot is a placeholder (0 on the host, patched by the runtime) pointing at host data behind the
    slots: the slots end there, the host data is no argument; w = hx + y."""
    f, entries = kernels
    e = entries[1][1]
    ins = e["input_args"]
    assert len(ins) == 4, ins
    assert value(ins[0]) == 0 and value(ins[3]) == N
    np.testing.assert_array_equal(floats(f, ins[1]), Y)
    assert len(e["output"]) == 2
    np.testing.assert_array_equal(floats(f, e["output"][1]), HX + Y)


def test_an_args_handle_is_captured_as_the_host_built_it_and_updated_it(kernels):
    """Launches 3 and 4 (aclrtLaunchKernelWithConfig): x, s (the last 32 bytes of a mapping: its extent ends there),
    n and the factor as the host appended them, the factor updated by aclrtKernelArgsParaUpdate between the two."""
    f, entries = kernels
    for (_, e), factor in zip(entries[2:4], (2.0, 3.0)):
        ins = e["input_args"]
        assert len(ins) == 4, ins
        np.testing.assert_array_equal(floats(f, ins[0]), X)
        assert value(ins[2]) == N
        assert np.array([value(ins[3])], dtype=np.uint32).view(np.float32)[0] == factor, ins[3]
        np.testing.assert_array_equal(floats(f, e["output"][1]), X * np.float32(factor))


def test_a_blob_in_device_memory_is_the_one_input(kernels):
    """Launch 6 (aclrtLaunchKernel): the args are device memory; the host cannot read them, so the blob itself is
    dumped, as bytes: t's and r's addresses and n."""
    f, entries = kernels
    e = entries[5][1]
    [blob] = e["input_args"]
    assert blob["dtype"] == "UInt8" and blob["shape"] == [24], blob
    t_addr, r_addr, n = f.load(blob).view(np.uint64)
    assert n == N and t_addr != r_addr and t_addr and r_addr
    # Launch 5 wrote t = z - 5 through buffers at those addresses: its output 2 is t.
    t = floats(f, entries[4][1]["output"][2])
    np.testing.assert_array_equal(t, X + Y - 5)


# ---- the model API's variants --------------------------------------------------------------------------------------
def mlp_nodes():
    with open(GRAPH_MLP) as fh:
        return json.load(fh)["nodes"]


def recompute(node, args):
    x = [np.asarray(a, dtype=np.float64) for a in args]
    y = {"MatMul": lambda: x[0] @ x[1], "Add": lambda: x[0] + x[1], "Relu": lambda: np.maximum(x[0], 0)}[node["type"]]()
    return np.asarray(y, dtype=np.float32)


def test_models_loaded_and_run_through_the_variants_are_captured(tmp_path):
    """FromFileWithMem + ExecuteV2 (two runs: steps 0 and 1), WithConfig (from memory, in the caller's memory) +
    ExecuteAsyncV2 (its run 0: step 0); the queue variant is refused by the stand-in and passed back as it is."""
    r = host(tmp_path / "a", "models", GRAPH_MLP_OM, env={"MSPROBE_TASK": "tensor"})
    plain = host(tmp_path / "p", "models", GRAPH_MLP_OM, shim=False)
    assert r.stdout == plain.stdout
    assert "aclmdlLoadFromFileWithQ: 145008" in r.stdout  # ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID
    nodes = mlp_nodes()
    per_step = {f.step: f for f in r.dump.folders()}
    assert sorted(per_step) == [0, 1]
    problems, checked = [], 0
    for step, models in ((0, 2), (1, 1)):
        f = per_step[step]
        entries = sorted(f.entries(), key=lambda kv: kv[1]["launch"]["index"])
        assert [op_type(n) for n, _ in entries] == [n["type"] for n in nodes] * models, [n for n, _ in entries]
        for (name, e), node in zip(entries, nodes * models):
            want = recompute(node, [f.load(a) for a in e["input_args"]])
            got = f.load(e["output"][0])
            if not np.array_equal(got, want):
                problems.append(f"step{step} {name}: {got.ravel()[:4]} != {want.ravel()[:4]}")
            checked += 1
    assert not problems and checked == 3 * len(nodes), fail_report(problems)


# ---- a program's own dump through aclInit --------------------------------------------------------------------------
def write_config(path, dump_dir, section=True):
    os.makedirs(dump_dir, exist_ok=True)
    dump = {"dump_path": str(dump_dir), "dump_list": [{"model_name": "graph_mlp"}], "dump_mode": "output"}
    with open(path, "w") as fh:
        json.dump({"dump": dump} if section else {}, fh)
    return str(path)


def mlp_forward(run_index):
    """Every node's output of graph_mlp for cann9_host's model_input(run), as float32 (each kernel rounds once)."""
    with open(GRAPH_MLP) as fh:
        spec = json.load(fh)
    shapes = {t["name"]: t["shape"] for t in spec["tensors"]}
    values = {k: np.asarray(v, dtype=np.float32).reshape(shapes[k]) for k, v in spec["weights"].items()}
    i = np.arange(4 * 8)
    values["x"] = (((run_index * 13 + i * 3) % 17 - 8) / 4.0).astype(np.float32).reshape(4, 8)
    for node in spec["nodes"]:
        values[node["outputs"][0]] = recompute(node, [values[a] for a in node["inputs"]])
    return {node["name"]: values[node["outputs"][0]] for node in spec["nodes"]}


def relative_files(root):
    """The program's dump files: path below the time folder with the µs stamp cut, and size."""
    out = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root).split(os.sep, 1)[1]
            out.append((re.sub(r"\.\d+$", "", rel), os.path.getsize(os.path.join(dirpath, name))))
    return sorted(out)


def test_a_program_dump_with_its_own_callback_gets_every_chunk_and_is_captured_from_them(tmp_path):
    """The program's config dumps outputs only: its callback gets what it gets without the shim (not the shim's
    inputs too), and the shim's entries are those outputs, equal to numpy's forward pass."""
    plain = host(tmp_path / "p", "acl-init-dump", write_config(tmp_path / "p.json", tmp_path / "pd"), GRAPH_MLP_OM,
                 "--callback", shim=False)
    r = host(tmp_path / "a", "acl-init-dump", write_config(tmp_path / "a.json", tmp_path / "ad"), GRAPH_MLP_OM,
             "--callback", env={"MSPROBE_TASK": "tensor"})
    assert r.stdout == plain.stdout
    assert "own callback: 10 files in 10 chunks" in r.stdout, r.stdout
    warnings = [line for line in r.stderr.splitlines() if "turned CANN's data dump on in aclInit's config" in line]
    assert len(warnings) == 1, r.stderr
    nodes = mlp_nodes()
    problems = []
    for f in r.dump.folders():
        want = mlp_forward(f.step)
        entries = sorted(f.entries(), key=lambda kv: kv[1]["launch"]["index"])
        assert [op_type(n) for n, _ in entries] == [n["type"] for n in nodes], [n for n, _ in entries]
        for (name, e), node in zip(entries, nodes):
            assert e.get("input_args", []) == [] and len(e["output"]) == 1, e  # the program's dump_mode: output
            if not np.array_equal(f.load(e["output"][0]), want[node["name"]]):
                problems.append(f"step{f.step} {name}")
    assert sorted(f.step for f in r.dump.folders()) == [0, 1]
    assert not problems, fail_report(problems)


def test_a_program_dump_to_files_keeps_its_files_and_the_shim_takes_nothing(tmp_path):
    host(tmp_path / "p", "acl-init-dump", write_config(tmp_path / "p.json", tmp_path / "pd"), GRAPH_MLP_OM, shim=False)
    r = host(tmp_path / "a", "acl-init-dump", write_config(tmp_path / "a.json", tmp_path / "ad"), GRAPH_MLP_OM,
             env={"MSPROBE_TASK": "tensor"})
    files = relative_files(tmp_path / "ad")
    assert files == relative_files(tmp_path / "pd") and len(files) == 10, files
    assert not r.dump.folders()
    said = [line for line in r.stderr.splitlines() if "own dump writes its files" in line]
    assert len(said) == 1 and "graph-sunk kernels are not captured" in said[0], r.stderr


def test_an_acl_init_config_without_a_dump_leaves_the_graph_dump_to_the_shim(tmp_path):
    r = host(tmp_path / "a", "acl-init-dump", write_config(tmp_path / "a.json", tmp_path / "ad", section=False),
             GRAPH_MLP_OM, env={"MSPROBE_TASK": "tensor"})
    assert "aclInit's config" not in r.stderr, r.stderr
    assert sorted(f.step for f in r.dump.folders()) == [0, 1]
    for f in r.dump.folders():
        assert len(f.names()) == len(mlp_nodes())


# ---- teardown ------------------------------------------------------------------------------------------------------
def flight_triggers(r):
    [f] = r.dump.folders()
    return [(op_type(n), e.get("flight_trigger")) for n, e in sorted(f.entries(), key=lambda kv: kv[1]["launch"]["index"])]


FLIGHT = {"MSPROBE_TASK": "flight", "MSPROBE_FLIGHT_ON_EXIT": "1"}


def test_only_the_call_that_ends_the_device_flushes(tmp_path):
    """aclInit and aclrtSetDevice twice each: aclrtResetDevice and aclFinalizeReference leave a reference and write
    nothing; aclrtResetDeviceForce ends the device and writes the three kernels kept before it."""
    r = host(tmp_path / "a", "teardown-counted", env=FLIGHT)
    assert "acl references left: 1" in r.stdout and "acl references left: 0" in r.stdout, r.stdout
    assert flight_triggers(r) == [("fake_vector_add", "aclrtResetDeviceForce")] * 3


def test_the_last_acl_reference_flushes(tmp_path):
    r = host(tmp_path / "a", "teardown-reference", env=FLIGHT)
    assert flight_triggers(r) == [("fake_vector_add", "aclFinalizeReference")]


# ---- the 8-, 6- and 4-bit floats ---------------------------------------------------------------------------------
INSPECT = os.path.join(shimtest.BUILD, "bin", "msprobe-inspect")
TORCH_NPU_STUB = os.path.join(shimtest.BUILD, "tests", "torch_npu_stub", "libtorch_npu.so")
ASCEND_950 = {"FAKE_CANN_SOC": "Ascend950PR_9599"}
# cann9_host cast's types, in launch order, with their names under MindSpore's and PyTorch's conventions.
CAST_TYPES = [("HiFloat8", "torch_npu.HiFloat8Tensor"), ("Float8E5M2", "torch.float8_e5m2"),
              ("Float8E4M3FN", "torch.float8_e4m3fn"), ("Float4E2M1", "torch.float4_e2m1fn_x2"),
              ("Float4E1M2", "torch_npu.float4_e1m2fn_x2")]
HCCL_TYPES = [("Float8E4M3FN", "torch.float8_e4m3fn"), ("Float8E5M2", "torch.float8_e5m2"),
              ("HiFloat8", "torch_npu.HiFloat8Tensor"), ("Float8E8M0", "torch.float8_e8m0fnu")]


def ieee_like(codes, ebits, mbits, bias):
    """Values of sign+exponent+mantissa codes with subnormals and no special values."""
    codes = np.asarray(codes, dtype=np.int64)
    sign = np.where((codes >> (ebits + mbits)) & 1, -1.0, 1.0)
    e, m = (codes >> mbits) & (2 ** ebits - 1), codes & (2 ** mbits - 1)
    return sign * np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))


def hif8(code):
    """HiFloat8, written from its definition: a 4-bit field after the sign picks 0-4 exponent bits (the first of them
    the exponent's sign, its magnitude's leading one implied), the rest is mantissa."""
    if code == 0x80:
        return np.nan
    sign, v = (-1.0 if code & 0x80 else 1.0), code & 0x7F
    if v == 0x6F:
        return sign * np.inf
    field = v >> 3
    if field == 0:
        return 0.0 if v == 0 else sign * 2.0 ** ((v & 7) - 23)
    ebits = 0 if field == 1 else 1 if field >> 1 == 1 else 2 if field >> 2 == 1 else 3 if field >> 2 == 2 else 4
    mbits = {0: 3, 1: 3, 2: 3, 3: 2, 4: 1}[ebits]
    exponent = 0
    if ebits:
        bits = (v >> mbits) & (2 ** ebits - 1)
        magnitude = (bits & (2 ** (ebits - 1) - 1)) | 2 ** (ebits - 1)
        exponent = -magnitude if bits >> (ebits - 1) else magnitude
    return sign * (1 + (v & (2 ** mbits - 1)) / 2.0 ** mbits) * 2.0 ** exponent


def decode(name, raw):
    """A tensor's raw bytes (a .bin file) as float32, by its dtype name; FP4 two a byte, low nibble first."""
    raw = np.frombuffer(raw, dtype=np.uint8)
    if name.startswith("Float4"):
        raw = np.stack([raw & 0xF, raw >> 4], axis=1).ravel()
    with np.errstate(over="ignore"):
        values = {
            "HiFloat8": lambda c: np.array([hif8(int(x)) for x in c]),
            "Float8E5M2": lambda c: (c.astype(np.uint16) << 8).view(np.float16).astype(np.float64),
            "Float8E4M3FN": lambda c: np.where((c & 0x7F) == 0x7F, np.nan, ieee_like(c, 4, 3, 7)),
            "Float8E8M0": lambda c: np.where(c == 0xFF, np.nan, 2.0 ** (c.astype(np.float64) - 127)),
            "Float4E2M1": lambda c: ieee_like(c, 2, 1, 1),
            "Float4E1M2": lambda c: ieee_like(c, 1, 2, 1),
        }[name](raw)
    return values.astype(np.float32)


def inspect(*args):
    import subprocess
    p = subprocess.run([INSPECT, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def cast_run(workdir, **env):
    r = host(workdir, "cast", env={"MSPROBE_TASK": "tensor", **ASCEND_950, **env})
    [folder] = r.dump.folders()
    return r, folder, sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])


@pytest.fixture(scope="module")
def casts(tmp_path_factory):
    return cast_run(tmp_path_factory.mktemp("cast"))


def test_narrow_float_tensors_are_files_of_float32_as_the_device_reads_them(casts):
    """Each narrow tensor (Cast x -> T's output, Cast T -> FLOAT's input) is saved widened to float32, equal bit for
    bit to what the device's own Cast back to FLOAT gave; named as msprobe names it for MindSpore (an ACL host)."""
    _, f, entries = casts
    assert len(entries) == 2 * len(CAST_TYPES) + 1
    for k, (name, _) in enumerate(CAST_TYPES):
        (_, to), (_, back) = entries[2 * k], entries[2 * k + 1]
        narrow_out, narrow_in, device = to["output"][0], back["input_args"][0], back["output"][0]
        assert narrow_out["dtype"] == narrow_in["dtype"] == name and device["dtype"] == "Float32"
        assert narrow_out["shape"] == [16]
        z = f.load(device)
        for t in (narrow_out, narrow_in):
            a = f.load(t)
            assert a.dtype == np.float32 and a.shape == (16,), (name, a.dtype)
            np.testing.assert_array_equal(a.view(np.uint32), z.view(np.uint32), err_msg=name)


def test_narrow_float_statistics_are_float32_statistics(casts):
    _, f, entries = casts
    for k, (name, _) in enumerate(CAST_TYPES):
        t, z = entries[2 * k][1]["output"][0], f.load(entries[2 * k + 1][1]["output"][0])
        mx, mn, mean, norm = shimtest.expected_stats(z, "Float32")
        assert (t["Max"], t["Min"]) == (mx, mn), (name, t)
        assert shimtest.stat_close(t["Mean"], mean, "Float32") and shimtest.stat_close(t["Norm"], norm, "Float32"), t


def test_a_packed_view_starting_inside_a_byte(casts):
    """Cast of the FLOAT4_E2M1 tensor's odd elements (offset 1, stride 2): the view's elements, gathered nibble by
    nibble, equal the whole tensor's odd elements and the device's result."""
    _, f, entries = casts
    view = entries[-1][1]["input_args"][0]
    assert view["dtype"] == "Float4E2M1" and view["shape"] == [8] and view["offset"] == 1 and view["stride"] == [2]
    whole = f.load(entries[2 * 3 + 1][1]["input_args"][0])
    np.testing.assert_array_equal(f.load(view), whole[1::2])
    np.testing.assert_array_equal(f.load(entries[-1][1]["output"][0]), whole[1::2])


def test_bin_files_keep_the_raw_bytes(tmp_path, casts):
    """MSPROBE_FILE_FORMAT=bin: the packed codes as the device holds them (16 FP4 elements in 8 bytes; the view's 8
    in 4), which decode here, independently, to the device's values."""
    _, plain, plain_entries = casts
    _, f, entries = cast_run(tmp_path / "bin", MSPROBE_FILE_FORMAT="bin")
    for k, (name, _) in enumerate(CAST_TYPES):
        t = entries[2 * k][1]["output"][0]
        assert t["data_name"].endswith(".bin"), t
        with open(f.file_path(t), "rb") as fh:
            raw = fh.read()
        assert len(raw) == (8 if name.startswith("Float4") else 16), (name, len(raw))
        want = plain.load(plain_entries[2 * k + 1][1]["output"][0])
        np.testing.assert_array_equal(decode(name, raw), want, err_msg=name)
    view = entries[-1][1]["input_args"][0]
    with open(f.file_path(view), "rb") as fh:
        raw = fh.read()
    assert len(raw) == 4
    np.testing.assert_array_equal(decode("Float4E2M1", raw), plain.load(plain_entries[-1][1]["output"][0]))
    # msprobe-inspect recomputes every statistic from the raw bytes, then widens them to npy as the collector does.
    root = os.path.dirname(os.path.dirname(f.path))
    assert "22 tensor files checked: OK" in inspect("verify", root)
    inspect("convert", root)
    assert "22 tensor files checked: OK" in inspect("verify", root)
    [converted] = shimtest.Dump(root).folders()
    for (_, e), (_, p) in zip(sorted(converted.entries(), key=lambda kv: kv[1]["launch"]["index"]), plain_entries):
        for t, want in zip(e["input_args"][:1] + e["output"], p["input_args"][:1] + p["output"]):
            np.testing.assert_array_equal(converted.load(t), plain.load(want))


def test_md5_of_a_narrow_float_tensor_is_the_crc_of_its_float32_values(tmp_path, casts):
    import zlib
    _, plain, plain_entries = casts
    _, f, entries = cast_run(tmp_path / "md5", MSPROBE_TASK="statistics", MSPROBE_SUMMARY_MODE="md5")
    for k, (name, _) in enumerate(CAST_TYPES):
        z = plain.load(plain_entries[2 * k + 1][1]["output"][0]).astype("<f4")
        assert entries[2 * k][1]["output"][0]["md5"] == f"{zlib.crc32(z.tobytes()):08x}", name


def test_narrow_float_names_under_torch_npu(tmp_path):
    _, _, entries = cast_run(tmp_path / "pt", LD_PRELOAD=f"{shimtest.SHIM} {TORCH_NPU_STUB}")
    assert [entries[2 * k][1]["output"][0]["dtype"] for k in range(len(CAST_TYPES))] == [t for _, t in CAST_TYPES]


def test_msprobe_inspect_reads_compares_and_replays_narrow_floats(tmp_path, casts):
    r, _, _ = casts
    other, _, _ = cast_run(tmp_path / "b")
    inspect("verify", r.dump.root)
    assert "tensors     22 recorded, 22 file(s)" in inspect("summary", r.dump.root)
    assert "tensors: 22 pass" in inspect("compare", r.dump.root, other.dump.root, "--out", tmp_path / "cmp")
    # Cast into each type rounded as Ascend 950's Cast (format/minifloat.h): every one passes.
    assert "11 compared (11 pass, 0 warning, 0 error)" in inspect("replay", r.dump.root, "--out", tmp_path / "rp")


@pytest.mark.parametrize("torch_npu", [False, True], ids=["mindspore", "pytorch"])
def test_hccl_fp8_types_are_typed_tensors(tmp_path, torch_npu):
    """HcclDataType 14-17 (HIF8, FP8E4M3, FP8E5M2, FP8E8M0) are the aclDataTypes of the same name: the codes
    0x30..0x37 sent, as float32."""
    env = {"MSPROBE_TASK": "tensor"}
    if torch_npu:
        env["LD_PRELOAD"] = f"{shimtest.SHIM} {TORCH_NPU_STUB}"
    r = host(tmp_path / "a", "hccl-fp8", env=env)
    [f] = r.dump.folders()
    entries = sorted(f.entries(), key=lambda kv: kv[1]["launch"]["index"])
    assert [op_type(n) for n, _ in entries] == ["HcclAllGather"] * len(HCCL_TYPES)
    codes = bytes(range(0x30, 0x38))
    for (_, e), (ms_name, pt_name) in zip(entries, HCCL_TYPES):
        for t in (e["input_args"][0], e["output"][0]):
            assert t["dtype"] == (pt_name if torch_npu else ms_name) and t["shape"] == [8], t
            np.testing.assert_array_equal(f.load(t), decode(ms_name, codes), err_msg=ms_name)


# ---- addresses as the kernel sees them (issue 40 item 4) --------------------------------------------------------
@pytest.fixture(scope="module")
def addresses(tmp_path_factory):
    r = host(tmp_path_factory.mktemp("addresses"), "addresses", env={"MSPROBE_TASK": "tensor"})
    [folder] = r.dump.folders()
    entries = sorted(folder.entries(), key=lambda kv: kv[1]["launch"]["index"])
    assert [op_type(n) for n, _ in entries] == ["Add", "Add", "FlashAttentionScore", "Cat", "Cat", "Add", "Add"]
    return folder, [e for _, e in entries]


def linear(a, b, n=N):
    return (a + b * np.arange(n)).astype(np.float32)


@pytest.mark.parametrize("first", [0, 5], ids=["aclSetRawTensorAddr", "aclSetInputTensorAddr-ignored-index"])
def test_a_repeatable_executor_launches_with_the_address_bound_then(addresses, first):
    """Add launched twice through one repeatable executor, x rebound between (aclSetRawTensorAddr; or
    aclSetInputTensorAddr with index 7, which CANN ignores for a built-in op): each launch's x is the buffer bound
    at it, and z = x + y."""
    f, entries = addresses
    step = 2.0 if first else 0.5
    for e, x in ((entries[first], linear(0.5, step)), (entries[first + 1], linear(100.0, -3.0 if first else -1.0))):
        y = linear(1.0, 1.0)
        np.testing.assert_array_equal(f.load(e["input_args"][0]), x)
        np.testing.assert_array_equal(f.load(e["input_args"][1]), y)
        np.testing.assert_array_equal(f.load(e["output"][0]), x + y)


def attention_bsnd(q, k, v, scale):
    """softmax(q k^T * scale) v per head, in float64; q, k, v [B, S, N, D]."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("bsnd,btnd->bnst", q, k) * scale
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bnst,btnd->bsnd", p, v).astype(np.float32)


def test_an_op_decoded_at_phase_1_reads_the_address_bound_at_phase_2(addresses):
    """FlashAttentionScore (its char * inputLayout makes the shim decode it at phase 1): q rebound between the phases;
    the dumped q is the new buffer, and the output is attention over it."""
    f, entries = addresses
    e = entries[2]
    i = np.arange(4 * 2 * 8)
    q2 = (((i * 5) % 13 - 6) / 8.0).astype(np.float32).reshape(1, 4, 2, 8)
    q, k, v = (f.load(a) for a in e["input_args"][:3])
    np.testing.assert_array_equal(q, q2)
    want = attention_bsnd(q, k, v, 1 / np.sqrt(8))
    out = [o for o in e["output"] if o is not None][-1]
    np.testing.assert_allclose(f.load(out), want, rtol=1e-6, atol=1e-7)


def test_a_list_member_rebound_by_the_dynamic_setter(addresses):
    f, entries = addresses
    a, b, b2 = (linear(s, d, 6).reshape(2, 3) for s, d in ((1, 1), (7, 1), (-1, -1)))
    for e, second in ((entries[3], b), (entries[4], b2)):
        members = [f.load(m) for m in e["input_args"][0]]
        np.testing.assert_array_equal(members[0], a)
        np.testing.assert_array_equal(members[1], second)
        np.testing.assert_array_equal(f.load(e["output"][0]), np.concatenate([a, second]))
