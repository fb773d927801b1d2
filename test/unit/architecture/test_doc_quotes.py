"""The docs' quotes of the code stay true (issue 38: docs/architecture.md showed a grep of 2 lines where the real one
printed 22, figures from a build long gone and a "one line" that was nine).

Every markdown page of the project (README.md, docs/, examples/README.md) may mark a quote (test/python/doc_examples.py
has the rules): `<!-- checked: COMMAND -->` before a block that is COMMAND's output, run here with bash in the source
root and compared line by line (`...` for what is left out); `<!-- quoted from: FILE -->` before a block whose lines
stand in FILE (benchmark figures, quoted from bench/RESULTS.md with their date, not measured again here). Every path
of the source tree a page names in backquotes must exist.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

from doc_examples import blocks, found_in, missing

SOURCE = Path(os.environ.get("MSPROBE_SOURCE_DIR", Path(__file__).resolve().parents[3]))
PAGES = sorted([SOURCE / "README.md", SOURCE / "examples" / "README.md", *(SOURCE / "docs").glob("*.md")])
TOP = ("shim", "collector", "format", "record", "tools", "test", "scripts", "bench", "docs", "examples", "cmake",
       "packaging")


def where(page, block):
    return f"{page.relative_to(SOURCE)}:{block.line}"


def marked(kind):
    return [pytest.param(page, b, id=where(page, b)) for page in PAGES for b in blocks(page.read_text())
            if b.marker and b.marker[0] == kind]


def in_git_checkout():
    return subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=SOURCE, capture_output=True).returncode == 0


@pytest.mark.parametrize("page,block", marked("checked"))
def test_a_checked_quote_is_what_its_command_prints(page, block):
    command = block.marker[1]
    if command.startswith("git ") and not in_git_checkout():
        pytest.skip("the source tree is not a git checkout")
    r = subprocess.run(["bash", "-c", command], cwd=SOURCE, capture_output=True, text=True, timeout=120)
    said = f"{where(page, block)}: {command}\nexit {r.returncode}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    assert r.returncode == 0, said
    gap = missing(block.lines, r.stdout.rstrip("\n").split("\n"), whole=True)
    assert gap is None, f"the quote is not what the command prints now, at:\n  {gap}\n{said}"


@pytest.mark.parametrize("page,block", marked("quoted from"))
def test_a_quote_stands_in_its_source(page, block):
    source = SOURCE / block.marker[1]
    assert source.is_file(), f"{where(page, block)}: no file {block.marker[1]}"
    wrong = found_in(block.lines, source.read_text().split("\n"))
    assert wrong is None, f"{where(page, block)}: {block.marker[1]} does not say, as quoted:\n  {wrong}"


def named_paths(text):
    for token in re.findall(r"`([^`\n]+)`", text):
        if any(c in token for c in "{*<$"):
            continue  # a pattern or a placeholder, not a path
        for word in re.findall(r"[\w.-]+(?:/[\w.-]+)+/?", token):
            if word.split("/")[0] in TOP:
                yield word.rstrip(".")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_the_paths_a_page_names_exist(page):
    gone = sorted({p for p in named_paths(page.read_text()) if not (SOURCE / p).exists()})
    assert not gone, f"{page.relative_to(SOURCE)} names files that do not exist: {gone}"


def test_architecture_quotes_what_issue_38_found_wrong():
    """The quotes that were false stay checked: the task grep, the layers, the call figures, the function table."""
    text = (SOURCE / "docs" / "architecture.md").read_text()
    markers = [b.marker for b in blocks(text) if b.marker]
    commands = [m[1] for m in markers if m[0] == "checked"]
    assert any("Task::" in c for c in commands), commands
    assert "scripts/code_map.py layers" in commands, commands
    assert any("runtime_api.h" in c for c in commands), commands
    assert ("quoted from", "bench/RESULTS.md") in markers, markers
    assert "## Where to change what" in text and "test_map.md" in text


def test_the_checker_itself():
    """Each comparison must be able to fail."""
    out = ["a.cpp:1", "b.cpp:2", "c.cpp:3"]
    assert missing(out, out, whole=True) is None
    assert missing(["a.cpp:1", "..."], out, whole=True) is None
    assert missing(["a.cpp:1", "b.cpp:2"], out, whole=True) is not None  # a line the quote lacks
    assert missing(["a.cpp:1", "b.cpp:2", "c.cpp:3", "d.cpp:4"], out, whole=True) is not None
    assert missing(["a.cpp:1", "c.cpp:3"], out, whole=True) is not None
    text = ["# Results", "", "2026-11-28 09:19 UTC, here", "", "| a | 1 |", "| b | 2 |"]
    assert found_in(["# Results", "...", "2026-11-28 ...", "...", "| a | 1 |", "| b | 2 |"], text) is None
    assert found_in(["| a | 1 |", "| b | 3 |"], text) == "| b | 3 |"
    assert found_in(["| b | 2 |", "| a | 1 |"], text) is not None  # order
    doc = "x\n<!-- checked: echo hi -->\n```\nhi\n```\n<!-- not run: needs sudo -->\n```sh\nsudo x\n```\n| t |\n"
    got = [(b.kind, b.lines, b.marker) for b in blocks(doc)]
    assert got == [("", ["hi"], ("checked", "echo hi")), ("sh", ["sudo x"], ("not run", "needs sudo")),
                   ("table", ["| t |"], None)]
    assert list(named_paths("`shim/base/log.h` and `build/lib/x.so`, `{kernel}/a.npy`")) == ["shim/base/log.h"]
