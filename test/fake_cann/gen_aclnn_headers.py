#!/usr/bin/env python3
"""Generates the stand-in's aclnnop/aclnn_<op>.h headers from aclnn_ops.spec.

Each op is described once, by its phase-1 parameter list exactly as CANN declares it; this script
writes the CANN-style header (phase 1 with `uint64_t *workspaceSize, aclOpExecutor **executor`
appended, and the uniform phase 2) and an X-macro list that defines every phase 2 in libopapi.

Spec syntax:
    [aclnn_add.h]                      starts a header (CANN groups related ops in one header)
    Add(const aclTensor *self, ...)    one op per line (a trailing backslash continues a line)
    @include "hccl/hccl.h"             another header this one includes (CANN's MC2 headers bring in HCCL's)
    @text typedef enum {...} X;        a declaration copied verbatim before the ops (GroupedMatmulV4's GMMActType)
    # comment
"""
import os
import re
import sys


def parse(spec_path):
    headers = {}
    current = None
    pending = ""
    with open(spec_path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line = (pending + line).strip()
            pending = ""
            m = re.fullmatch(r"\[(aclnn_[a-z0-9_]+\.h)\]", line)
            if m:
                current = m.group(1)
                headers.setdefault(current, {"ops": [], "includes": [], "text": []})
                continue
            m = re.fullmatch(r'@include ("[A-Za-z0-9_/.]+")', line)
            if m and current is not None:
                headers[current]["includes"].append(m.group(1))
                continue
            m = re.fullmatch(r"@text (.+)", line)
            if m and current is not None:
                headers[current]["text"].append(m.group(1))
                continue
            m = re.fullmatch(r"([A-Z][A-Za-z0-9]*)\((.*)\)", line)
            if not m or current is None:
                sys.exit(f"{spec_path}:{lineno}: cannot parse: {line}")
            headers[current]["ops"].append((m.group(1), " ".join(m.group(2).split())))
    return headers


def write_if_changed(path, text):
    """Rewrites only on change, so an edit of one op does not rebuild everything that includes the rest."""
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if old != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def guard(name):
    return "OP_API_INC_" + name.upper().replace(".", "_") + "_"


def main():
    spec, out_dir, inc_path = sys.argv[1:4]
    headers = parse(spec)
    os.makedirs(out_dir, exist_ok=True)
    ops = []
    for header, entry in sorted(headers.items()):
        lines = [
            f"/* CANN stand-in: aclnnop/{header}, generated from aclnn_ops.spec. */",
            f"#ifndef {guard(header)}",
            f"#define {guard(header)}",
            "",
            '#include "aclnn/aclnn_base.h"',
        ]
        lines += [f"#include {inc}" for inc in entry["includes"]]
        lines += [
            "",
            "#ifdef __cplusplus",
            'extern "C" {',
            "#endif",
            "",
        ]
        if entry["text"]:
            lines += entry["text"] + [""]
        for op, params in entry["ops"]:
            ops.append(op)
            sep = ", " if params else ""
            lines.append(
                f"ACL_FUNC_VISIBILITY aclnnStatus aclnn{op}GetWorkspaceSize({params}{sep}"
                "uint64_t *workspaceSize, aclOpExecutor **executor);")
            lines.append(
                f"ACL_FUNC_VISIBILITY aclnnStatus aclnn{op}(void *workspace, uint64_t workspaceSize, "
                "aclOpExecutor *executor, aclrtStream stream);")
            lines.append("")
        lines += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard(header)} */", ""]
        write_if_changed(os.path.join(out_dir, header), "\n".join(lines))
    # A header the spec no longer names (a renamed one) must not linger in the install.
    for stale in set(os.listdir(out_dir)) - set(headers):
        path = os.path.join(out_dir, stale)
        with open(path, errors="replace") as f:
            if "generated from aclnn_ops.spec" in f.readline():
                os.unlink(path)
    inc = "".join(f"FAKECANN_ACLNN_PHASE2({op})\n" for op in ops)
    write_if_changed(inc_path, "// Generated from aclnn_ops.spec: phase 2 of every op.\n" + inc)
    umbrella = ["/* All aclnnop headers of the stand-in (generated). */"]
    umbrella += [f'#include "aclnnop/{h}"' for h in sorted(headers)]
    write_if_changed(os.path.join(out_dir, "..", "aclnn_ops.h"), "\n".join(umbrella) + "\n")


if __name__ == "__main__":
    main()
