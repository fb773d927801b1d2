#!/usr/bin/env python3
"""Writes the seed corpora of test/fuzz/corpus/<target>/ (small files, committed). Run once by hand when a target's
input layout changes: /usr/bin/python3 test/fuzz/make_corpus.py [a dump folder step{N}/rank{R} to take samples from]
"""
import io
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))


SEQUENCES_DUMP = {"task": "statistics", "level": "L2", "framework": "mindspore", "data": {"LayerNorm.x.0": {
    "input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2, 64], "Max": 1.0, "Min": 0.0,
                    "Mean": 0.5, "Norm": 1.0},
                   [{"type": "int", "value": 64}],
                   [{"type": "bool", "value": True}, {"type": "bool", "value": False}],
                   [],
                   {"type": "aclIntArray", "value": None},
                   [{"type": "float", "value": 0.5, "name": "lf"}]],
    "output": [None], "launch_index": 0}}}


# The form of issue 27: names end in ".forward", the launch fields are one nested object, notes are strings.
LAUNCH_DUMP = {"task": "tensor", "level": "L2", "framework": "mindspore", "data": {"Add.Default.0.forward": {
    "input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": 1.0, "Min": 0.0,
                    "Mean": 0.5, "Norm": 1.0, "data_name": "Add.Default.0.forward.input.0.npy"}],
    "output": [None], "launch": {"index": 3, "task_id": 1, "stream_id": 0, "timestamp": 1700000000},
    "flight_trigger": "overflow", "flight_note": "kept as statistics"}}}


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def fdp(strings, bools, rest=b""):
    """Bytes that FuzzedDataProvider hands out as `strings` (ConsumeRandomLengthString, front), then `rest`
    (ConsumeRemainingBytes), while ConsumeBool takes `bools` in order from the back."""
    front = b"".join(s.encode().replace(b"\\", b"\\\\") + b"\\n" for s in strings)
    back = bytes(1 if b else 0 for b in reversed(bools))
    return front + rest + back


VARS = ["MSPROBE_DUMP_PATH", "MSPROBE_TASK", "MSPROBE_STEP", "MSPROBE_RANK", "MSPROBE_LIST", "MSPROBE_SCOPE",
        "MSPROBE_DATA_MODE", "MSPROBE_SUMMARY_MODE", "MSPROBE_FILE_FORMAT", "MSPROBE_STACK", "MSPROBE_COMPRESS",
        "MSPROBE_BUFFER_MB", "MSPROBE_OVERFLOW_NUMS", "MSPROBE_STEP_MARKER", "MSPROBE_LOG_LEVEL", "MSPROBE_ENABLE",
        "MSPROBE_PRECISION"]


def config_seed(env, file_text=None):
    bools = [file_text is not None] + [v in env for v in VARS]
    strings = [env[v] for v in VARS if v in env]
    return fdp(strings, bools, (file_text or "").encode())


def configs():
    put("fuzz_config", "env_tensor", config_seed({"MSPROBE_TASK": "tensor", "MSPROBE_STEP": "0,2,4-6",
                                                   "MSPROBE_DUMP_PATH": "./dump"}))
    put("fuzz_config", "env_filters", config_seed({"MSPROBE_LIST": "Add,MatMul.Default,name-regex(Mul.*\\.[0-9]+)",
                                                    "MSPROBE_SCOPE": "Add.Default.0,name-regex((?i)cast.*)",
                                                    "MSPROBE_STEP_MARKER": "ApplyAdamW(V2)?|Sgd"}))
    put("fuzz_config", "env_numbers", config_seed({"MSPROBE_BUFFER_MB": "64", "MSPROBE_OVERFLOW_NUMS": "-1",
                                                    "MSPROBE_RANK": "all", "MSPROBE_LOG_LEVEL": "debug",
                                                    "MSPROBE_ENABLE": "1", "MSPROBE_PRECISION": "high"}))
    put("fuzz_config", "env_modes", config_seed({"MSPROBE_DATA_MODE": "input", "MSPROBE_SUMMARY_MODE": "md5",
                                                  "MSPROBE_FILE_FORMAT": "bin", "MSPROBE_STACK": "python",
                                                  "MSPROBE_COMPRESS": "lz4"}))
    put("fuzz_config", "file_statistics", config_seed({}, json.dumps(
        {"task": "statistics", "dump_path": "/tmp/d", "rank": [0, "2-3"], "step": [0, 1], "level": "L2",
         "statistics": {"scope": [], "list": ["Add", "name-regex(Mat.*)"], "data_mode": ["all"],
                        "summary_mode": "md5"}}, indent=1)))
    put("fuzz_config", "file_tensor", config_seed({"MSPROBE_TASK": "statistics"}, json.dumps(
        {"task": "tensor", "dump_path": "./x", "level": "L2",
         "tensor": {"scope": ["Add.Default.0", "Mul.Default.1"], "list": [], "data_mode": ["input"],
                    "file_format": "npy"}})))
    put("fuzz_config", "file_overflow", config_seed({}, json.dumps(
        {"task": "overflow_check", "level": "L2", "overflow_check": {"overflow_nums": 3}})))


def names():
    for i, (pattern, text, scope) in enumerate([
            ("(?i)matmul.*", "MatMul", "module/Net.forward"),
            ("Add|Mul|Sub", "Add", "../../x"),
            ("[A-Z][a-z]+\\.[^.]+\\.[0-9]{1,3}", "Cast.Default.12", "-leading dash"),
            ("(a|b)*c{2,5}?x+", "abcccx", "\xff\xfe bytes"),
            ("name-regex(Apply.*)", "ApplyAdamWV2", "@=+%;=x"),
            ("\\d\\w\\s[[:alpha:]]\\x41", "1a A", "")]):
        put("fuzz_names", f"seed{i}", "\\n".join(s.replace("\\", "\\\\") for s in (pattern, text)) + "\\n" + scope)


def prototypes():
    # The test fixtures' headers are seeds too, read in place (scripts/fuzz.sh); this seed names its op on the first
    # line, the other input form of the target.
    put("fuzz_prototype", "inline", "Foo\n#define X 1\n/* c */ aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self,"
        " double alpha, const aclIntArray *dims, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);\n")


def npys():
    arrays = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f16": np.array([1.5, -2], np.float16),
              "i64": np.array([[1], [2]], np.int64), "bool": np.array([True, False]), "zero_d": np.float32(3),
              "empty": np.zeros((0, 4), np.float32), "fortran": np.asfortranarray(np.ones((2, 2), np.float64)),
              "u8": np.arange(4, dtype=np.uint8)}
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.asanyarray(a), version=(1, 0))
        put("fuzz_npy", name, buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ones(3, np.int32), version=(2, 0))
    put("fuzz_npy", "v2", buf.getvalue())


def readers(rank_dir):
    dump = json.load(open(os.path.join(rank_dir, "dump.json"))) if rank_dir else None
    if dump:
        small = dict(dump)
        small["data"] = dict(list(dump["data"].items())[:3])
        text = json.dumps(small)
    else:
        text = json.dumps({"task": "statistics", "level": "L2", "framework": "mindspore", "data": {
            "Add.Default.0": {"input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2],
                                              "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0}],
                              "output": [None], "launch_index": 0}}})
    put("fuzz_dump_readers", "dump_json", b"\x00" + text.encode())
    put("fuzz_dump_readers", "dump_json_nan", b"\x00" + json.dumps(
        {"task": "tensor", "level": "L2", "framework": "pytorch", "data": {"Mul.x.1": {"input_args": [
            {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [], "Max": float("nan"), "Min": float("-inf"),
             "Mean": float("inf"), "Norm": None, "md5": "0badf00d", "data_name": "Mul.x.1.input.0.npy"},
            [{"type": "torch.Tensor", "dtype": "torch.bool", "shape": [1], "Max": True, "Min": False}],
            {"type": "float", "value": 1.5}], "output": []}}}).encode())
    # Sequences as lists of scalar leaves (written since issue 17, msprobe's form) and as one leaf with a list
    # value (the old form, in dumps already on disk): the readers take both.
    put("fuzz_dump_readers", "dump_json_sequences", b"\x00" + json.dumps(SEQUENCES_DUMP).encode())
    old = json.loads(json.dumps(SEQUENCES_DUMP))
    old["data"]["LayerNorm.x.0"]["input_args"][1] = {"type": "aclIntArray", "value": [64]}
    old["data"]["LayerNorm.x.0"]["input_args"][2] = {"type": "aclBoolArray", "value": [True, False]}
    old["data"]["LayerNorm.x.0"]["input_args"][3] = {"type": "aclIntArray", "value": []}
    put("fuzz_dump_readers", "dump_json_old_sequences", b"\x00" + json.dumps(old).encode())
    put("fuzz_dump_readers", "dump_json_launch", b"\x00" + json.dumps(LAUNCH_DUMP).encode())
    names = list(dump["data"])[:4] if dump else ["Add.Default.0", "Mul.Default.0"]
    put("fuzz_dump_readers", "construct_json", b"\x01" + json.dumps({n: None for n in names}, indent=0).encode())
    put("fuzz_dump_readers", "mapping_csv", b"\x02" + ("12345678901234567890123456789012.npy," + "A" * 300 +
                                                     ".input.0.npy\r\nbad line\n\n").encode())
    # A journal cut in the middle of its third member, as a killed run leaves it.
    header = text[:text.index('"data": {') + len('"data": {')]
    members = [json.dumps({k: v}).strip("{}") for k, v in (dump or json.loads(text))["data"].items()][:3]
    journal = header + "\n" + ",\n".join(members)
    put("fuzz_dump_readers", "journal_cut", b"\x03" + journal[:len(journal) - 40].encode())
    put("fuzz_dump_readers", "journal_whole", b"\x03" + (journal + "}}\n").encode())


if __name__ == "__main__":
    configs()
    names()
    prototypes()
    npys()
    readers(sys.argv[1] if len(sys.argv) > 1 else None)
