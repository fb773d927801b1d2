"""The stand-in's single-op dump against the shim's own capture of the same kernels (issue 22).

examples/acl_app --op-dump DIR turns CANN's single-op dump on itself (dump_op_switch "on", dump_mode "all", files
without a callback) while running under the shim with MSPROBE_TASK=tensor: the shim leaves the host's dump to it and
still captures the op-by-op kernels through its own hooks. The dump files are decoded here (u64 header length, a
small protobuf reader, then the tensor bytes; field numbers as in shim/graph/dump_file.h) and each dumped kernel's
tensors must equal the shim's npy files for that kernel, byte for byte.
"""
import os
import re
import struct

import numpy as np
import pytest

import shimtest
from shimtest import run

ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")

# OutputDataType (the dump proto's numbering, not aclDataType's) -> numpy
DTYPES = {1: np.float32, 2: np.float16, 3: np.int8, 4: np.uint8, 5: np.int16, 6: np.uint16, 7: np.int32, 8: np.int64,
          9: np.uint32, 10: np.uint64, 11: np.bool_, 12: np.float64}
NAME = re.compile(r"(?P<type>[^.]+)\.(?P<name>[^.]+)\.(?P<task>\d+)\.(?P<stream>\d+)\.(?P<us>\d{16})")


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """Protobuf wire decoding: field number -> list of values (ints for varints, bytes for payloads)."""
    out, i = {}, 0
    while i < len(b):
        key, i = varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wire}")
        out.setdefault(field, []).append(v)
    return out


def shape(msg):
    packed = fields(msg).get(1, [b""])[0]
    dims, i = [], 0
    while i < len(packed):
        d, i = varint(packed, i)
        dims.append(d)
    return dims


def decode(path):
    """A dump file -> (op_name, inputs, outputs): tensors as numpy arrays in their dumped shapes."""
    data = open(path, "rb").read()
    (h,) = struct.unpack("<Q", data[:8])
    msg, pos = fields(data[8:8 + h]), 8 + h
    tensors = {}
    for field, size_field in ((4, 5), (3, 6)):  # inputs come first in the data section, then outputs
        tensors[field] = []
        for t in msg.get(field, []):
            f = fields(t)
            size = f[size_field][0]
            a = np.frombuffer(data[pos:pos + size], dtype=DTYPES[f[1][0]]).reshape(shape(f[3][0]))
            tensors[field].append(a)
            pos += size
    assert pos == len(data), path
    return msg[6][0].decode(), tensors[4], tensors[3]


@pytest.mark.skipif(not os.path.exists(ACL_APP), reason="acl_app not built")
def test_single_op_dump_files_equal_the_shims_capture_of_the_same_kernels(tmp_path):
    cann = tmp_path / "cann"
    cann.mkdir()
    r = run([ACL_APP, "--op-dump", cann], tmp_path / "a", env={"MSPROBE_TASK": "tensor"}).check()
    files = [p for p in cann.rglob("*") if p.is_file() and p.suffix != ".json"]
    for p in files:  # {dump_path}/{YYYYMMDDhhmmss}/{device}/{file}
        time_dir, device, name = p.relative_to(cann).parts
        assert re.fullmatch(r"\d{14}", time_dir) and device == "0" and NAME.fullmatch(name), p
    by_type = {}
    for p in files:
        by_type.setdefault(NAME.fullmatch(p.name)["type"], []).append(p)
    # aclop Add: its op type twice (inputs before, outputs after); aclnnMul: API (L2) and kernel (L0) level, two
    # each; the raw rt kernel and the HCCL collective are not single ops: no file.
    types = sorted(re.sub(r"_\d+_", "_N_", t) for t in by_type)
    assert types == ["Add", "aclnnMul_N_L0", "aclnnMul_N_L2"], sorted(by_type)
    assert all(len(v) == 2 for v in by_type.values()), by_type

    folder = r.dump.folders()[0]
    captured = {shimtest.op_type(n): e for n, e in folder.entries()}
    kernel_files = {"Add": by_type["Add"], "Mul": next(v for t, v in by_type.items() if t.endswith("_L0"))}
    for op, paths in kernel_files.items():
        decoded = [decode(p) for p in paths]
        assert {d[0] for d in decoded} == {op}
        inputs = next(d[1] for d in decoded if d[1])
        outputs = next(d[2] for d in decoded if d[2])
        entry = captured[op]
        shim_in = [folder.load(t) for t in entry["input_args"][:len(inputs)]]
        shim_out = [folder.load(t) for t in entry["output"][:len(outputs)]]
        assert len(inputs) == 2 and len(outputs) == 1, op
        for dumped, npy in zip(inputs + outputs, shim_in + shim_out):
            assert dumped.dtype == npy.dtype and dumped.shape == npy.shape, op
            assert dumped.tobytes() == npy.tobytes(), op
