"""Helpers of the shim edge tests (test_shim_custom_op.py, test_shim_config_errors.py, test_shim_linkage.py):
paths of the build, a clean environment, running a program with and without the shim, reading a dump."""
import glob
import json
import os
import re
import subprocess
import sys

SOURCE = os.environ.get("MSPROBE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))
BUILD = os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build"))
SHIM = os.path.join(BUILD, "lib", "libmsprobe_shim.so")
FAKE_CANN = os.environ.get("ASCEND_HOME_PATH", os.path.join(BUILD, "fake_cann"))
TRAIN = os.path.join(SOURCE, "examples", "train.py")
ACL_APP = os.path.join(BUILD, "bin", "acl_app")
# The test interpreter: ctest runs these files with TEST_PYTHON (Debian's /usr/bin/python3, with numpy: spec §3;
# scripts/test_aarch64.sh: an arm64 python3 that can load the aarch64 libraries).
PYTHON = sys.executable or "/usr/bin/python3"
VENDOR_DIR = os.path.join(BUILD, "custom_opp", "vendors", "msprobe_test")
CUSTOM_LIB = os.path.join(VENDOR_DIR, "op_api", "lib", "libcust_opapi.so")
CUSTOM_HOST = os.path.join(SOURCE, "test", "integration", "edges", "custom_op", "run_custom_op.py")
TESTS_BIN = os.path.join(BUILD, "tests")
PREFIX = "msprobe-shim:"

# Variables of the process environment that would change what the shim or the workload does.
_SCRUB = re.compile(r"^(MSPROBE_|FAKE_CANN_|ASCEND_(CUSTOM_OPP|OPP|TOOLKIT)|LD_PRELOAD$|RANK$|RANK_ID$|RANK_SIZE$|"
                    r"TASK_QUEUE_ENABLE$|ASCEND_LAUNCH_BLOCKING$|TINY_NPU_)")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not _SCRUB.match(k)}
    env["ASCEND_HOME_PATH"] = FAKE_CANN
    # No MSPROBE_BUILD_DIR: the shim may warn about MSPROBE_* names it does not know, and tiny_npu finds its
    # task queue through TINY_NPU_TASKQUEUE_LIB.
    env["TINY_NPU_TASKQUEUE_LIB"] = os.path.join(BUILD, "examples", "libtiny_npu_taskqueue.so")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def with_shim(env, preload=None):
    """env plus LD_PRELOAD of the shim (or of the given list of libraries, in order)."""
    e = dict(env)
    e["LD_PRELOAD"] = " ".join(preload) if preload else SHIM
    return e


def run(cmd, env, cwd=None, timeout=120):
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=timeout)


def shim_lines(stderr):
    """The shim's own lines on stderr (bytes or str), as text."""
    text = stderr.decode("utf-8", errors="backslashreplace") if isinstance(stderr, bytes) else stderr
    return [line for line in text.splitlines() if line.startswith(PREFIX)]


def dump_dirs(root):
    """{(step, rank folder): path} of every step*/rank* folder that holds a dump.json."""
    out = {}
    for path in glob.glob(os.path.join(root, "step*", "rank*", "dump.json")):
        rank_dir = os.path.dirname(path)
        out[(os.path.basename(os.path.dirname(rank_dir)), os.path.basename(rank_dir))] = rank_dir
    return out


def load_dump(rank_dir):
    with open(os.path.join(rank_dir, "dump.json"), encoding="utf-8") as f:
        return json.load(f)


def entries_of(dump, op_type):
    """{kernel name: entry} of the kernels of one op type ({OpType}.{OpName}.{n}.forward)."""
    return {k: v for k, v in dump["data"].items() if k.startswith(op_type + ".") and k.count(".") == 3
            and k.endswith(".forward") and k.split(".")[2].isdigit()}


def describe(p):
    out = p.stdout.decode(errors="replace") if isinstance(p.stdout, bytes) else p.stdout
    err = p.stderr.decode(errors="replace") if isinstance(p.stderr, bytes) else p.stderr
    return f"exit {p.returncode}\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}"


def require_built(*paths):
    missing = [p for p in paths if not os.path.exists(p)]
    assert not missing, f"not built: {missing} (run ninja -C {BUILD})"

