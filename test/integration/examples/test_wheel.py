"""The wheel (issue 21, item 3): scripts/build_wheel.sh builds it once from this build's binaries, it installs
offline into a fresh venv, and the venv's msprobe-shim launcher runs examples/train.py into a verified dump,
passes the exit status and SIGINT/SIGTERM through unchanged, and changes nothing of the environment but
LD_PRELOAD (appended) and the MSPROBE_* variables of its options; msprobe-inspect from the venv reads the dump.

The launcher's options are the shim's settings (issue 32): one per variable of the library's own settings table,
in its order, each value checked by the shim's parser; compared here with the table as the library reports it and
with docs/configuration.md, and the launcher runs every task the shim accepts (flight included) into a dump that
msprobe-inspect verify accepts.

When the built binaries cannot keep the manylinux_2_28 promise (DT_NEEDED, symbol versions), the manylinux test
fails with build_wheel.sh's list of reasons, and the other tests run on a host-only linux_<arch> wheel of the same
files (MSPROBE_WHEEL_TAG=linux), so that one failure does not hide the others."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import zipfile

import pytest

import sanitizer_preload
import shimtest
from shimtest import BUILD, SOURCE, TRAIN, check_files, check_statistics, clean_env, fail_report

SCRIPT = os.path.join(SOURCE, "scripts", "build_wheel.sh")
VERSION = open(os.path.join(SOURCE, "VERSION")).read().strip()
ARCH = os.uname().machine


def elf_arch(path):
    with open(path, "rb") as f:
        head = f.read(20)
    return {62: "x86_64", 183: "aarch64"}.get(int.from_bytes(head[18:20], "little"), "?")


# The aarch64 stage's default run uses the host's python3: an aarch64 shim cannot be preloaded into it.
if elf_arch(os.path.join(BUILD, "lib", "libmsprobe_shim.so")) != ARCH:
    pytest.skip(f"the build's libmsprobe_shim.so is not {ARCH}: the launcher runs need a Python of the build's "
                f"architecture (MSPROBE_AARCH64_PYTHON=1)", allow_module_level=True)
# The venv's interpreter: Debian's python3 (python3-venv, numpy) when it is of the build's architecture; else (the
# aarch64 stage's long variant, under qemu) the arm64 python3.11 the tests run on, with Debian's arm64 venv module.
PYTHON = "/usr/bin/python3" if elf_arch(os.path.realpath("/usr/bin/python3")) == ARCH else sys.executable


class Built:
    def __init__(self, path, manylinux_error):
        self.path = path
        self.manylinux_error = manylinux_error  # build_wheel.sh's stderr when manylinux_2_28 was refused


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ, MSPROBE_BUILD_DIR=BUILD)
    env.pop("MSPROBE_WHEEL_TAG", None)
    p = subprocess.run(["bash", SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode == 0:
        return Built(p.stdout.strip().splitlines()[-1], None)
    env["MSPROBE_WHEEL_TAG"] = "linux"
    q = subprocess.run(["bash", SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, f"build_wheel.sh failed even for the linux tag:\n{q.stderr}\n(manylinux:\n{p.stderr})"
    return Built(q.stdout.strip().splitlines()[-1], p.stderr)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv (seeing the system's numpy) with the wheel installed offline; returns its bin/."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(root)], check=True, timeout=300)
    p = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                        "--disable-pip-version-check", wheel.path], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"pip install {wheel.path} failed:\n{p.stdout}\n{p.stderr}"
    return root / "bin"


def installed(venv, rel):
    site = subprocess.run([str(venv / "python"), "-c", "import msprobe_shim, os; print(os.path.dirname("
                           "msprobe_shim.__file__))"], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.join(site, rel)


def launcher(venv, args, workdir, env=None, **kw):
    os.makedirs(workdir, exist_ok=True)
    return subprocess.run([str(venv / "msprobe-shim"), *map(str, args)], cwd=workdir, env=clean_env(env),
                          capture_output=True, text=True, timeout=300, **kw)


# ---- the wheel itself ------------------------------------------------------------------------------------------
@pytest.mark.skipif(bool(sanitizer_preload.PREFIX), reason="a sanitizer build needs its runtime: never manylinux")
def test_wheel_is_manylinux_2_28(wheel):
    assert wheel.manylinux_error is None, (
        "scripts/build_wheel.sh refused the manylinux_2_28 wheel (tested below as linux_<arch>):\n"
        + wheel.manylinux_error)
    assert os.path.basename(wheel.path) == f"msprobe_shim-{VERSION}-py3-none-manylinux_2_28_{ARCH}.whl"


def test_wheel_contents(wheel):
    with zipfile.ZipFile(wheel.path) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        wheel_meta = z.read(f"msprobe_shim-{VERSION}.dist-info/WHEEL").decode()
        entry_points = z.read(f"msprobe_shim-{VERSION}.dist-info/entry_points.txt").decode()
    files = {"msprobe_shim/__init__.py", "msprobe_shim/launcher.py", "msprobe_shim/lib/libmsprobe_shim.so",
             "msprobe_shim/bin/msprobe-inspect"}
    assert files <= names, f"missing from the wheel: {files - names}"
    extra = {n for n in names - files if not n.startswith(f"msprobe_shim-{VERSION}.dist-info/")}
    assert not extra, f"unexpected files in the wheel: {extra}"
    for n in ("msprobe_shim/lib/libmsprobe_shim.so", "msprobe_shim/bin/msprobe-inspect"):
        assert modes[n] & 0o111, f"{n} is not executable in the wheel ({oct(modes[n])})"
    assert "Root-Is-Purelib: false" in wheel_meta
    assert re.search(r"^msprobe-shim = msprobe_shim\.launcher:main$", entry_points, re.M), entry_points
    assert re.search(r"^msprobe-inspect = msprobe_shim\.launcher:inspect_main$", entry_points, re.M), entry_points


@pytest.mark.parametrize("rel", ["lib/libmsprobe_shim.so", "bin/msprobe-inspect"])
@pytest.mark.skipif(bool(sanitizer_preload.PREFIX),
                    reason="a sanitizer build embeds its source paths in the instrumentation: never shipped")
def test_installed_files_are_relocatable(venv, rel):
    path = installed(venv, rel)
    dyn = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\((RPATH|RUNPATH)\)", dyn), f"{rel}: {dyn}"
    strings = subprocess.run(["strings", "-a", path], capture_output=True, text=True, check=True).stdout
    for p in {os.path.realpath(SOURCE), os.path.realpath(BUILD), SOURCE, BUILD}:
        hits = [s for s in strings.splitlines() if p in s]
        assert not hits, f"{rel} holds the build path {p}: {hits[:3]}"


# ---- the launcher -------------------------------------------------------------------------------------------------
def test_print_preload_is_the_installed_library(venv):
    p = subprocess.run([str(venv / "msprobe-shim"), "--print-preload"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    path = p.stdout.strip()
    assert p.stdout == path + "\n" and os.path.isfile(path), p.stdout
    assert path == installed(venv, "lib/libmsprobe_shim.so")
    assert os.path.realpath(path).startswith(os.path.realpath(venv.parent) + os.sep), path


def test_launcher_runs_train_into_a_verified_dump(venv, tmp_path):
    plain = shimtest.run_train(tmp_path / "plain", "--steps", "2", shim=False)
    dump = tmp_path / "run" / "out"
    r = launcher(venv, ["--task", "tensor", "--dump-path", "out", "--", sys.executable, TRAIN, "--steps", "2"],
                 tmp_path / "run")
    assert r.returncode == 0, f"launcher exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    run = shimtest.Run([], r.returncode, r.stdout, r.stderr, str(tmp_path / "run"), dump=shimtest.Dump(str(dump)))
    assert run.losses() == plain.losses(), "losses under the launcher differ from the plain run's"
    assert run.dump.steps() == [0, 1], f"steps {run.dump.steps()}"
    kernels = list(run.dump.kernels())
    assert len(kernels) > 10, f"only {len(kernels)} kernels in {dump}"
    problems, dtypes = check_files(run.dump)
    assert not problems, fail_report(problems)
    problems, n = check_statistics(run.dump)
    assert not problems, fail_report(problems)
    assert n > 0

    # msprobe-inspect from the venv reads it.
    s = subprocess.run([str(venv / "msprobe-inspect"), "summary", str(dump)], capture_output=True, text=True,
                       timeout=120)
    assert s.returncode == 0, s.stderr
    assert re.search(r"^kernels\s+%d in 2 folder" % len(kernels), s.stdout, re.M), s.stdout
    assert "task        tensor" in s.stdout, s.stdout


def test_report_carries_its_javascript(venv, tmp_path):
    """msprobe-inspect report from the wheel writes Chart.js and its page from the program itself (embedded when it
    was built), not from Debian's libjs-chart.js: with /usr/share/javascript hidden by an empty tmpfs in a mount
    namespace of its own (as root), the report still holds Debian's Chart.js byte for byte."""
    chartjs = "/usr/share/javascript/chart.js/chart.min.js"
    dump = shimtest.run_train(tmp_path / "run", "--steps", "1").check().dump.root
    html = tmp_path / "report.html"
    cmd = [str(venv / "msprobe-inspect"), "report", dump, "-o", str(html)]
    hide = ["unshare", "--mount", "sh", "-c",
            'mount -t tmpfs none /usr/share/javascript && test ! -e /usr/share/javascript/chart.js && exec "$@"', "sh"]
    can_hide = (os.geteuid() == 0 and os.path.isdir("/usr/share/javascript") and
                subprocess.run(hide + ["true"], capture_output=True, timeout=60).returncode == 0)
    r = subprocess.run((hide if can_hide else []) + cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    assert "Chart.js v3.9.1" in page and '<script id="report-data"' in page
    if os.path.exists(chartjs):
        with open(chartjs) as f:
            assert f.read() in page
    if not can_hide:
        print("test_report_carries_its_javascript: /usr/share/javascript could not be hidden (not root, or no mount "
              "namespace here); checked the page only")


def test_launcher_sets_only_its_variables(venv, tmp_path):
    probe = ("import json, os; print(json.dumps(dict(os.environ)))")
    base = {"LD_PRELOAD": "libfirst.so", "MSPROBE_STEP": "0", "MSPROBE_LIST": "Matmul", "SOME_USER_VAR": "x y"}
    # libfirst.so does not exist: ld.so says so on stderr and goes on, which is all this needs.
    r = launcher(venv, ["--task", "Statistics", "--list", "Add,Mul", "--log-level", "error", "--",
                        PYTHON, "-c", probe], tmp_path, env=base)
    assert r.returncode == 0, r.stderr
    got = __import__("json").loads(r.stdout)
    want = clean_env(base)
    lib = installed(venv, "lib/libmsprobe_shim.so")
    # (a sanitizer stage puts its runtime first in the launcher's LD_PRELOAD: sanitizer_preload.py)
    assert got.pop("LD_PRELOAD") == sanitizer_preload.with_prefix(base)["LD_PRELOAD"] + ":" + lib
    assert got.pop("MSPROBE_TASK") == "Statistics"    # passed on as written (the shim's keywords ignore case)
    assert got.pop("MSPROBE_LIST") == "Add,Mul"       # the option wins over the variable
    assert got.pop("MSPROBE_LOG_LEVEL") == "error"
    want.pop("LD_PRELOAD"), want.pop("MSPROBE_LIST")
    got.pop("_", None), want.pop("_", None)           # a shell's last-command variable, if any
    assert got == want, {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}


def test_launcher_does_not_preload_twice(venv, tmp_path):
    lib = installed(venv, "lib/libmsprobe_shim.so")
    r = launcher(venv, ["--", PYTHON, "-c", "import os; print(os.environ['LD_PRELOAD'])"], tmp_path,
                 env={"LD_PRELOAD": lib, "MSPROBE_ENABLE": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == sanitizer_preload.with_prefix({"LD_PRELOAD": lib})["LD_PRELOAD"]


def test_launcher_appends_to_ld_preload_as_written(venv, tmp_path):
    lib = installed(venv, "lib/libmsprobe_shim.so")
    r = launcher(venv, ["--enable", "0", "--", PYTHON, "-c", "import os; print(os.environ['LD_PRELOAD'])"],
                 tmp_path, env={"LD_PRELOAD": "liba.so libb.so"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == sanitizer_preload.with_prefix({"LD_PRELOAD": "liba.so libb.so"})["LD_PRELOAD"] + ":" + lib


@pytest.mark.parametrize("status", [0, 3, 255])
def test_exit_status_passes_through(venv, tmp_path, status):
    r = launcher(venv, ["--", PYTHON, "-c", f"import sys; sys.exit({status})"], tmp_path)
    assert r.returncode == status, r.stderr


def test_command_not_found_is_127(venv, tmp_path):
    r = launcher(venv, ["--", "no-such-command-msprobe"], tmp_path)
    assert r.returncode == 127
    assert r.stderr.strip() == "msprobe-shim: cannot run 'no-such-command-msprobe': No such file or directory"


CHILD = r"""
import os, signal, sys, time
import train
mode, signame = sys.argv[1], sys.argv[2]
sys.argv = ["train.py", "--steps", "2"]
train.main()
if mode == "handled":
    def on_signal(num, frame):
        print("got", signal.Signals(num).name, flush=True)
        sys.exit(40 + num)
    signal.signal(getattr(signal, signame), on_signal)
else:
    signal.signal(getattr(signal, signame), signal.SIG_DFL)
print("ready", os.getpid(), flush=True)
deadline = time.time() + 120
while time.time() < deadline:
    time.sleep(0.05)
print("no signal came", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", ["handled", "default"])
def test_signals_reach_the_program(venv, tmp_path, signame, mode):
    """The signal sent to the launcher's pid reaches the program; the launcher's status is the program's (exit
    code of its handler, or death by the same signal); the dump of the two steps before it is complete."""
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    num = getattr(signal, signame)
    p = subprocess.Popen([str(venv / "msprobe-shim"), "--task", "tensor", "--dump-path", "out", "--",
                          sys.executable, str(child), mode, signame],
                         cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines, deadline = [], time.time() + 120
        while time.time() < deadline:
            ready, _, _ = select.select([p.stdout], [], [], 1)
            if ready:
                line = p.stdout.readline()
                if not line:
                    break
                lines.append(line.rstrip("\n"))
                if line.startswith("ready "):
                    break
        assert lines and lines[-1].startswith("ready "), (f"the program never got ready: {lines}\n"
                                                          f"{p.stderr.read() if p.poll() is not None else ''}")
        # The launcher replaced itself with the program: same process.
        assert int(lines[-1].split()[1]) == p.pid
        p.send_signal(num)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if mode == "handled":
        assert p.returncode == 40 + num, f"launcher exited {p.returncode}\n{out}\n{err}"
        assert out.strip().splitlines()[-1] == f"got {signame}", out
    else:
        assert p.returncode == -num, f"launcher exited {p.returncode}, not killed by {signame}\n{out}\n{err}"
    dump = shimtest.Dump(str(tmp_path / "out"))
    assert dump.steps() == [0, 1], f"steps {dump.steps()}\n{err}"
    problems, _ = check_files(dump)
    assert not problems, fail_report(problems)
    problems, n = check_statistics(dump)
    assert not problems and n > 0, fail_report(problems)


# ---- errors and help -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--task", "tensr", "--", "true"],
     "msprobe-shim: argument --task: unknown value 'tensr'; accepted: statistics, tensor, overflow_check, "
     "structure, flight (see msprobe-shim --help)"),
    (["--step", "3-x", "--", "true"],
     "msprobe-shim: argument --step: invalid value '3-x' (item \"3-x\" is not a number or a range a-b of numbers); "
     "accepted: all, or numbers and ranges in [0, 1000000] such as 0,2,4-6 (see msprobe-shim --help)"),
    (["--flight-kernels", "0", "--", "true"],
     "msprobe-shim: argument --flight-kernels: invalid value '0' (out of range); accepted: auto (as many as "
     "MSPROBE_BUFFER_MB holds) or a whole number in [1, 1000000] (see msprobe-shim --help)"),
    (["--stack", "full", "--", "true"],
     "msprobe-shim: argument --stack: unknown value 'full'; accepted: off, native, python, mixed "
     "(see msprobe-shim --help)"),
    (["--dump-path", "", "--", "true"],
     "msprobe-shim: argument --dump-path: empty value (leave the option out to get the default) "
     "(see msprobe-shim --help)"),
    (["--tsak", "tensor", "--", "true"], "msprobe-shim: unrecognized arguments: --tsak tensor (see msprobe-shim --help)"),
    (["--task", "tensor"],
     "msprobe-shim: no command: put it after '--', as in: msprobe-shim --task tensor -- python train.py"),
    (["--config", "no/such.json", "--", "true"], "msprobe-shim: --config: 'no/such.json' is not a file"),
])
def test_bad_options_are_one_line_and_exit_2(venv, tmp_path, args, message):
    r = launcher(venv, args, tmp_path)
    assert r.returncode == 2, r
    assert r.stderr == message + "\n"
    assert r.stdout == ""


@pytest.mark.parametrize("how", ["option", "variable", "default"])
def test_an_unusable_dump_path_stops_the_launcher_before_the_program(venv, tmp_path, how):
    """Issue 39: a --dump-path that is a file (or not writable) started a long job with capture off; now the launcher
    checks the dump path the program would use (by the shim's own rule) and refuses, exit 2, with the reason."""
    (tmp_path / "a_file").write_text("not a folder\n")
    marker = tmp_path / "ran"
    command = ["--", "sh", "-c", f"touch {marker}"]
    if how == "option":
        r = launcher(venv, ["--dump-path", "a_file/dump", *command], tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("msprobe-shim: argument --dump-path: invalid value"), r
    elif how == "variable":
        r = launcher(venv, command, tmp_path, env={"MSPROBE_DUMP_PATH": "a_file/dump"})
        assert r.returncode == 2 and r.stderr.startswith("msprobe-shim: the dump path 'a_file/dump' cannot be used"), r
    else:  # the default, ./msprobe_dump, is a file in the working directory
        (tmp_path / "msprobe_dump").write_text("not a folder\n")
        r = launcher(venv, command, tmp_path)
        assert r.returncode == 2 and "the dump path './msprobe_dump' cannot be used" in r.stderr, r
    assert "is not a directory" in r.stderr or "not writable" in r.stderr or "cannot be created" in r.stderr, r
    assert r.stderr.count("\n") == 1, r.stderr
    assert not marker.exists(), "the program was started"


def test_help(venv, tmp_path):
    r = launcher(venv, ["--help"], tmp_path)
    assert r.returncode == 0, r.stderr
    for flag in ("--task", "--dump-path", "--config", "--print-preload", "MSPROBE_STEP", "-- COMMAND"):
        assert flag in r.stdout, f"{flag} missing from --help:\n{r.stdout}"
    v = launcher(venv, ["--version"], tmp_path)
    assert v.returncode == 0 and v.stdout.strip() == f"msprobe-shim {VERSION}", v


def test_inspect_passes_status_through(venv, tmp_path):
    build_inspect = os.path.join(BUILD, "bin", "msprobe-inspect")
    for args in (["summary", str(tmp_path / "nothing-here")], ["no-such-subcommand"]):
        want = subprocess.run([build_inspect, *args], capture_output=True, text=True, timeout=60)
        got = subprocess.run([str(venv / "msprobe-inspect"), *args], capture_output=True, text=True, timeout=60)
        assert want.returncode != 0
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), (got, want)


# ---- the launcher's options are the shim's settings (issue 32) --------------------------------------------------------
SETTINGS_PROBE = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.msprobe_shim_settings.restype = "
                  "ctypes.c_char_p; print(lib.msprobe_shim_settings().decode())")


def shim_settings():
    """[(variable, accepted)] as the build's library says, read with ctypes in a child (apart from the launcher)."""
    lib = os.path.join(BUILD, "lib", "libmsprobe_shim.so")
    # Preloaded (initial-exec TLS: dlopen cannot load it into a running process), as a pure pass-through.
    env = sanitizer_preload.with_prefix(clean_env({"LD_PRELOAD": lib, "MSPROBE_ENABLE": "0"}))
    p = subprocess.run([PYTHON, "-c", SETTINGS_PROBE, lib], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    return [(s["variable"], s["accepted"]) for s in json.loads(p.stdout)]


def documented_variables():
    """The variables of docs/configuration.md's table (the users' reference)."""
    text = open(os.path.join(SOURCE, "docs", "configuration.md"), encoding="utf-8").read()
    return re.findall(r"^\| `(MSPROBE_[A-Z_]+)` \|", text, re.M)


def test_launcher_options_are_the_shims_settings(venv, tmp_path):
    settings = shim_settings()
    variables = [v for v, _ in settings]
    assert "MSPROBE_FLIGHT_KERNELS" in variables and "MSPROBE_FLIGHT_ON_EXIT" in variables, variables
    assert sorted(variables) == sorted(documented_variables()), (variables, documented_variables())
    r = launcher(venv, ["--help"], tmp_path)
    assert r.returncode == 0, r.stderr
    flags = re.findall(r"^  (--[a-z-]+) VALUE", r.stdout, re.M)
    helped = re.findall(r"\((MSPROBE_[A-Z_]+)\)", r.stdout)
    # One option per variable, in the table's order, named after it.
    assert helped == variables, (helped, variables)
    assert flags == ["--" + v[len("MSPROBE_"):].lower().replace("_", "-") for v in variables], flags
    # Each option's help says what the shim accepts, as the shim's own messages say it (argparse wraps lines, at
    # hyphens too: compared without white space).
    flat = "".join(r.stdout.split())
    for v, accepted in settings:
        assert "".join(accepted.split()) + f"({v})" in flat, (v, accepted)
    # A setting's keywords are the shim's: MSPROBE_TASK's, flight included.
    tasks = dict(settings)["MSPROBE_TASK"].split(", ")
    assert "flight" in tasks, tasks


@pytest.mark.parametrize("task", ["statistics", "tensor", "overflow_check", "structure", "flight"])
def test_launcher_runs_every_task(venv, tmp_path, task):
    """Every task the shim accepts (the list is checked against the shim's own just below), through the launcher,
    into a dump that msprobe-inspect verify accepts."""
    assert task in dict(shim_settings())["MSPROBE_TASK"].split(", ")
    extra = {"overflow_check": ["--overflow-nums", "-1"], "flight": ["--flight-kernels", "4", "--flight-on-exit", "1"]}
    train = ["--steps", "2"] + (["--overflow-at", "1"] if task in ("overflow_check", "flight") else [])
    r = launcher(venv, ["--task", task, "--dump-path", "out", *extra.get(task, []), "--", sys.executable, TRAIN,
                        *train], tmp_path / "run")
    assert r.returncode == 0, f"launcher exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "capture is disabled" not in r.stderr, r.stderr
    dump = tmp_path / "run" / "out"
    kernels = list(shimtest.Dump(str(dump)).kernels())
    assert kernels, f"no kernel in {dump}\n{r.stderr}"
    v = subprocess.run([str(venv / "msprobe-inspect"), "verify", str(dump)], capture_output=True, text=True,
                       timeout=300)
    assert v.returncode == 0, f"verify: {v.stdout}\n{v.stderr}"
    s = subprocess.run([str(venv / "msprobe-inspect"), "summary", str(dump)], capture_output=True, text=True,
                       timeout=120)
    assert s.returncode == 0, s.stderr
    if task == "flight":  # written as the tensor task writes, and listed as a flight record
        assert re.search(r"^task\s+tensor\b", s.stdout, re.M) and re.search(r"^flight\s+a flight record", s.stdout,
                                                                            re.M), s.stdout
    else:
        assert re.search(rf"^task\s+{task}\b", s.stdout, re.M), s.stdout
