"""The collector's format building blocks against independent references: numpy (statistics, npy, fp16),
zlib (CRC-32), Python's json and repr (numbers, strings, key order) and msprobe's own blacklist regex.

The C++ side is reached through tests/format_probe (format_probe.cpp), in batches.
"""
import json
import math
import os
import re
import struct
import subprocess
import zlib

import numpy as np
import pytest

PROBE = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", "build"), "tests", "format_probe")
# msprobe's Const.STRING_BLACKLIST: compare aborts on any name, value or stack line matching it.
STRING_BLACKLIST = r"^[＋－＝％＠\+\-=%@]|;[＋－＝％＠\+\-=%@]"

NUMPY_TYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_,
}
INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
ALL_DTYPES = list(NUMPY_TYPES) + ["bfloat16"]


def probe(*args, stdin=None, check=True):
    r = subprocess.run([PROBE, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr + r.stdout
    return r


# ---- bf16, written here from the definition (not from the C++ code) ---------------------------------------------
def bf16_to_f32(bits):
    b = np.asarray(bits, dtype=np.uint16)
    return (b.reshape(-1).astype(np.uint32) << 16).view(np.float32).reshape(b.shape)


def f32_to_bf16(f):
    f = np.asarray(f, dtype=np.float32)
    u = f.reshape(-1).view(np.uint32).astype(np.uint64).reshape(f.shape)
    s16, one = np.uint64(16), np.uint64(1)
    rounded = ((u + np.uint64(0x7FFF) + ((u >> s16) & one)) >> s16).astype(np.uint16)
    return np.where(np.isnan(f), ((u >> s16) | np.uint64(0x40)).astype(np.uint16), rounded)


def round_to(v, rt):
    """A Python float rounded to the result dtype of msprobe's statistics."""
    if rt == "float32":
        return float(np.float32(v))
    if rt == "float16":
        return float(np.float16(np.float32(v)))
    if rt == "bfloat16":
        return float(bf16_to_f32(f32_to_bf16(np.float32(v)))[()])
    raise AssertionError(rt)


# ---- Data for every dtype --------------------------------------------------------------------------------------
def make_data(rng, dtype, shape, special=None):
    """Returns (raw bytes, values as numpy array: bf16 as uint16 bits)."""
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bfloat16":
        f = (rng.standard_normal(n) * 3 + 0.5).astype(np.float32)
        arr = (f.view(np.uint32) >> 16).astype(np.uint16)
    elif dtype == "bool":
        arr = rng.integers(0, 2, n).astype(np.bool_)
    elif dtype in INTS:
        info = np.iinfo(NUMPY_TYPES[dtype])
        arr = rng.integers(info.min, info.max, n, dtype=NUMPY_TYPES[dtype], endpoint=True)
    else:
        scale = 100.0 if dtype == "float16" else 1e3
        arr = (rng.standard_normal(n) * scale).astype(NUMPY_TYPES[dtype])
    if special and n:
        vals = {"nan": [np.nan], "inf": [np.inf, -np.inf], "posinf": [np.inf]}[special]
        idx = rng.choice(n, size=min(len(vals), n), replace=False)
        for i, v in zip(idx, vals):
            if dtype == "bfloat16":
                arr[i] = (np.array([v], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)[0]
            else:
                arr[i] = v
    arr = arr.reshape(shape)
    return arr.tobytes(), arr


def expected_stats(dtype, arr, precision):
    """msprobe's get_stat_info (reference/msprobe_formats.md §1.6), written with numpy."""
    none = {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if arr.size == 0:
        return none
    if dtype == "bool":
        return {"Max": bool(arr.any()), "Min": bool(arr.all()), "Mean": None, "Norm": None}
    values = bf16_to_f32(arr) if dtype == "bfloat16" else arr
    if arr.ndim == 0:  # the scalar itself, in its own type
        v = int(values[()]) if dtype in INTS else float(values[()])
        return {"Max": v, "Min": v, "Mean": v, "Norm": v}
    if precision == "high" or dtype in INTS or dtype == "float64":
        x = values.astype(np.float32).astype(np.float64)
        rt = "float32"
    else:
        x = values.astype(np.float64)
        rt = dtype
    has_nan = bool(np.isnan(x).any())
    with np.errstate(all="ignore"):  # inf - inf and fp16 overflow are part of what is tested
        return {
            "Max": math.nan if has_nan else float(np.max(x)),
            "Min": math.nan if has_nan else float(np.min(x)),
            "Mean": round_to(np.mean(x), rt),
            "Norm": round_to(np.linalg.norm(x.ravel()), rt),
        }


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 17), (4, 0, 2), (65539,)]


def test_stats_match_numpy_for_every_dtype_shape_and_precision(tmp_path):
    rng = np.random.default_rng(1234)
    cases = []
    for dtype in ALL_DTYPES:
        specials = [None, "nan", "inf", "posinf"] if dtype in ("float32", "float16", "float64", "bfloat16") else [None]
        for shape in SHAPES:
            for special in specials:
                for precision in ("low", "high"):
                    raw, arr = make_data(rng, dtype, shape, special)
                    path = tmp_path / f"c{len(cases)}.bin"
                    path.write_bytes(raw)
                    shape_arg = "scalar" if shape == () else ",".join(map(str, shape))
                    cases.append((dtype, shape, special, precision, raw, arr, f"{dtype} {shape_arg} {precision} {path}"))
    # Bool corner cases: all true, all false.
    for fill in (True, False):
        arr = np.full((9,), fill)
        path = tmp_path / f"c{len(cases)}.bin"
        path.write_bytes(arr.tobytes())
        cases.append(("bool", (9,), None, "low", arr.tobytes(), arr, f"bool 9 low {path}"))
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("\n".join(c[-1] for c in cases) + "\n")
    out = probe("stats", manifest).stdout.splitlines()
    assert len(out) == len(cases)
    for (dtype, shape, special, precision, raw, arr, line), text in zip(cases, out):
        got = json.loads(text)
        want = expected_stats(dtype, arr, precision)
        for key in ("Max", "Min", "Mean", "Norm"):
            assert same(got[key], want[key]), (line, special, key, got[key], want[key])
        assert got["crc"] == f"{zlib.crc32(raw):08x}", line
        if dtype == "bfloat16":
            assert got["crc_bf16_as_f32"] == f"{zlib.crc32(bf16_to_f32(arr).tobytes()):08x}", line
        values = bf16_to_f32(arr) if dtype == "bfloat16" else arr
        if values.dtype.kind == "f":
            assert got["nan"] == int(np.isnan(values).sum())
            assert got["pinf"] == int(np.isposinf(values).sum())
            assert got["ninf"] == int(np.isneginf(values).sum())
        assert got["count"] == arr.size


def test_low_precision_is_what_the_native_dtype_reduction_reports(tmp_path):
    """Mean and Norm are values of the tensor's dtype, as a native-dtype torch/numpy reduction reports them, and
    agree with numpy's own native reduction up to one ulp plus that reduction's accumulation error."""
    rng = np.random.default_rng(5)
    lines, natives = [], []
    for dtype in ("float16", "float32"):
        for i in range(20):
            arr = (rng.standard_normal(1000 + i) * 10).astype(NUMPY_TYPES[dtype])
            path = tmp_path / f"{dtype}{i}.bin"
            path.write_bytes(arr.tobytes())
            lines.append(f"{dtype} {arr.size} low {path}")
            natives.append((dtype, arr))
    manifest = tmp_path / "m.txt"
    manifest.write_text("\n".join(lines) + "\n")
    eps32 = float(np.finfo(np.float32).eps)
    for text, (dtype, arr) in zip(probe("stats", manifest).stdout.splitlines(), natives):
        got = json.loads(text)
        t = NUMPY_TYPES[dtype]
        mean = np.mean(arr)  # float32 accumulation for both dtypes, result in the dtype
        norm = np.sqrt(np.sum(arr.astype(np.float32) ** 2)).astype(t)
        log_n = math.ceil(math.log2(arr.size))
        mean_tol = float(np.spacing(t(abs(mean)))) + eps32 * log_n * float(np.mean(np.abs(arr.astype(np.float64))))
        norm_tol = float(np.spacing(t(norm))) + eps32 * log_n * float(norm)
        assert abs(got["Mean"] - float(mean)) <= mean_tol, (dtype, got, mean)
        assert abs(got["Norm"] - float(norm)) <= norm_tol, (dtype, got, norm)
        assert float(t(got["Mean"])) == got["Mean"] and float(t(got["Norm"])) == got["Norm"]


def test_crc32_matches_zlib(tmp_path):
    rng = np.random.default_rng(9)
    blobs = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in list(range(0, 70)) + [1000, 4099, 1 << 20]]
    blobs.append(b"123456789")
    lines = []
    for i, b in enumerate(blobs):
        path = tmp_path / f"b{i}.bin"
        path.write_bytes(b)
        lines.append(f"uint8 {len(b)} low {path}")
    manifest = tmp_path / "m.txt"
    manifest.write_text("\n".join(lines) + "\n")
    for text, b in zip(probe("stats", manifest).stdout.splitlines(), blobs):
        assert json.loads(text)["crc"] == f"{zlib.crc32(b):08x}"
    # msprobe's unit-test vector.
    assert f"{zlib.crc32(struct.pack('<2f', 1, 2)):08x}" == "2e3fa576"


# ---- npy -------------------------------------------------------------------------------------------------------
NPY_SHAPES = [(), (0,), (5,), (2, 3), (2, 0, 3), (1,) * 8, (3, 1, 4, 1, 5)]


def test_npy_files_load_with_numpy_for_every_dtype_and_shape(tmp_path):
    rng = np.random.default_rng(77)
    cases = []
    for dtype in ALL_DTYPES:
        for shape in NPY_SHAPES:
            for version in ("v1", "v2"):
                raw, arr = make_data(rng, dtype, shape, "nan" if dtype.startswith(("float", "bfloat")) else None)
                src = tmp_path / f"s{len(cases)}.bin"
                src.write_bytes(raw)
                out = tmp_path / f"o{len(cases)}.npy"
                shape_arg = "scalar" if shape == () else ",".join(map(str, shape))
                cases.append((dtype, shape, version, arr, out, f"{dtype} {shape_arg} {src} {out} {version}"))
    manifest = tmp_path / "m.txt"
    manifest.write_text("\n".join(c[-1] for c in cases) + "\n")
    probe("npy", manifest)
    for dtype, shape, version, arr, out, line in cases:
        blob = out.read_bytes()
        assert blob[6] == (2 if version == "v2" else 1), line
        hlen = struct.unpack("<H", blob[8:10])[0] if blob[6] == 1 else struct.unpack("<I", blob[8:12])[0]
        offset = (10 if blob[6] == 1 else 12) + hlen
        assert offset % 64 == 0, line
        loaded = np.load(out)
        want = bf16_to_f32(arr) if dtype == "bfloat16" else arr
        assert loaded.dtype == want.dtype, line
        assert loaded.shape == shape, line
        assert loaded.tobytes() == want.tobytes(), line  # bitwise, NaN included
        assert not loaded.flags.f_contiguous or loaded.ndim <= 1 or 1 in shape or 0 in shape
        assert (os.stat(out).st_mode & 0o002) == 0  # compare refuses files writable by others


def test_npy_header_over_64k_switches_to_version_2(tmp_path):
    dims = [1] * 30000
    src = tmp_path / "one.bin"
    src.write_bytes(np.array([3.5], dtype=np.float32).tobytes())
    out = tmp_path / "big.npy"
    (tmp_path / "m.txt").write_text(f"float32 {','.join(map(str, dims))} {src} {out}\n")
    probe("npy", tmp_path / "m.txt")
    with open(out, "rb") as fh:
        assert np.lib.format.read_magic(fh) == (2, 0)
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=1 << 20)
        assert shape == tuple(dims) and not fortran and dtype == np.float32
        assert fh.tell() % 64 == 0
        assert np.frombuffer(fh.read(), dtype=np.float32).tolist() == [3.5]


def test_npy_reader_on_files_numpy_wrote(tmp_path):
    rng = np.random.default_rng(3)
    for dtype in NUMPY_TYPES:
        for shape in NPY_SHAPES:
            _, arr = make_data(rng, dtype, shape)
            path = tmp_path / f"{dtype}_{len(shape)}_{arr.size}.npy"
            np.save(path, arr)
            info = json.loads(probe("npyinfo", path).stdout)
            assert info["dtype"] == dtype
            assert info["descr"] == np.lib.format.dtype_to_descr(arr.dtype)
            assert tuple(info["shape"]) == shape
            assert info["data_bytes"] == arr.nbytes
            assert info["data_offset"] == os.path.getsize(path) - arr.nbytes
    f = tmp_path / "fortran.npy"
    np.save(f, np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))
    assert json.loads(probe("npyinfo", f).stdout)["fortran_order"] is True
    c = tmp_path / "complex.npy"
    np.save(c, np.zeros(3, dtype=np.complex64))
    info = json.loads(probe("npyinfo", c).stdout)
    assert info["dtype"] == "raw" and info["data_bytes"] == 24


def test_npy_reader_rejects_malformed_files(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.arange(6, dtype=np.float32))
    blob = good.read_bytes()
    bad = {
        "truncated_data": (blob[:-1], "data size mismatch"),
        "extra_data": (blob + b"\0", "data size mismatch"),
        "bad_magic": (b"\x93NUMPZ" + blob[6:], "bad magic"),
        "empty": (b"", "bad magic"),
        "truncated_header": (blob[:40], "truncated header"),
        "pickle": (blob.replace(b"'<f4'", b"'|O' "), "object arrays"),
        "text": (b"hello world, this is not numpy at all", "bad magic"),
    }
    for name, (content, message) in bad.items():
        p = tmp_path / f"{name}.npy"
        p.write_bytes(content)
        r = probe("npyinfo", p, check=False)
        assert r.returncode == 2, name
        assert r.stdout.startswith("error: ") and message in r.stdout and p.name in r.stdout, (name, r.stdout)
        if name not in ("pickle", "extra_data"):  # numpy ignores trailing bytes; we report them
            with pytest.raises(Exception):
                np.load(p, allow_pickle=False)


# ---- fp16 / bf16 conversions ----------------------------------------------------------------------------------
def test_half_to_float_for_every_half(tmp_path):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    (tmp_path / "h.bin").write_bytes(bits.tobytes())
    probe("half", tmp_path / "h.bin", tmp_path / "f.bin")
    got = np.frombuffer((tmp_path / "f.bin").read_bytes(), dtype=np.float32)
    want = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_float_to_half_and_bf16_round_to_nearest_even(tmp_path):
    rng = np.random.default_rng(11)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e-8, 2.0 ** -25,
                         3 * 2.0 ** -25, 2.0 ** -24, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11], dtype=np.float32)
    rand_bits = rng.integers(0, 1 << 32, 400000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.standard_normal(200000) * 1000).astype(np.float32)
    f = np.concatenate([specials, rand_bits, near])
    (tmp_path / "f.bin").write_bytes(f.tobytes())
    probe("tohalf", tmp_path / "f.bin", tmp_path / "h.bin")
    probe("tobf16", tmp_path / "f.bin", tmp_path / "b.bin")
    h = np.frombuffer((tmp_path / "h.bin").read_bytes(), dtype=np.uint16)
    with np.errstate(over="ignore"):
        want = f.astype(np.float16).view(np.uint16)
    nan = np.isnan(f)
    assert np.array_equal(h[~nan], want[~nan])
    assert np.isnan(h[nan].view(np.float16)).all()
    b = np.frombuffer((tmp_path / "b.bin").read_bytes(), dtype=np.uint16)
    assert np.array_equal(b[~nan], f32_to_bf16(f)[~nan])
    assert np.isnan(bf16_to_f32(b[nan])).all()


# ---- Numbers as Python prints them ---------------------------------------------------------------------------
def test_numbers_match_python_repr():
    rng = np.random.default_rng(21)
    values = list(rng.integers(0, 1 << 64, 20000, dtype=np.uint64).view(np.float64))
    values += [float(np.float32(x)) for x in rng.standard_normal(5000) * 10.0 ** rng.integers(-30, 30, 5000)]
    values += [float(np.float16(x)) for x in rng.standard_normal(2000) * 100]
    values += [float(i) for i in range(-1000, 1000)] + [10.0 ** e for e in range(-20, 25)]
    values += [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308, 1e16, 9999999999999998.0,
               1e-4, 0.00011, 9.999e-5, 123456789012345678.0]
    stdin = "\n".join(f"{struct.unpack('<Q', struct.pack('<d', float(v)))[0]:016x}" for v in values) + "\n"
    out = probe("repr", stdin=stdin).stdout.splitlines()
    assert len(out) == len(values)
    for v, text in zip(values, out):
        assert text == json.dumps(float(v)), (v, text)


# ---- Names ------------------------------------------------------------------------------------------------------
def reference_part(raw: bytes, fallback: bytes) -> bytes:
    if not raw:
        return fallback
    s = re.sub(rb"[^A-Za-z0-9_-]", b"_", raw)
    return b"_" + s[1:] if s.startswith(b"-") else s


def test_kernel_names_are_sanitized():
    rng = np.random.default_rng(4)
    cases = [(b"Add", b"Default"), (b"..", b".."), (b"/", b"/etc/passwd"), (b"-rf", b"--x"), (b"+Add", b"=1+1"),
             (b"%x", b"@y"), (b"", b""), (b"Matmul", b"train.step/Linear.forward self"), (b"A" * 10240, b"B" * 10240),
             ("中文".encode(), "ＡＢ".encode()), (bytes(range(1, 256)), bytes(range(255, 0, -1)))]
    cases += [(rng.integers(1, 256, 40, dtype=np.uint8).tobytes(), rng.integers(1, 256, 300, dtype=np.uint8).tobytes())
              for _ in range(200)]
    stdin = "\n".join(f"{a.hex()},{b.hex()}" for a, b in cases) + "\n"
    out = probe("names", stdin=stdin).stdout.split("\n")[:-1]
    assert len(out) == len(cases)
    for (a, b), got in zip(cases, out):
        want = reference_part(a, b"Unknown") + b"." + reference_part(b, b"Default")
        assert got.encode() == want
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]*\.[A-Za-z0-9_][A-Za-z0-9_-]*", got)
        assert not re.search(STRING_BLACKLIST, got)
        assert "/" not in got and got not in (".", "..")


def test_csv_safe_text_satisfies_msprobe_blacklist():
    rng = np.random.default_rng(8)
    alphabet = list("+-=%@; ab\n") + ["＋", "－", "＝", "％", "＠", "中"]
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(3000)]
    texts += ["+0x1a libfoo.so", "File /a.py, line 1, in f, \n x = -1", "a;b", ";", ""]
    stdin = "\n".join(t.encode().hex() for t in texts) + "\n"
    out = probe("csvsafe", stdin=stdin).stdout.split("\n")[:-1]
    assert len(out) == len(texts)
    for t, h in zip(texts, out):
        got = bytes.fromhex(h).decode()
        assert not re.search(STRING_BLACKLIST, got), (t, got)
        if not re.search(STRING_BLACKLIST, t):
            assert got == t
        assert got.replace(" ", "") == t.replace(" ", "")  # only spaces were inserted


def test_long_names_get_32_digits_and_a_mapping_row(tmp_path):
    short = "Add.Default.0.forward.input.0.npy"
    r = probe("create", tmp_path, short.encode().hex()).stdout.split("\n")
    assert r[0] == short and r[1] == ""
    long = "Matmul." + "L" * 300 + ".0.output.0.npy"
    rows = []
    for _ in range(3):
        r = probe("create", tmp_path, long.encode().hex()).stdout.split("\n")
        assert re.fullmatch(r"[0-9]{32}\.npy", r[0]), r
        assert r[1] == f"{r[0]},{long}"
        assert (tmp_path / r[0]).read_bytes() == b"payload"
        rows.append(r[1])
    assert len({row.split(",")[0] for row in rows}) == 3
    assert (tmp_path / "mapping.csv").read_text() == "".join(row + "\n" for row in rows)  # no header
    assert (tmp_path / short).read_bytes() == b"payload"
    for bad in ("..", ".", "../escape.npy", "a/b.npy"):
        r = probe("create", tmp_path, bad.encode().hex(), check=False)
        assert r.returncode == 1 and "unsafe file name" in r.stderr
    assert not (tmp_path.parent / "escape.npy").exists()


# ---- JSON files ---------------------------------------------------------------------------------------------------
def walk_strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from walk_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk_strings(v)


@pytest.mark.parametrize("framework", ["mindspore", "pytorch"])
def test_dump_json_journal_stack_and_construct(tmp_path, framework):
    probe("journal", tmp_path, framework)
    ms = framework == "mindspore"
    names = ["Add.Default.0.forward", "Mixed.net_layer_0_fwd.3.forward", "Custom.Default.0.forward"]

    # Every snapshot (the file after begin and after each append, as it is) is valid JSON holding a prefix of the
    # entries.
    for i in range(len(names) + 1):
        snap = json.loads((tmp_path / f"snap_{i}.json").read_text())
        assert list(snap["data"]) == names[:i]
    repaired = list((tmp_path / "repaired").iterdir())
    assert len(repaired) > 50
    for p in repaired:
        data = json.loads(p.read_text())["data"]
        assert list(data) == names[: len(data)], p.name

    raw = (tmp_path / "dump.json").read_bytes()
    assert raw.isascii()
    d = json.loads(raw)
    assert list(d) == ["task", "level", "framework", "host_framework", "dump_data_dir", "data"]
    assert d["task"] == "tensor" and d["level"] == "L2" and d["framework"] == framework
    assert d["host_framework"] == ("pytorch" if not ms else "acl")
    assert d["dump_data_dir"] == str(tmp_path / "dump_tensor_data")
    assert list(d["data"]) == names
    for s in walk_strings(d):
        assert not re.search(STRING_BLACKLIST, s), s

    add = d["data"]["Add.Default.0.forward"]
    assert list(add) == ["input_args", "output", "launch"]
    assert list(add["launch"]) == ["index", "task_id", "stream_id", "timestamp"]
    assert add["launch"]["timestamp"] == 1733905446819790
    t0 = add["input_args"][0]
    assert list(t0) == ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "md5", "data_name", "format",
                        "stride", "offset"]
    assert t0["type"] == ("mindspore.Tensor" if ms else "torch.Tensor")
    assert t0["dtype"] == ("Float32" if ms else "torch.float32")
    assert t0["shape"] == [2]
    assert (t0["Max"], t0["Min"], t0["Mean"], t0["Norm"]) == (2.0, 1.0, 1.5, 2.2360680103302)
    assert t0["md5"] == f"{zlib.crc32(struct.pack('<2f', 1, 2)):08x}" == "2e3fa576"
    assert t0["data_name"] == "Add.Default.0.forward.input.0.npy"
    assert (t0["format"], t0["stride"], t0["offset"]) == ("ND", [1], 0)
    h = add["input_args"][1]
    assert h["dtype"] == ("Float16" if ms else "torch.float16")
    assert h["Mean"] == float(np.mean(np.array([1, 4, 2], dtype=np.float16)))
    assert h["Norm"] == float(np.float16(math.sqrt(21)))
    assert add["input_args"][2] == {"type": "float", "value": 1.0}
    o = add["output"][0]
    assert all(math.isnan(o[k]) for k in ("Max", "Min", "Mean", "Norm"))

    mixed = d["data"]["Mixed.net_layer_0_fwd.3.forward"]
    assert list(mixed) == ["input_args", "launch", "host_api"]
    assert list(mixed["launch"]) == ["index", "task_id", "stream_id", "timestamp", "device"]
    lst, empty, inf, tup, text, dbl, bools, flag, none = mixed["input_args"]
    assert lst[0]["dtype"] == ("Bool" if ms else "torch.bool")
    assert (lst[0]["Max"], lst[0]["Min"], lst[0]["Mean"], lst[0]["Norm"]) == (True, False, None, None)
    assert lst[1] is None
    assert lst[2]["shape"] == [] and lst[2]["Max"] == -42 and type(lst[2]["Norm"]) is int
    assert (empty["shape"], empty["Max"], empty["Norm"]) == ([0], None, None)
    assert (inf["Max"], inf["Min"], inf["Norm"]) == (math.inf, -math.inf, math.inf) and math.isnan(inf["Mean"])
    # sequences: lists of scalar leaves, as msprobe writes them (a list value aborts its compare)
    assert tup == [{"type": "int", "value": -1}, {"type": "int", "value": 9223372036854775807}]
    assert text == {"type": "str", "value": " -\"quoted\"\n中\ufffd"}
    assert all(x["type"] == "float" for x in dbl)
    dbl = [x["value"] for x in dbl]
    assert dbl[:4] == [0.1, -0.0, 1e-07, 1e16] and math.isnan(dbl[4])
    assert math.copysign(1, dbl[1]) == -1
    assert bools == [{"type": "bool", "value": False}, {"type": "bool", "value": True}]
    assert flag["value"] is False and none == {"type": "NoneType", "value": None}
    assert (mixed["launch"]["task_id"], mixed["launch"]["stream_id"], mixed["host_api"], mixed["launch"]["device"]) == \
        (7, 2, "aclnnMixed", 0)

    custom = d["data"]["Custom.Default.0.forward"]
    assert custom["input_args"] == []
    assert custom["output"][0]["dtype"] == "Complex64" and custom["output"][0]["Max"] is None

    stack = json.loads((tmp_path / "stack.json").read_text())
    assert list(stack) == ["0", "1"]
    assert stack["0"][0] == ["Add.Default.0.forward", "Custom.Default.0.forward"]
    assert stack["0"][1] == ["File /w/train.py, line 42, in forward, \n output = F.relu(x)", " +0x1a libfoo.so",
                             " @decorated; =x", " ＋fullwidth"]
    assert stack["1"] == [["Mixed.net_layer_0_fwd.3.forward"], ["The call stack retrieval failed."]]
    for s in walk_strings(stack):
        assert not re.search(STRING_BLACKLIST, s), s

    construct = json.loads((tmp_path / "construct.json").read_text())
    assert construct == {n: None for n in names} and list(construct) == names
