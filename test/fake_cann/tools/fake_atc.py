#!/usr/bin/env python3
"""fake_atc: writes the CANN stand-in's model files (its stand-in for ATC and .om; see ../README.md).

A graph spec (JSON, or the dict given to write_model) names the model, its tensors, inputs, outputs, weights and
nodes; the file is b"FAKEOM01" followed by the JSON that libascendcl's aclmdlLoadFromFile/FromMem reads:

    {"name": "toy",
     "tensors": [{"name": "x", "dtype": "float32", "shape": [2, 3], "format": "ND"}, ...],
     "inputs": ["x"], "outputs": ["y"],
     "weights": {"w": [1.0, 2.0, ...]},                  # values, packed in the tensor's dtype
     "nodes": [{"type": "MatMul", "name": "fc/matmul", "inputs": ["x", "w"], "outputs": ["y"],
                "attrs": {"transpose_x2": true}}]}

Usage: fake_atc.py SPEC.json OUTPUT.om
"""
import json
import struct
import sys

MAGIC = b"FAKEOM01"

# aclDataType values (acl_base.h) and struct formats for packing weights.
DTYPES = {
    "float32": (0, "f"), "float16": (1, "e"), "int8": (2, "b"), "int32": (3, "i"), "uint8": (4, "B"),
    "int16": (6, "h"), "uint16": (7, "H"), "uint32": (8, "I"), "int64": (9, "q"), "uint64": (10, "Q"),
    "float64": (11, "d"), "bool": (12, "?"), "bfloat16": (27, None),
}
# aclFormat values.
FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "HWCN": 16, "NDHWC": 27, "FRACTAL_NZ": 29,
           "NCDHW": 30, "NC": 35, "NCL": 47}


def pack(dtype, values):
    """Little-endian bytes of `values` in `dtype` (bf16: float32 rounded to nearest even, top half)."""
    if dtype == "bfloat16":
        out = bytearray()
        for v in values:
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            bits += 0x7FFF + ((bits >> 16) & 1)
            out += struct.pack("<H", (bits >> 16) & 0xFFFF)
        return bytes(out)
    return struct.pack("<%d%s" % (len(values), DTYPES[dtype][1]), *values)


def typed_attr(value):
    if isinstance(value, dict):
        return value  # already {"<type>": value}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return {"list_int": value}
    if isinstance(value, list):
        return {"list_float": [float(v) for v in value]}
    raise ValueError("unsupported attr value %r" % (value,))


def compile_graph(spec):
    """The JSON document of the model file for a graph spec."""
    dtype_of = {}
    tensors = []
    for t in spec["tensors"]:
        dtype_of[t["name"]] = t["dtype"]
        tensors.append({"name": t["name"], "dtype": DTYPES[t["dtype"]][0],
                        "format": FORMATS[t.get("format", "ND")], "shape": list(t["shape"])})
    weights = {name: pack(dtype_of[name], values).hex() for name, values in spec.get("weights", {}).items()}
    nodes = [{"type": n["type"], "name": n["name"], "inputs": list(n["inputs"]), "outputs": list(n["outputs"]),
              "attrs": {k: typed_attr(v) for k, v in n.get("attrs", {}).items()}} for n in spec["nodes"]]
    return {"name": spec["name"], "tensors": tensors, "inputs": list(spec["inputs"]),
            "outputs": list(spec["outputs"]), "weights": weights, "nodes": nodes}


def model_bytes(spec):
    return MAGIC + json.dumps(compile_graph(spec), separators=(",", ":")).encode()


def write_model(spec, path):
    with open(path, "wb") as f:
        f.write(model_bytes(spec))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        spec = json.load(f)
    write_model(spec, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
