"""The README's commands, run as a newcomer types them, and the outputs the README, examples/README.md and
docs/llm_hosts.md quote (issue 39 item 10: the README's first command ran a train.py that is not at the root, without
ASCEND_HOME_PATH, with paths that broke after a cd; examples/README.md quoted losses no run printed).

How a page's blocks are read: test/python/doc_examples.py. The README runs top to bottom in one shell's state, as a
reader's terminal: each ```sh block runs with bash (`set -e`) in the folder and with the variables the blocks before it
left, and each ```console block's commands run there and must print what it quotes. A block marked
`<!-- not run: REASON -->` (installs packages, needs a wheel or msprobe) is not run, and must say why. The clone is a
folder of links to the repository's files, with build/ the build under test; the shell starts there with no
ASCEND_HOME_PATH or PYTHONPATH: the README must set what it needs. What a reader types is typed, except two paths
substituted as a reader would type theirs: /tmp/msprobe-demo (a folder of the test's) and /usr/bin/python3 (the test's
python, Debian's when not under an aarch64 run).

examples/README.md's and docs/llm_hosts.md's console blocks run from the clone, with the README quick start's
variables (MSPROBE_SHIM, ASCEND_HOME_PATH, PATH) set; their ```sh blocks are usage lists, not run.
"""
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import sanitizer_preload
import shimtest
from doc_examples import blocks, console_steps, missing

SOURCE, BUILD = Path(shimtest.SOURCE), Path(shimtest.BUILD)
README = SOURCE / "README.md"


@dataclass
class Shell:
    """What a reader's terminal holds between two blocks."""
    env: dict
    cwd: str


def clone(tmp_path):
    """The repository as a reader's clone: its files (links), and build/ the build under test."""
    root = tmp_path / "clone"
    root.mkdir()
    for entry in SOURCE.iterdir():
        if entry.name not in ("build", ".git"):
            (root / entry.name).symlink_to(entry)
    (root / "build").symlink_to(BUILD)
    return root


def typed(text, tmp_path):
    """`text` with the paths a reader types for their own: the demo folder and the python."""
    text = text.replace("/tmp/msprobe-demo", str(tmp_path / "msprobe-demo"))
    text = text.replace("/usr/bin/python3", sys.executable)
    if sanitizer_preload.PREFIX:  # a sanitizer build's runtime must come first (test/python/sanitizer_preload.py)
        text = text.replace("LD_PRELOAD=", "LD_PRELOAD=" + ":".join(sanitizer_preload.PREFIX.split()) + ":")
    return text


def newcomers_shell(root):
    env = shimtest.clean_env()
    for name in ("ASCEND_HOME_PATH", "PYTHONPATH", "MSPROBE_BUILD_DIR", "MSPROBE_SOURCE_DIR"):
        env.pop(name, None)
    return Shell(env, str(root))


def run_sh(lines, shell, where):
    """Runs a sh block in `shell`'s state; returns the state it leaves."""
    state = Path(shell.cwd if os.path.isdir(shell.cwd) else "/tmp")
    out_env, out_cwd = f"/tmp/readme_env_{os.getpid()}", f"/tmp/readme_cwd_{os.getpid()}"
    script = "\n".join(["set -e", f"cd {shlex.quote(shell.cwd)}", *lines,
                        f"pwd > {out_cwd}", f"env -0 > {out_env}"])
    r = subprocess.run(["bash", "-c", script], env=shell.env, cwd=state, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{where}: exit {r.returncode}\n{script}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    try:
        env = dict(item.split("=", 1) for item in Path(out_env).read_text().split("\0") if "=" in item)
        cwd = Path(out_cwd).read_text().strip()
    finally:
        for f in (out_env, out_cwd):
            if os.path.exists(f):
                os.unlink(f)
    env.pop("OLDPWD", None)
    return Shell(env, cwd)


def run_console(block, shell, where):
    for command, status, quoted in console_steps(block, where):
        r = subprocess.run(["bash", "-c", command], cwd=shell.cwd, env=shell.env, capture_output=True, text=True,
                           timeout=300)
        said = f"{where}: $ {command}\nexit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
        assert r.returncode == status, f"exit status {r.returncode}, the page says {status}\n{said}"
        gap = missing(quoted, r.stdout.split("\n"))
        assert gap is None, f"the page quotes a line the command does not print where it says:\n  {gap}\n{said}"


def run_page(page, shell, tmp_path, run_sh_blocks):
    """Runs a page's blocks in order; returns the blocks not run, with their reasons."""
    not_run = []
    for block in blocks(typed(page.read_text(), tmp_path)):
        where = f"{page.relative_to(SOURCE)}:{block.line}"
        if block.kind == "console":
            run_console(block, shell, where)
        elif block.kind == "sh" and run_sh_blocks:
            if block.marker and block.marker[0] == "not run":
                assert block.marker[1], f"{where}: a block not run must say why"
                not_run.append((where, block.marker[1]))
            else:
                shell = run_sh(block.lines, shell, where)
    return not_run, shell


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    """The README run once, top to bottom: (the blocks not run, the shell it leaves, its folder)."""
    tmp_path = tmp_path_factory.mktemp("readme")
    not_run, shell = run_page(README, newcomers_shell(clone(tmp_path)), tmp_path, True)
    return not_run, shell, tmp_path


def test_the_readme_runs_as_written(readme_run):
    not_run, shell, tmp_path = readme_run
    # The quick start ran, from the demo folder, into dumps msprobe-inspect read (the console blocks above).
    assert shell.cwd == str(tmp_path / "msprobe-demo"), shell.cwd
    assert {"bad", "clean", "report.html"} <= set(os.listdir(shell.cwd)), os.listdir(shell.cwd)
    # What is not run is the setup and build, msprobe's compare, and the two commands (their own tests run them).
    assert len(not_run) == 3, not_run
    text = README.read_text()
    assert "scripts/demo.sh" in text and "scripts/test.sh" in text


def test_the_readme_stays_short():
    words = len(re.findall(r"\S+", README.read_text()))
    assert words <= 1100, f"README.md has {words} words: a newcomer reads it in five minutes (move details to docs/)"


def configuration_table():
    """{variable: default} of docs/configuration.md's table (test_wheel.py ties it to the library's settings)."""
    text = (SOURCE / "docs" / "configuration.md").read_text()
    return dict(re.findall(r"^\| `(MSPROBE_[A-Z_]+)` \| .*? \| (.*?) \|$", text, re.M))


def test_the_readme_settings_are_the_shims():
    """The README's short tables say what docs/configuration.md says: its variables and defaults, and the tasks."""
    table = configuration_table()
    text = README.read_text()
    rows = re.findall(r"^\| ((?:`MSPROBE_[A-Z_]+`(?:, )?)+) \| .*? \| (.*?) \|$", text, re.M)
    assert len(rows) >= 6, rows
    for variables, default in rows:
        for v in re.findall(r"MSPROBE_[A-Z_]+", variables):
            assert v in table, f"README names {v}, which docs/configuration.md does not"
            assert table[v] == default, f"README: {v} defaults to {default}; docs/configuration.md: {table[v]}"
    tasks = re.findall(r"^\| `([a-z_]+)`(?: \(default\))? \|", text, re.M)
    documented = re.search(r"^\| `MSPROBE_TASK` \| (.*?) \|", (SOURCE / "docs" / "configuration.md").read_text(), re.M)
    assert tasks == re.findall(r"`([a-z_]+)`", documented.group(1)), tasks


@pytest.mark.parametrize("page", ["examples/README.md", "docs/llm_hosts.md"])
def test_the_pages_outputs_are_what_the_programs_print(page, readme_run):
    """Run with the variables the README's quick start left, examples/README.md from the clone."""
    _, shell, tmp_path = readme_run
    cwd = shell.env["MSPROBE_SHIM"] if page.startswith("examples") else shell.cwd
    assert any(b.kind == "console" for b in blocks((SOURCE / page).read_text())), f"{page} quotes no run"
    run_page(SOURCE / page, Shell(shell.env, cwd), tmp_path, False)
