"""The examples of docs/inspect.md and docs/report.md, run as they stand, and the output they quote compared with what
the commands print (issue 39: the docs quoted counts and kernel names no run of the programs produces).

A doc's ```console blocks are its examples (test/python/doc_examples.py says how they are read and compared): they
run in order, in one working folder per doc where examples/ and build/ are the repository's (links), build/bin and the
test's python3 come first on PATH, ASCEND_HOME_PATH=build/fake_cann and PYTHONPATH=examples. Other fenced blocks
(usage, code, commands that need what a test machine lacks, such as mpirun) are not run.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sanitizer_preload
import shimtest
from doc_examples import console_examples, missing

SOURCE, BUILD = Path(shimtest.SOURCE), Path(shimtest.BUILD)


def examples(doc):
    return console_examples(doc.read_text(), doc.name)


def workdir(tmp_path):
    (tmp_path / "examples").symlink_to(SOURCE / "examples")
    (tmp_path / "build").symlink_to(BUILD)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # the test's python (Debian's, with numpy)
    env = shimtest.clean_env({"ASCEND_HOME_PATH": "build/fake_cann", "PYTHONPATH": "examples"})
    env["PATH"] = os.pathsep.join([str(bin_dir), str(BUILD / "bin"), env.get("PATH", "/usr/bin:/bin")])
    return env


def sanitized(command):
    """The command as a sanitized build must run it: the sanitizer's runtime before the shim in its LD_PRELOAD, as
    sanitizer_preload puts it in every other test's children (the doc's command sets LD_PRELOAD itself)."""
    first = sanitizer_preload.PREFIX.split()
    if not first:
        return command
    return re.sub(r"LD_PRELOAD=(\S+)", lambda m: 'LD_PRELOAD="' + " ".join(first[:1] + [m.group(1)] + first[1:]) + '"',
                  command)


@pytest.mark.parametrize("doc", ["inspect.md", "report.md"])
def test_the_docs_examples_print_what_they_quote(doc, tmp_path):
    steps = examples(SOURCE / "docs" / doc)
    assert steps, f"docs/{doc} has no console example"
    env = workdir(tmp_path)
    for command, status, quoted in steps:
        r = subprocess.run(["bash", "-c", sanitized(command)], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        said = f"docs/{doc}: $ {command}\nexit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
        assert r.returncode == status, f"exit status {r.returncode}, the doc says {status}\n{said}"
        gap = missing(quoted, r.stdout.split("\n"))
        assert gap is None, f"the doc quotes a line the command does not print where it says:\n  {gap}\n{said}"


def test_the_checker_itself():
    """The comparison must be able to fail: a quoted line not printed, out of order, or not adjacent."""
    out = ["compare: tensor mode, 2 folder pair(s)", "tensors: 238 pass, 40 error", "first diverging kernel: X",
           "  output.0: error (Cosine 0.9999, MaxAbsErr 0.0019)", "results: a.csv"]
    assert missing(["compare: tensor mode, ...", "tensors: ... pass, 40 error"], out) is None
    assert missing(["compare: tensor mode, ...", "...", "  output.0: error (Cosine 0.99..., MaxAbsErr 0.0019)"],
                   out) is None
    assert missing(["compare: statistics mode, ..."], out) == "compare: statistics mode, ..."
    assert missing(["tensors: 238 pass, 40 error", "compare: tensor mode, ..."], out) is not None  # order
    assert missing(["compare: tensor mode, ...", "first diverging kernel: X"], out) is not None   # adjacency
    assert missing(["results: a.csv", "..."], out) is not None  # the output must start with the first quoted line
    assert [q for _, _, q in examples_of("$ true\n$ echo a # exit 0\na\n")] == [[], ["a"]]


def examples_of(text):
    return console_examples("```console\n" + text + "```\n")
