"""The examples of docs/inspect.md and docs/report.md, run as they stand, and the output they quote compared with what
the commands print (issue 39: the docs quoted counts and kernel names no run of the programs produces).

A doc's ```console blocks are its examples: they run in order, in one working folder per doc where examples/ and build/
are the repository's (links), build/bin and the test's python3 come first on PATH, ASCEND_HOME_PATH=build/fake_cann
and PYTHONPATH=examples, as the README sets them. A line `$ COMMAND` (a trailing backslash continues it) runs COMMAND
with bash; `# exit N` at its end is the exit status it must have (0 when not said). The lines after it, up to the next
`$ ` line, are output the command must print on stdout, in order and on consecutive lines: a line `...` stands for any
number of lines, `...` inside a line for any text; lines after the last one quoted are not looked at. Other fenced
blocks (usage, code, commands that need what a test machine lacks, such as mpirun) are not run.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import shimtest

SOURCE, BUILD = Path(shimtest.SOURCE), Path(shimtest.BUILD)
BLOCK = re.compile(r"^```console\n(.*?)^```", re.M | re.S)


def examples(doc):
    """[(command, expected exit status, [quoted lines])] of a doc's console blocks, in order."""
    out = []
    for block in BLOCK.findall(doc.read_text()):
        lines = block.rstrip("\n").split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            assert line.startswith("$ "), f"{doc.name}: a console block must start with a command: {line!r}"
            command = line[2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + "\n" + lines[i]
            i += 1
            quoted = []
            while i < len(lines) and not lines[i].startswith("$ "):
                quoted.append(lines[i])
                i += 1
            m = re.search(r"#\s*exit (\d+)\s*$", command)
            out.append((command, int(m.group(1)) if m else 0, quoted))
    return out


def line_matches(quoted, actual):
    parts = quoted.rstrip().split("...")
    return re.fullmatch(".*?".join(map(re.escape, parts)), actual.rstrip(), re.S) is not None


def missing(quoted, actual):
    """The first quoted line the output does not hold where it should, or None."""
    at, free = 0, False  # free: the next quoted line may come after any number of output lines
    for q in quoted:
        if q.strip() == "...":
            free = True
            continue
        while at < len(actual) and not line_matches(q, actual[at]):
            if not free:
                return q
            at += 1
        if at == len(actual):
            return q
        at, free = at + 1, False
    return None


def workdir(tmp_path):
    (tmp_path / "examples").symlink_to(SOURCE / "examples")
    (tmp_path / "build").symlink_to(BUILD)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # the test's python (Debian's, with numpy)
    env = shimtest.clean_env({"ASCEND_HOME_PATH": "build/fake_cann", "PYTHONPATH": "examples"})
    env["PATH"] = os.pathsep.join([str(bin_dir), str(BUILD / "bin"), env.get("PATH", "/usr/bin:/bin")])
    return env


@pytest.mark.parametrize("doc", ["inspect.md", "report.md"])
def test_the_docs_examples_print_what_they_quote(doc, tmp_path):
    steps = examples(SOURCE / "docs" / doc)
    assert steps, f"docs/{doc} has no console example"
    env = workdir(tmp_path)
    for command, status, quoted in steps:
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
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


def examples_of(text, tmp=Path("/tmp")):
    doc = tmp / f"docs_example_{os.getpid()}.md"
    doc.write_text("```console\n" + text + "```\n")
    try:
        return examples(doc)
    finally:
        doc.unlink()
