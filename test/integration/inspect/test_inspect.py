"""msprobe-inspect summary / show / verify / repair / convert on REAL dumps of examples/train.py made by the shim.

Expected values come from the dump itself, read with Python's json module and numpy, never from the tool.
"""
import collections
import functools
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from inspect_support import folders, inspect, load_dump, make_dump, stack_of, tensors_of

COMMANDS = ["summary", "show", "verify", "repair", "compare", "convert"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """dumps(kind): one train.py run per kind, made on first use and shared by the module's tests."""
    root = tmp_path_factory.mktemp("inspect")
    kinds = {
        "tensor": dict(steps=3),                                              # fp32, npy
        "stats": dict(steps=2, dtype="bf16", ranks=2, task="statistics"),     # statistics only, 2 ranks
        "md5": dict(steps=1, MSPROBE_SUMMARY_MODE="md5"),                     # CRC-32 in "md5"
        "bin": dict(steps=1, dtype="bf16", MSPROBE_FILE_FORMAT="bin", MSPROBE_SUMMARY_MODE="md5"),
    }

    @functools.lru_cache(maxsize=None)
    def get(kind):
        return make_dump(root / kind, **kinds[kind])
    return get


def copy_of(src, tmp_path):
    dst = tmp_path / "dump"
    shutil.copytree(src, dst, symlinks=True)
    return dst


def problems(stdout):
    """verify's problem lines (everything but its last, summary line)."""
    lines = stdout.strip().splitlines()
    assert lines and lines[-1].startswith("verify: ")
    return lines[:-1]


# ---- usage ---------------------------------------------------------------------------------------------------------
def test_help_and_usage_errors(dumps, tmp_path):
    r = inspect("--help", expect=0)
    for c in COMMANDS:
        assert re.search(rf"^\s+{c}\s", r.stdout, re.M), c
    for c in COMMANDS:
        assert inspect(c, "--help", expect=0).stdout.startswith(f"usage: msprobe-inspect {c}")
    assert inspect(expect=2).stderr.startswith("usage:")
    assert "unknown command 'frobnicate'" in inspect("frobnicate", expect=2).stderr
    missing = tmp_path / "no_such_dump"
    assert f"{missing}: no such file or directory" in inspect("summary", missing, expect=2).stderr
    (tmp_path / "empty").mkdir()
    assert "no dump found" in inspect("verify", tmp_path / "empty", expect=2).stderr
    d = dumps("md5")
    assert "unknown option '--bogus'" in inspect("summary", d, "--bogus", expect=2).stderr
    assert "missing argument" in inspect("compare", d, expect=2).stderr
    assert "--atol 'x' is not a number" in inspect("compare", d, d, "--atol", "x", expect=2).stderr
    assert "--cos '2' is out of range" in inspect("compare", d, d, "--cos=2", expect=2).stderr
    assert "--precision 'medium'" in inspect("verify", d, "--precision", "medium", expect=2).stderr
    assert "missing argument" in inspect("show", d, expect=2).stderr


# ---- summary -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tensor", "stats"])
def test_summary_counts_equal_the_dump(dumps, kind):
    root = dumps(kind)
    s = json.loads(inspect("summary", root, "--json", expect=0).stdout)
    ops, kernels, tensors, files, nbytes, steps, ranks, tasks = collections.Counter(), 0, 0, 0, 0, set(), [], set()
    for f in folders(root):
        d = load_dump(f)
        tasks.add(d["task"])
        kernels += len(d["data"])
        ops.update(name.split(".")[0] for name in d["data"])
        tensors += sum(len(tensors_of(e)) for e in d["data"].values())
        steps.add(int(f.parent.name[4:]))
        if f.name not in ranks:
            ranks.append(f.name)
        tdir = f / "dump_tensor_data"
        if tdir.is_dir():
            for p in tdir.iterdir():
                if p.name != "mapping.csv":
                    files += 1
                    nbytes += p.stat().st_size
    assert s["kernels"] == kernels > 0
    assert s["op_types"] == dict(ops)
    assert s["tensors"] == tensors
    assert s["tensor_files"] == files and s["tensor_bytes"] == nbytes
    assert s["steps"] == sorted(steps)
    assert s["ranks"] == ranks
    assert s["tasks"] == sorted(tasks)
    assert len(s["folders"]) == len(folders(root))
    assert all(v is None for v in s["first_nan_inf"].values())  # a healthy run
    if kind == "stats":
        assert files == 0 and ranks == ["rank0", "rank1"]
    else:
        assert files == tensors

    text = inspect("summary", root, expect=0).stdout
    assert re.search(rf"^kernels\s+{kernels} in {len(folders(root))} folder", text, re.M)
    for op, n in ops.items():
        assert re.search(rf"^  {op}\s+{n}$", text, re.M), op
    assert "none" in text.split("first NaN/Inf")[1]


def test_summary_finds_the_first_nan_per_rank_with_its_stack(dumps, tmp_path):
    root = copy_of(dumps("stats"), tmp_path)
    # rank1: a NaN in a late kernel and an Inf in an earlier one (by launch_index) of step 0, one more in step 1.
    plan = {("step0", "rank1"): [(-3, "Max", float("nan")), (5, "Norm", float("inf"))],
            ("step1", "rank1"): [(0, "Min", float("-inf"))],
            ("step1", "rank0"): [(7, "Mean", float("nan"))]}
    expected = {}
    for (step, rank), edits in plan.items():
        path = root / step / rank / "dump.json"
        d = json.loads(path.read_text())
        by_launch = sorted(d["data"], key=lambda k: d["data"][k]["launch"]["index"])
        for pos, stat, value in edits:
            name = by_launch[pos]
            row, t = tensors_of(d["data"][name])[-1]
            t[stat] = value
            cand = (int(step[4:]), d["data"][name]["launch"]["index"], name, row, stat, value)
            expected[rank] = min(expected.get(rank, cand), cand)
        path.write_text(json.dumps(d, indent=1))  # msprobe's own layout: the reader must not rely on ours
    first1 = expected["rank1"]
    (root / "step0" / "rank1" / "stack.json").write_text(json.dumps(
        {"0": [["Other.Default.0"], ["nothing"]], "1": [[first1[2]], ["File \"train.py\", line 9, in forward",
                                                                       "libopapi.so(aclnnGelu+0x10)"]]}))
    s = json.loads(inspect("summary", root, "--json", expect=0).stdout)
    for rank in ("rank0", "rank1"):
        step, launch, name, row, stat, value = expected[rank]
        hit = s["first_nan_inf"][rank]
        assert (hit["folder"], hit["kernel"], hit["launch_index"], hit["tensor"], hit["stat"]) == \
            (f"step{step}/{rank}", name, launch, row, stat)
        assert hit["value"] == {"nan": "nan", "inf": "inf", "-inf": "-inf"}[repr(value)]
    assert s["first_nan_inf"]["rank1"]["stack"] == ["File \"train.py\", line 9, in forward",
                                                    "libopapi.so(aclnnGelu+0x10)"]
    step0, launch0, name0 = expected["rank0"][:3]
    assert s["first_nan_inf"]["rank0"]["stack"] == stack_of(root / f"step{step0}" / "rank0", name0)
    text = inspect("summary", root, expect=0).stdout
    assert f"step0/rank1 {first1[2]} (launch_index {first1[1]}): {first1[3]} {first1[4]}=" in text
    assert "libopapi.so(aclnnGelu+0x10)" in text


# ---- show ----------------------------------------------------------------------------------------------------------
def launch_order(entries, op):
    return sorted((k for k in entries if k.split(".")[0] == op), key=lambda k: entries[k]["launch"]["index"])


def test_show_prints_the_right_entry(dumps):
    root = dumps("tensor")
    f0, f1 = folders(root)[0], folders(root)[1]
    d0, d1 = load_dump(f0)["data"], load_dump(f1)["data"]
    first_gelu = launch_order(d0, "Gelu")[0]
    assert first_gelu.startswith("Gelu.") and first_gelu.endswith(".0.forward")
    out = inspect("show", root, "Gelu#0", expect=0).stdout
    assert out.startswith(f"{first_gelu}  ({f0.parent.name}/{f0.name}, tensor)")
    assert f"launch_index {d0[first_gelu]['launch']['index']}" in out
    for row, t in tensors_of(d0[first_gelu]):
        assert f"Max {t['Max']!r}  Min {t['Min']!r}  Mean {t['Mean']!r}  Norm {t['Norm']!r}" in out
        assert f"file dump_tensor_data/{t['data_name']} (" in out
    # --json: exactly the entry of dump.json.
    j = json.loads(inspect("show", root, first_gelu, "--json", expect=0).stdout)
    assert j["kernel"] == first_gelu and j["entry"] == d0[first_gelu]
    assert j["stack"] == stack_of(f0, first_gelu)
    # Unique prefix, OpType#k in launch order, another step.
    assert inspect("show", root, first_gelu[:-2], "--json", expect=0).stdout == inspect(
        "show", root, first_gelu, "--json", expect=0).stdout
    mm = launch_order(d0, "Matmul")
    assert json.loads(inspect("show", root, "Matmul#2", "--json", expect=0).stdout)["kernel"] == mm[2]
    j1 = json.loads(inspect("show", root, "Gelu#0", "--step", "1", "--json", expect=0).stdout)
    assert j1["folder"] == f"{f1.parent.name}/{f1.name}" and j1["entry"] == d1[launch_order(d1, "Gelu")[0]]
    # Non-tensor arguments are shown with their values.
    adam = launch_order(d0, "ApplyAdamWV2")[0]
    out = inspect("show", root, adam, expect=0).stdout
    for i, a in enumerate(d0[adam]["input_args"]):
        if isinstance(a, dict) and "value" in a:
            assert re.search(rf"^\s+{i}\s+{a['type']} {json.dumps(a['value'])}$", out, re.M), (i, a)
        if a is None:
            assert re.search(rf"^\s+{i}\s+absent$", out, re.M)


def test_show_rank_and_selector_errors(dumps):
    root = dumps("stats")
    d = load_dump(root / "step0" / "rank1")["data"]
    j = json.loads(inspect("show", root, "Softmax#0", "--rank", "1", "--json", expect=0).stdout)
    assert j["folder"] == "step0/rank1" and j["entry"] == d[launch_order(d, "Softmax")[0]]
    r = inspect("show", root, "Matmul", expect=2)
    assert "'Matmul' is the prefix of" in r.stderr and launch_order(d, "Matmul")[0] in r.stderr
    assert "no kernel named or starting with 'Nope'" in inspect("show", root, "Nope", expect=2).stderr
    assert "only " in inspect("show", root, "Gelu#99", expect=2).stderr
    assert "no folder for step 7" in inspect("show", root, "Gelu#0", "--step", "7", expect=2).stderr


# ---- verify --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tensor", "stats", "md5", "bin"])
def test_verify_passes_a_clean_dump(dumps, kind):
    root = dumps(kind)
    r = inspect("verify", root, expect=0)
    kernels = sum(len(load_dump(f)["data"]) for f in folders(root))
    assert re.search(rf"verify: {len(folders(root))} folder\(s\), {kernels} kernels, .*: OK$", r.stdout.strip())


def npy_data_offset(path):
    with open(path, "rb") as f:
        head = f.read(12)
    major = head[6]
    return 10 + int.from_bytes(head[8:10], "little") if major == 1 else 12 + int.from_bytes(head[8:12], "little")


def flip_byte(path, element=5):
    """Flips an exponent bit of one float32 element (a big change: statistics and CRC must notice)."""
    off = npy_data_offset(path) + 4 * element + 3
    b = bytearray(path.read_bytes())
    b[off] ^= 0x40
    path.write_bytes(bytes(b))


def kernel_named(folder, op, k=0):
    """The k-th kernel of op type `op` in launch order (names carry the Python scope: select by op type)."""
    return launch_order(load_dump(folder)["data"], op)[k]


def damage(kind, root):
    """Damages a copy of a dump; returns (what verify must say, the file it must name)."""
    f = folders(root)[0]
    tdir = f / "dump_tensor_data"
    name = kernel_named(f, "Gelu") + ".output.0.npy"
    if kind == "truncated":
        p = tdir / name
        p.write_bytes(p.read_bytes()[:-10])
        return "data size mismatch", name
    if kind in ("flipped", "flipped-crc"):
        flip_byte(tdir / name)
        return ("md5 (CRC-32)" if kind == "flipped-crc" else "recomputed from the file"), name
    if kind == "missing":
        (tdir / name).unlink()
        return "missing file", name
    if kind == "stale-mapping":
        stale = "1" * 32 + ".npy"
        with open(tdir / "mapping.csv", "a") as m:
            m.write(f"{stale},{'Gelu.' + 'x' * 260}.output.0.npy\n")
        return "stale row", stale
    if kind == "orphan":
        (tdir / "Extra.Default.0.output.0.npy").write_bytes(b"x")
        return "orphan file", "Extra.Default.0.output.0.npy"
    if kind == "shape":
        p = tdir / name
        a = np.load(p)
        np.save(p, a.reshape(-1))
        return "the file's shape is", name
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["truncated", "flipped", "flipped-crc", "missing", "stale-mapping", "orphan", "shape"])
def test_verify_catches_damage(dumps, tmp_path, kind):
    root = copy_of(dumps("md5" if kind == "flipped-crc" else "tensor"), tmp_path)
    message, name = damage(kind, root)
    r = inspect("verify", root, expect=1)
    lines = problems(r.stdout)
    assert lines, r.stdout
    # A precise list: every line is about the damaged file, and one says what is wrong with it.
    assert all(name in line for line in lines), r.stdout
    assert any(message in line for line in lines), r.stdout
    assert all(line.startswith("step0/rank: ") for line in lines), r.stdout
    assert r.stdout.strip().endswith(f"{len(lines)} problem(s)")


def test_verify_lists_every_mismatch_and_follows_mapping(dumps, tmp_path):
    root = copy_of(dumps("tensor"), tmp_path)
    f = folders(root)[0]
    tdir = f / "dump_tensor_data"
    # A long name the collector would have replaced: file renamed, data_name and mapping.csv updated. Clean.
    old = kernel_named(f, "Matmul", 1) + ".output.0.npy"
    new = "98765432109876543210987654321098.npy"
    (tdir / old).rename(tdir / new)
    text = (f / "dump.json").read_text()
    assert text.count(f'"{old}"') == 1
    (f / "dump.json").write_text(text.replace(f'"{old}"', f'"{new}"'))
    (tdir / "mapping.csv").write_text(f"{new},Matmul.{'y' * 250}.output.0.npy\n")
    assert inspect("verify", root, expect=0).stdout.strip().endswith("OK")
    # Three kinds of damage at once: all three are listed.
    add = kernel_named(f, "Add") + ".output.0.npy"
    (tdir / add).unlink()
    (tdir / "stray.bin").write_bytes(b"")
    flip_byte(tdir / new)
    lines = problems(inspect("verify", root, expect=1).stdout)
    assert any(f"{add}: missing file" in x for x in lines)
    assert any("stray.bin: orphan file" in x for x in lines)
    assert any(new in x and "recomputed" in x for x in lines)


def test_verify_reports_a_cut_dump_json(dumps, tmp_path):
    root = copy_of(dumps("stats"), tmp_path)
    p = root / "step0" / "rank0" / "dump.json"
    p.write_bytes(p.read_bytes()[:-200])
    lines = problems(inspect("verify", root, expect=1).stdout)
    assert any(x.startswith("step0/rank0: dump.json was not closed (the run that wrote it was killed or crashed): its ")
               and "'msprobe-inspect repair' closes it" in x for x in lines), lines


# ---- repair --------------------------------------------------------------------------------------------------------
def cut_mid_entry(path, entry):
    """Cuts a journal in the middle of its `entry`-th member line (counting from 0); returns the cut bytes."""
    text = path.read_bytes()
    lines = text.split(b"\n")
    start = sum(len(x) + 1 for x in lines[:entry + 1])  # line 0 is the header
    cut = text[:start + len(lines[entry + 1]) // 2]
    path.write_bytes(cut)
    return cut


def test_repair_restores_a_cut_dump(dumps, tmp_path):
    root = copy_of(dumps("tensor"), tmp_path)
    f = folders(root)[0]
    original = load_dump(f)
    names = list(original["data"])
    keep = len(names) // 2
    cut = cut_mid_entry(f / "dump.json", keep)
    construct_cut = cut_mid_entry(f / "construct.json", keep + 3)
    with pytest.raises(ValueError):
        json.loads(cut)

    r = inspect("repair", root, "--dry-run", expect=0)
    assert "would be repaired" in r.stdout and (f / "dump.json").read_bytes() == cut

    r = inspect("repair", root, expect=0)
    label = f"{f.parent.name}/{f.name}"
    assert f"{label}/dump.json: repaired, {keep} entries survived" in r.stdout, r.stdout
    # dump.json is the truth: construct.json, cut 3 kernels later, is rebuilt with exactly dump.json's kernels.
    assert (f"{label}/construct.json: rebuilt from dump.json, {keep} entries (it was cut mid-entry; "
            f"it named 3 kernels dump.json lacks") in r.stdout, r.stdout
    repaired = load_dump(f)
    assert list(repaired["data"]) == names[:keep]
    assert all(repaired["data"][k] == original["data"][k] for k in names[:keep])
    assert {k: v for k, v in repaired.items() if k != "data"} == {k: v for k, v in original.items() if k != "data"}
    assert list(json.loads((f / "construct.json").read_text())) == names[:keep]
    assert (f / "dump.json.bak").read_bytes() == cut
    assert (f / "construct.json.bak").read_bytes() == construct_cut
    # stack.json no longer names the dropped kernels, and their tensor files are out of dump_tensor_data/.
    for _, (kernels, _frames) in json.loads((f / "stack.json").read_text()).items():
        assert set(kernels) <= set(names[:keep])
    assert f"{label}/dump_tensor_data: " in r.stdout and "never reached dump.json moved to repair_set_aside/" in r.stdout, r.stdout
    # Every other folder was intact; a second run finds nothing to do.
    assert re.search(r"repair: \d+ file\(s\) intact, 3 repaired, 0 cannot", r.stdout), r.stdout
    assert re.search(r"repair: \d+ file\(s\) intact, 0 repaired, 0 cannot", inspect("repair", root, expect=0).stdout)
    # verify passes on what survived.
    inspect("verify", root, expect=0)


def test_repair_says_when_nothing_can_be_recovered(dumps, tmp_path):
    root = copy_of(dumps("md5"), tmp_path)
    f = folders(root)[0]
    (f / "dump.json").write_bytes(b"")
    r = inspect("repair", root, expect=1)
    assert "dump.json: cannot repair: the file is empty: nothing to recover" in r.stdout


def test_repair_of_a_run_killed_before_its_first_kernel(tmp_path):
    """A run killed before its first kernel was written leaves only its rank lock in the dump root: repair removes
    it (it once answered "no dump found" and left it, the kill-stress flake of an early kill). A lock still held
    is said and left; a folder with nothing at all is still not a dump."""
    import fcntl
    root = tmp_path / "dump"
    root.mkdir()
    (root / ".msprobe_shim.rank.lock").write_text("123456789\n")
    r = inspect("repair", root, "--dry-run", expect=0)
    assert ".msprobe_shim.rank.lock: a killed run's rank lock (pid 123456789): would be removed" in r.stdout
    assert (root / ".msprobe_shim.rank.lock").exists()
    held = root / ".msprobe_shim.rank1.lock"
    held.write_text(f"{os.getpid()}\n")
    fd = os.open(held, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = inspect("repair", root, expect=1)
        assert ".msprobe_shim.rank.lock: a killed run's rank lock (pid 123456789): removed" in r.stdout
        assert f".msprobe_shim.rank1.lock: held by a running process (pid {os.getpid()}): left alone" in r.stdout
        assert sorted(p.name for p in root.iterdir()) == [".msprobe_shim.rank1.lock"]
    finally:
        os.close(fd)
    inspect("repair", root, expect=0)
    assert list(root.iterdir()) == []
    r = inspect("repair", root, expect=2)
    assert "no dump found" in r.stderr


# ---- convert -------------------------------------------------------------------------------------------------------
MS_DTYPES = {"Float32": np.float32, "Float16": np.float16, "Float64": np.float64, "Int64": np.int64,
             "Int32": np.int32, "Int16": np.int16, "Int8": np.int8, "UInt8": np.uint8, "Bool": np.bool_}


def read_bin(path, dtype, shape):
    raw = path.read_bytes()
    if dtype == "BFloat16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return np.frombuffer(raw, MS_DTYPES[dtype]).reshape(shape)


def test_convert_bin_to_npy(dumps, tmp_path):
    root = copy_of(dumps("bin"), tmp_path)
    expected = {}
    for f in folders(root):
        for name, e in load_dump(f)["data"].items():
            for row, t in tensors_of(e):
                assert t["data_name"].endswith(".bin")
                expected[(f, t["data_name"][:-4] + ".npy")] = read_bin(f / "dump_tensor_data" / t["data_name"],
                                                                       t["dtype"], t["shape"])
    assert any(t.dtype == np.float32 for t in expected.values())
    r = inspect("convert", root, expect=0)
    assert f"convert: {len(expected)} converted, 0 already npy, 0 not converted" in r.stdout
    for (f, npy), want in expected.items():
        got = np.load(f / "dump_tensor_data" / npy)
        assert got.dtype == want.dtype and got.shape == want.shape, npy
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), npy
    for f in folders(root):
        assert not list((f / "dump_tensor_data").glob("*.bin"))
        assert all(t["data_name"].endswith(".npy") for e in load_dump(f)["data"].values() for _, t in tensors_of(e))
        assert (f / "dump.json.bak").exists()
    # The converted dump is intact: statistics and CRCs recomputed from the npy files match.
    assert inspect("verify", root, expect=0).stdout.strip().endswith("OK")
    assert inspect("convert", root, expect=0).stdout.strip().endswith("0 converted, %d already npy, 0 not converted"
                                                                      % len(expected))


def test_convert_reports_a_file_that_is_not_lz4(dumps, tmp_path):
    root = copy_of(dumps("bin"), tmp_path)
    f = folders(root)[0]
    text = (f / "dump.json").read_text()
    gelu = kernel_named(f, "Gelu")
    old = gelu + ".output.0.bin"
    (f / "dump.json").write_text(text.replace(f'"{old}"', f'"{old}.lz4"'))
    (f / "dump_tensor_data" / old).rename(f / "dump_tensor_data" / (old + ".lz4"))
    r = inspect("convert", root, expect=1)
    assert f"dump_tensor_data/{old}.lz4: lz4: not a valid lz4 frame" in r.stdout
    assert ", 1 not converted" in r.stdout
    assert (f / "dump_tensor_data" / (old + ".lz4")).exists()
    assert (f / "dump_tensor_data" / (gelu + ".input.0.npy")).exists()
