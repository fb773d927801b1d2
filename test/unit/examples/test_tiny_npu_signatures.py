"""tiny_npu calls every aclnn op through a hand-written parameter list (ops.SIGNATURES), as
op-plugin does; check each against the aclnnop headers of $ASCEND_HOME_PATH, which the stand-in
generates from its spec."""
import glob
import os
import re

from tiny_npu import acl, ops

# Base type of a parameter -> the letter used in ops.SIGNATURES.
LETTERS = {"aclTensor": "T", "aclTensorList": "L", "aclScalar": "S", "aclIntArray": "I", "aclBoolArray": "A",
           "double": "d", "float": "f", "int64_t": "l", "int8_t": "c", "bool": "b", "aclDataType": "e",
           "uint64_t": "u", "aclScalarList": "P",  # P: no tiny_npu op takes one (ops_workload.py makes its own)
           "char": "s"}  # s: a string (FlashAttentionScore's inputLayout, the MC2 ops' group and reduceOp)


def header_signatures():
    sigs = {}
    for path in glob.glob(os.path.join(acl.ascend_home(), "include", "aclnnop", "*.h")):
        text = open(path, encoding="utf-8").read()
        for name, params in re.findall(r"aclnn(\w+)GetWorkspaceSize\(([^)]*)\)", text, re.S):
            letters = []
            for p in [p.strip() for p in params.split(",")][:-2]:  # drop workspaceSize, executor
                base = re.sub(r"\bconst\b|\*", " ", p).split()[:-1]  # drop the parameter name
                letters.append(LETTERS[" ".join(base)])
            sigs[name] = "".join(letters)
    return sigs


def test_headers_found():
    assert len(header_signatures()) >= 30


def test_every_op_matches_its_header():
    headers = header_signatures()
    missing = sorted(set(ops.SIGNATURES) - set(headers))
    assert not missing, f"ops used by tiny_npu but absent from the stand-in: {missing}"
    wrong = {n: (s, headers[n]) for n, s in ops.SIGNATURES.items() if headers[n] != s}
    assert not wrong, f"tiny_npu signature != header (ours, header): {wrong}"
