"""The README's main command (scripts/demo.sh): train.py under the shim, then scripts/show_dump.py's listing.

The install and build steps are skipped (MSPROBE_DEMO_SKIP_BUILD=1: this runs inside a finished build); the rest
of the script runs as a user runs it, and its printout is checked against the dump read with Python's json."""
import collections
import json
import os
import re
import shutil
import subprocess

import shimtest

DEMO = os.path.join(shimtest.SOURCE, "scripts", "demo.sh")
SHOW = os.path.join(shimtest.SOURCE, "scripts", "show_dump.py")
FOLDER_LINE = re.compile(r"^(step\d+)/(rank\d*): (\d+) kernels, (\d+) tensor files, task=(\w+)$")


def run_demo(tmp_path, task=None):
    env = shimtest.clean_env({"MSPROBE_DEMO_SKIP_BUILD": "1", "MSPROBE_DUMP_PATH": str(tmp_path / "dump")})
    if task:
        env["MSPROBE_TASK"] = task
    return subprocess.run(["bash", DEMO], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def expected_listing(root):
    """{(step, rank): (kernels, tensor files, task, Counter of op types)}, read independently of show_dump.py."""
    out = {}
    for step in os.listdir(root):
        if not re.fullmatch(r"step\d+", step):
            continue
        for rank in os.listdir(os.path.join(root, step)):
            folder = os.path.join(root, step, rank)
            with open(os.path.join(folder, "dump.json")) as f:
                dump = json.load(f)
            tensor_dir = os.path.join(folder, "dump_tensor_data")
            files = [n for n in os.listdir(tensor_dir) if n.endswith((".npy", ".bin"))] if os.path.isdir(
                tensor_dir) else []
            ops = collections.Counter(name.split(".")[0] for name in dump["data"])
            out[(step, rank)] = (len(dump["data"]), len(files), dump["task"], ops)
    return out


def parsed_listing(stdout):
    out = {}
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        m = FOLDER_LINE.match(line)
        if m:
            ops = collections.Counter({t: int(n) for t, n in
                                       (item.rsplit(" x", 1) for item in lines[i + 1].strip().split(", "))})
            out[(m.group(1), m.group(2))] = (int(m.group(3)), int(m.group(4)), m.group(5), ops)
    return out


def test_main_job_runs_and_lists_what_was_dumped(tmp_path):
    r = run_demo(tmp_path)
    assert r.returncode == 0, f"demo.sh exited {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    root = str(tmp_path / "dump")
    # The dump root holds only step folders once the run has ended (the rank lock went with the process), and the
    # run's marker (docs/lifecycle.md: one dump root, one run).
    assert sorted(os.listdir(root)) == [".msprobe_shim.rank.run.json", "step0", "step1", "step2"], os.listdir(root)
    want = expected_listing(root)
    assert parsed_listing(r.stdout) == want, r.stdout
    assert all(task == "tensor" and files > 0 for _, files, task, _ in want.values())
    # The losses are train.py's own, bit for bit, as without the shim.
    plain = shimtest.run_train(tmp_path / "plain", "--steps", "3", shim=False)
    losses = [line for line in r.stdout.splitlines() if line.startswith("step ") and " loss " in line]
    assert losses == plain.stdout.splitlines()
    # The first entries shown are the first folder's first kernels (InplaceZero skipped), with their arguments.
    with open(os.path.join(root, "step0", "rank", "dump.json")) as f:
        data = json.load(f)["data"]
    shown = re.findall(r"^  (\S+):$", r.stdout, re.M)
    assert shown == [n for n in data if not n.startswith("InplaceZero")][:3], shown


def test_statistics_task_and_a_dump_root_with_other_files(tmp_path):
    """show_dump.py reads only step/rank folders: a stale lock file of a SIGKILLed run or a user's note in the
    dump root does not stop it (the defect a fresh clone met: NotADirectoryError on the lock file)."""
    r = run_demo(tmp_path, task="statistics")
    assert r.returncode == 0, r.stderr
    root = tmp_path / "dump"
    assert parsed_listing(r.stdout) == expected_listing(str(root))
    (root / ".msprobe_shim.rank.lock").write_text("12345\n")
    (root / "notes.txt").write_text("run of Tuesday\n")
    (root / "step0" / "README").write_text("not a rank folder\n")
    again = subprocess.run([shimtest.PYTHON, SHOW, str(root)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert parsed_listing(again.stdout) == parsed_listing(r.stdout)
    # An empty dump is said so, with a non-zero status.
    shutil.rmtree(root)
    root.mkdir()
    empty = subprocess.run([shimtest.PYTHON, SHOW, str(root)], capture_output=True, text=True, timeout=60)
    assert empty.returncode != 0 and "nothing was dumped" in empty.stderr, empty
