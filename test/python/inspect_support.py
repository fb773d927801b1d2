"""Shared helpers of the msprobe-inspect tests (test_inspect*.py); holds no tests itself.

Dumps are REAL: examples/train.py run under libmsprobe_shim.so on the CANN stand-in. Paths come from the ctest
environment (MSPROBE_BUILD_DIR, MSPROBE_SOURCE_DIR, ASCEND_HOME_PATH), with defaults for a manual
`python3 -m pytest` from the source tree (build dir in MSPROBE_BUILD_DIR or build/).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(os.environ.get("MSPROBE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("MSPROBE_BUILD_DIR", SRC / "build"))
INSPECT = BUILD / "bin" / "msprobe-inspect"
SHIM = BUILD / "lib" / "libmsprobe_shim.so"
TRAIN = SRC / "examples" / "train.py"
PYTHON = sys.executable or "/usr/bin/python3"  # the test interpreter (ctest: TEST_PYTHON), as shimtest.PYTHON


def clean_env(extra=None):
    """The test environment without any MSPROBE_* / FAKE_CANN_* setting a caller might have exported."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MSPROBE_", "FAKE_CANN_")) or k in ("MSPROBE_BUILD_DIR", "MSPROBE_SOURCE_DIR")}
    env.setdefault("ASCEND_HOME_PATH", str(BUILD / "fake_cann"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(SRC / "examples"), env.get("PYTHONPATH", "")] if p)
    env.update(extra or {})
    return env


def make_dump(dest, *, steps=2, dtype="fp32", ranks=1, task="tensor", **env):
    """Runs train.py under the shim with MSPROBE_DUMP_PATH=dest; extra keyword arguments become environment
    variables (MSPROBE_SUMMARY_MODE="md5", FAKE_CANN_PERTURB_OP="Gelu"...). Returns dest."""
    dest = Path(dest)
    e = clean_env({"MSPROBE_DUMP_PATH": str(dest), "MSPROBE_TASK": task, "LD_PRELOAD": str(SHIM), **env})
    r = subprocess.run([PYTHON, str(TRAIN), "--steps", str(steps), "--dtype", dtype, "--ranks", str(ranks)],
                       env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"train.py under the shim failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    assert any(dest.glob("step*/rank*/dump.json")), f"no dump written in {dest}:\n{r.stderr}"
    return dest


def inspect(*args, expect=None, timeout=300):
    """msprobe-inspect with args; asserts the exit status when `expect` is given."""
    r = subprocess.run([str(INSPECT), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env=clean_env())
    if expect is not None:
        assert r.returncode == expect, (f"msprobe-inspect {' '.join(map(str, args))}: exit {r.returncode}, "
                                        f"expected {expect}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def folders(root):
    """The step{N}/rank{R} folders of a dump, sorted by (step, rank)."""
    def key(p):
        rank = p.name[4:]
        return int(p.parent.name[4:]), int(rank) if rank else -1
    return sorted((p.parent for p in Path(root).glob("step*/rank*/dump.json")), key=key)


def load_dump(folder):
    """dump.json with Python's json module (which accepts NaN / Infinity, as msprobe's readers do)."""
    with open(Path(folder) / "dump.json") as f:
        return json.load(f)


def tensors_of(entry):
    """(row suffix, tensor dict) of an entry: input.i / output.i, lists flattened as input.i.j."""
    out = []

    def walk(v, prefix):
        if isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{prefix}.{i}")
        elif isinstance(v, dict) and "dtype" in v and "shape" in v:
            out.append((prefix, v))
    for key, io in (("input_args", "input"), ("output", "output")):
        for i, x in enumerate(entry.get(key) or []):
            walk(x, f"{io}.{i}")
    return out


def stack_of(folder, kernel):
    """The frames stack.json records for `kernel` (grouped {"0": [[names], [frames]]} or flat), None if absent."""
    path = Path(folder) / "stack.json"
    if not path.exists():
        return None
    with open(path) as f:
        stacks = json.load(f)
    for key, value in stacks.items():
        if isinstance(value, list) and len(value) == 2 and all(isinstance(x, list) for x in value):
            if kernel in value[0]:
                return value[1]
        elif key == kernel:
            return value
    return None


def frame_line(frame):
    """A stack.json frame as every msprobe-inspect command and the report print it (docs/inspect.md, "Stacks"): on one
    line, the line break of a Python frame ("File F, line N, in Q, \\n source") and the white space around it one space;
    a frame without a source line loses the separator's comma."""
    import re
    line = re.sub(r"[ \t]*[\r\n][ \t\r\n]*", " ", frame).rstrip()
    if "\n" in frame and not frame.split("\n", 1)[1].strip() and line.endswith(","):
        line = line[:-1]
    return line


def user_frame(frames):
    """The innermost frame of the user's own code, as docs/inspect.md "Stacks" defines it: the innermost Python frame in
    the folder of the main script (the outermost Python frame outside the standard library and installed packages)."""
    import re
    files = [re.match(r"File (.*?), line \d+, in ", f) for f in frames]
    library = lambda p: (p.startswith("<") or "-packages/" in p or "/msprobe_shim/" in p  # noqa: E731
                         or re.search(r"/lib(64)?/python\d", p) is not None)
    mine = [m.group(1) for m in files if m and not library(m.group(1))]
    if not mine:
        return frames[0] if frames else None
    home = os.path.dirname(mine[-1])
    return next(f for f, m in zip(frames, files) if m and not library(m.group(1)) and os.path.dirname(m.group(1)) == home)


def to_old_form(src, dst):
    """A copy of dump `src` in `dst` as the shim wrote dumps before issue 27: kernel names without their ".forward"
    token (dump.json, stack.json, construct.json and tensor file names alike), the launch fields at each entry's top
    level (launch_index, task_id, stream_id, timestamp). Returns dst."""
    import shutil
    src, dst = Path(src), Path(dst)
    shutil.copytree(src, dst)
    old = lambda name: name[: -len(".forward")] if name.endswith(".forward") else name  # noqa: E731
    for folder in folders(dst):
        dump = load_dump(folder)
        renamed = {}
        data = {}
        for name, entry in dump["data"].items():
            launch = entry.pop("launch")
            e = {k: v for k, v in entry.items()}
            for key, value in (("launch_index", launch["index"]), ("task_id", launch["task_id"]),
                               ("stream_id", launch["stream_id"]), ("timestamp", launch["timestamp"])):
                e[key] = value
            for _, t in tensors_of(e):
                if "data_name" in t:
                    new = old(name) + t["data_name"][len(name):]
                    renamed[t["data_name"]] = new
                    t["data_name"] = new
            data[old(name)] = e
        dump["data"] = data
        (folder / "dump.json").write_text(json.dumps(dump))
        for before, after in renamed.items():
            (folder / "dump_tensor_data" / before).rename(folder / "dump_tensor_data" / after)
        construct = json.loads((folder / "construct.json").read_text())
        (folder / "construct.json").write_text(json.dumps({old(k): v for k, v in construct.items()}))
        stack_path = folder / "stack.json"
        if stack_path.exists():
            stacks = json.loads(stack_path.read_text())
            stack_path.write_text(json.dumps({k: [[old(n) for n in names], frames]
                                              for k, (names, frames) in stacks.items()}))
    return dst
