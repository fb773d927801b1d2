"""Bad configurations (spec §4): every variable with wrong-type, out-of-range, empty, huge and garbage-byte
values, MSPROBE_CONFIG naming a non-JSON file, a directory, a missing file or a config.json with bad fields,
and unwritable dump paths. Each must give exactly one clear `msprobe-shim:` line on stderr naming the variable
(or config.json field) and the value (plus at most the final "disabled" line), and the host, train.py
--steps 2, must print the same losses and exit 0, with no dump folder created.

The runs are independent processes; they go two at a time (the CI machine has two cores).
"""
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_helpers import (PYTHON, SHIM, TRAIN, clean_env, describe, dump_dirs, require_built, run,  # noqa: E402
                          shim_lines, with_shim)

HUGE = 20000  # bytes; far beyond any sane value, well below the kernel's 128 KiB limit for one variable
GARBAGE = b"\xff\xfe\x01bad\x7f\xc3"  # invalid UTF-8, control bytes and a truncated sequence
GARBAGE_SHOWN = r"\xff\xfe\x01bad\x7f\xc3"  # how a one-line message must show it


def case(var, value, shown=None, accepted=True):
    """A bad value of one variable. `shown`: the text of the value the message must contain."""
    if shown is None:
        shown = value if isinstance(value, str) and len(value) <= 60 else None
    return {"env": {var: value}, "names": var, "shown": shown, "accepted": accepted}


def huge(var, unit="x"):
    return case(var, unit * (HUGE // len(unit)), (unit * 40)[:40])


def garbage(var):
    return case(var, GARBAGE, GARBAGE_SHOWN)


# Every variable of spec §4 (MSPROBE_CONFIG's file cases are below) with the bad values it can have. Values a
# variable cannot reject are left out on purpose: any non-empty string without a NUL byte is a valid directory
# name for MSPROBE_DUMP_PATH (garbage bytes included), and an MSPROBE_LIST or MSPROBE_SCOPE item with odd bytes is
# valid but never matches (the shim warns, test_unmatchable_list_item_only_warns).
ENV_CASES = {
    "dump_path-empty": case("MSPROBE_DUMP_PATH", "", '""'),
    "dump_path-huge": huge("MSPROBE_DUMP_PATH", "/d"),
    "config-empty": case("MSPROBE_CONFIG", "", '""'),
    "config-huge": huge("MSPROBE_CONFIG", "/c"),
    "config-garbage-path": case("MSPROBE_CONFIG", b"/nonexistent/" + GARBAGE, r"/nonexistent/" + GARBAGE_SHOWN),
    "task-wrong": case("MSPROBE_TASK", "tensors"),
    "task-number": case("MSPROBE_TASK", "3"),
    "task-empty": case("MSPROBE_TASK", "", '""'),
    "task-huge": huge("MSPROBE_TASK"),
    "task-garbage": garbage("MSPROBE_TASK"),
    "step-word": case("MSPROBE_STEP", "first"),
    "step-negative": case("MSPROBE_STEP", "-1"),
    "step-out-of-range": case("MSPROBE_STEP", "1000001"),
    "step-reversed-range": case("MSPROBE_STEP", "5-2"),
    "step-empty-item": case("MSPROBE_STEP", "1,,2"),
    "step-empty": case("MSPROBE_STEP", "", '""'),
    "step-huge": huge("MSPROBE_STEP", "1,x"),
    "step-garbage": garbage("MSPROBE_STEP"),
    "rank-word": case("MSPROBE_RANK", "zero"),
    "rank-overflow": case("MSPROBE_RANK", "99999999999999999999999"),
    "rank-float": case("MSPROBE_RANK", "1.5"),
    "rank-empty": case("MSPROBE_RANK", "  ", '"  "'),
    "rank-huge": huge("MSPROBE_RANK", "9"),
    "rank-garbage": garbage("MSPROBE_RANK"),
    "list-empty-item": case("MSPROBE_LIST", "Add,,Mul"),
    "list-unterminated-regex": case("MSPROBE_LIST", "name-regex(Mat"),
    "list-bad-regex": case("MSPROBE_LIST", "name-regex([)"),
    "list-empty": case("MSPROBE_LIST", "", '""'),
    "scope-one-item": case("MSPROBE_SCOPE", "Add"),
    "scope-three-items": case("MSPROBE_SCOPE", "Add,Mul,Sub"),
    "scope-bad-regex": case("MSPROBE_SCOPE", "Add,name-regex(*)"),
    "scope-empty": case("MSPROBE_SCOPE", "", '""'),
    "data_mode-api-level": case("MSPROBE_DATA_MODE", "forward"),
    "data_mode-empty": case("MSPROBE_DATA_MODE", "", '""'),
    "data_mode-garbage": garbage("MSPROBE_DATA_MODE"),
    "summary_mode-wrong": case("MSPROBE_SUMMARY_MODE", "sha1"),
    "summary_mode-empty": case("MSPROBE_SUMMARY_MODE", "", '""'),
    "summary_mode-huge": huge("MSPROBE_SUMMARY_MODE", "md5"),
    "file_format-wrong": case("MSPROBE_FILE_FORMAT", "npz"),
    "file_format-empty": case("MSPROBE_FILE_FORMAT", "", '""'),
    "stack-wrong": case("MSPROBE_STACK", "full"),
    "stack-number": case("MSPROBE_STACK", "1"),
    "stack-empty": case("MSPROBE_STACK", "", '""'),
    "compress-wrong": case("MSPROBE_COMPRESS", "zstd"),
    "compress-empty": case("MSPROBE_COMPRESS", "", '""'),
    "buffer_mb-zero": case("MSPROBE_BUFFER_MB", "0"),
    "buffer_mb-negative": case("MSPROBE_BUFFER_MB", "-5"),
    "buffer_mb-too-large": case("MSPROBE_BUFFER_MB", "1048577"),
    "buffer_mb-overflow": case("MSPROBE_BUFFER_MB", "184467440737095516160"),
    "buffer_mb-fraction": case("MSPROBE_BUFFER_MB", "1.5"),
    "buffer_mb-unit": case("MSPROBE_BUFFER_MB", "64MB"),
    "buffer_mb-empty": case("MSPROBE_BUFFER_MB", "", '""'),
    "buffer_mb-garbage": garbage("MSPROBE_BUFFER_MB"),
    "overflow_nums-zero": case("MSPROBE_OVERFLOW_NUMS", "0"),
    "overflow_nums-below": case("MSPROBE_OVERFLOW_NUMS", "-2"),
    "overflow_nums-too-large": case("MSPROBE_OVERFLOW_NUMS", "2147483648"),
    "overflow_nums-word": case("MSPROBE_OVERFLOW_NUMS", "never"),
    "overflow_nums-empty": case("MSPROBE_OVERFLOW_NUMS", "", '""'),
    "step_marker-bad-regex": case("MSPROBE_STEP_MARKER", "Apply(Adam"),
    "step_marker-empty": case("MSPROBE_STEP_MARKER", "", '""'),
    "step_marker-huge": huge("MSPROBE_STEP_MARKER", "("),
    "log_level-wrong": case("MSPROBE_LOG_LEVEL", "verbose"),
    "log_level-number": case("MSPROBE_LOG_LEVEL", "5"),
    "log_level-empty": case("MSPROBE_LOG_LEVEL", "", '""'),
    "enable-wrong": case("MSPROBE_ENABLE", "maybe"),
    "enable-number": case("MSPROBE_ENABLE", "2"),
    "enable-empty": case("MSPROBE_ENABLE", "", '""'),
    "enable-garbage": garbage("MSPROBE_ENABLE"),
}

# config.json contents (written to <tmp>/config.json) and what the message must name. dump_path inside the file
# points at <tmp>/dump, which must not be created either.
FILE_CASES = {
    "level-L1": ({"task": "tensor", "level": "L1"}, 'field "level"', '"L1"'),
    "level-missing": ({"task": "tensor"}, 'field "level"', None),
    "task-number": ({"task": 7, "level": "L2"}, 'field "task"', "7"),
    "task-unknown": ({"task": "tensors", "level": "L2"}, 'field "task"', '"tensors"'),
    "step-negative": ({"level": "L2", "step": [-1]}, 'field "step[0]"', "-1"),
    "step-not-list": ({"level": "L2", "step": "0-2"}, 'field "step"', '"0-2"'),
    "rank-bad-range": ({"level": "L2", "rank": ["3-1"]}, 'field "rank[0]"', '"3-1"'),
    "list-not-strings": ({"level": "L2", "task": "statistics", "statistics": {"list": [5]}},
                         'field "statistics.list[0]"', "5"),
    "data_mode-forward": ({"level": "L2", "task": "tensor", "tensor": {"data_mode": ["forward"]}},
                          'field "tensor.data_mode"', "forward"),
    "summary_mode-wrong": ({"level": "L2", "task": "statistics", "statistics": {"summary_mode": "sha1"}},
                           'field "statistics.summary_mode"', '"sha1"'),
    "overflow_nums-zero": ({"level": "L2", "task": "overflow_check", "overflow_check": {"overflow_nums": 0}},
                           'field "overflow_check.overflow_nums"', "0"),
    "dump_path-number": ({"level": "L2", "dump_path": 5}, 'field "dump_path"', "5"),
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    require_built(SHIM)
    cwd = tmp_path_factory.mktemp("baseline")
    p = run([PYTHON, TRAIN, "--steps", "2"], clean_env(), cwd=str(cwd))
    assert p.returncode == 0, describe(p)
    lines = p.stdout.decode().splitlines()
    assert len(lines) == 2 and all(line.startswith("step ") for line in lines), describe(p)
    return p


def run_under_shim(env_updates, cwd, dump):
    env = with_shim(clean_env(MSPROBE_DUMP_PATH=str(dump)))
    env.update(env_updates)  # may override MSPROBE_DUMP_PATH; values may be bytes
    return run([PYTHON, TRAIN, "--steps", "2"], env, cwd=str(cwd))


def check_one_error(p, baseline, names, shown, accepted=True):
    """Exactly one error line (plus at most a final 'disabled' line), the host unchanged."""
    assert p.returncode == 0, describe(p)
    assert p.stdout == baseline.stdout, f"the host's output changed:\n{describe(p)}"
    lines = shim_lines(p.stderr)
    others = [line for line in p.stderr.decode(errors="backslashreplace").splitlines() if line not in lines]
    assert others == baseline.stderr.decode().splitlines(), f"unexpected stderr:\n{describe(p)}"
    assert 1 <= len(lines) <= 2, f"want one error line, got {len(lines)}:\n" + "\n".join(lines)
    if len(lines) == 2:
        assert "disabled" in lines[1] and names not in lines[1], lines
    error = lines[0]
    assert names in error, f"the message does not name {names}: {error}"
    if shown is not None:
        assert shown in error, f"the message does not show the value {shown!r}: {error}"
    if accepted:
        assert "accepted" in error, f"the message does not say what is accepted: {error}"
    assert len(error) < 1100, error
    return error


def check_nothing_created(cwd, *dumps):
    assert os.listdir(cwd) == [], f"files created in the working directory: {os.listdir(cwd)}"
    for d in dumps:
        assert not os.path.exists(d), f"{d} was created"


def run_all(items, work):
    """{key: work((key, value))} for a list of (key, value), two runs at a time."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([k for k, _ in items], pool.map(work, items)))


def test_every_variable_rejects_bad_values(tmp_path, baseline):
    def work(item):
        key, c = item
        cwd, dump = tmp_path / key / "cwd", tmp_path / key / "dump"
        cwd.mkdir(parents=True)
        return run_under_shim(c["env"], cwd, dump), cwd, dump

    results = run_all(list(ENV_CASES.items()), work)
    failures = []
    for key, c in ENV_CASES.items():
        p, cwd, dump = results[key]
        try:
            check_one_error(p, baseline, c["names"], c["shown"], c["accepted"])
            check_nothing_created(cwd, dump)
        except AssertionError as e:
            failures.append(f"[{key}] {e}")
    assert not failures, f"{len(failures)} of {len(ENV_CASES)} cases failed:\n\n" + "\n\n".join(failures)


def test_config_file_errors(tmp_path, baseline):
    not_json = tmp_path / "not_json.json"
    not_json.write_text("level: L2\ntask = tensor\n")
    directory = tmp_path / "a_directory"
    directory.mkdir()
    cases = {
        "not-json": ({"MSPROBE_CONFIG": str(not_json)}, "MSPROBE_CONFIG", str(not_json), True),
        "directory": ({"MSPROBE_CONFIG": str(directory)}, "MSPROBE_CONFIG", str(directory), True),
        "missing": ({"MSPROBE_CONFIG": str(tmp_path / "missing.json")}, "MSPROBE_CONFIG",
                    str(tmp_path / "missing.json"), True),
    }
    for key, (content, field, shown) in FILE_CASES.items():
        path = tmp_path / f"config-{key}.json"
        path.write_text(json.dumps({"dump_path": str(tmp_path / key / "file_dump"), **content}))
        cases[key] = ({"MSPROBE_CONFIG": str(path)}, field, shown, True)

    def work(item):
        key, (env, _, _, _) = item
        cwd = tmp_path / key / "cwd"
        cwd.mkdir(parents=True)
        # No MSPROBE_DUMP_PATH: the file's dump_path (or the default ./msprobe_dump) would be used.
        env = dict(env)
        p = run([PYTHON, TRAIN, "--steps", "2"], dict(with_shim(clean_env()), **env), cwd=str(cwd))
        return p, cwd

    results = run_all(list(cases.items()), work)
    failures = []
    for key, (env, field, shown, accepted) in cases.items():
        p, cwd = results[key]
        try:
            error = check_one_error(p, baseline, field, shown, accepted)
            assert "MSPROBE_CONFIG" in error, error  # says which file
            check_nothing_created(cwd, tmp_path / key / "file_dump")
        except AssertionError as e:
            failures.append(f"[{key}] {e}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n\n" + "\n\n".join(failures)


def test_unwritable_dump_paths(tmp_path, baseline):
    regular = tmp_path / "regular_file"
    regular.write_text("not a directory\n")
    cases = {
        "under-a-regular-file": (str(regular / "dump"), "MSPROBE_DUMP_PATH"),
        "a-regular-file": (str(regular), "MSPROBE_DUMP_PATH"),
    }

    def work(item):
        key, (path, _) = item
        cwd = tmp_path / key / "cwd"
        cwd.mkdir(parents=True)
        return run_under_shim({"MSPROBE_DUMP_PATH": path}, cwd, path), cwd

    results = run_all(list(cases.items()), work)
    failures = []
    for key, (path, var) in cases.items():
        p, cwd = results[key]
        try:
            check_one_error(p, baseline, var, path, accepted=False)
            check_nothing_created(cwd)
            assert regular.read_text() == "not a directory\n"
        except AssertionError as e:
            failures.append(f"[{key}] {e}")
    assert not failures, "\n\n".join(failures)


def test_dump_root_that_cannot_be_created(tmp_path, baseline):
    """/proc/<name>: access() says /proc is writable for root, but no directory can be made there. The host must
    run unchanged; the shim must say so once (not once per step: a long training would flood stderr), naming the
    path, plus at most a final summary line."""
    path = "/proc/msprobe_shim_test_dump"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = run_under_shim({"MSPROBE_DUMP_PATH": path}, cwd, path)
    assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
    lines = shim_lines(p.stderr)
    assert lines, "the shim said nothing about a dump path it could not create:\n" + describe(p)
    errors = lines[:-1] if len(lines) > 1 and ("disabled" in lines[-1] or "incomplete" in lines[-1]) else lines
    assert len(errors) == 1 and path in errors[0], (
        f"want one line naming {path} (plus at most a final summary), got {len(lines)}:\n" + "\n".join(lines))
    check_nothing_created(cwd)
    assert not os.path.exists(path)


def test_config_file_dump_path_unwritable(tmp_path, baseline):
    regular = tmp_path / "regular_file"
    regular.write_text("x")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L2", "dump_path": str(regular / "dump")}))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = run([PYTHON, TRAIN, "--steps", "2"], dict(with_shim(clean_env()), MSPROBE_CONFIG=str(config)), cwd=str(cwd))
    error = check_one_error(p, baseline, "dump_path", str(regular / "dump"), accepted=False)
    assert "config.json" in error or "MSPROBE_CONFIG" in error, error
    check_nothing_created(cwd)


def test_read_only_directory(tmp_path, baseline):
    """A chmod-0500 directory: root may still write there (CAP_DAC_OVERRIDE), so the shim must dump as usual;
    anyone else gets the one-line error."""
    parent = tmp_path / "read_only"
    parent.mkdir()
    dump = parent / "dump"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    parent.chmod(0o500)
    try:
        p = run_under_shim({}, cwd, dump)
    finally:
        parent.chmod(0o700)
    if os.geteuid() == 0:
        assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
        assert shim_lines(p.stderr) == [], describe(p)
        assert sorted(dump_dirs(dump)) == [("step0", "rank"), ("step1", "rank")], os.listdir(dump)
    else:
        check_one_error(p, baseline, "MSPROBE_DUMP_PATH", str(dump), accepted=False)
        assert not dump.exists()
    check_nothing_created(cwd)


def test_unmatchable_list_item_only_warns(tmp_path, baseline):
    """Garbage bytes in MSPROBE_LIST make a valid item that can never match: one warning, capture stays on (and,
    the list matching nothing, no kernel is dumped)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    dump = tmp_path / "dump"
    p = run_under_shim({"MSPROBE_LIST": GARBAGE}, cwd, dump)
    assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
    lines = shim_lines(p.stderr)
    assert len(lines) == 2 and "MSPROBE_LIST" in lines[0] and GARBAGE_SHOWN in lines[0], lines
    assert "disabled" not in lines[0], lines
    assert lines[1].startswith("msprobe-shim: 0 of ") and "kernels matched MSPROBE_LIST=" in lines[1], lines  # at exit
    check_nothing_created(cwd)


def test_valid_configuration_is_silent(tmp_path, baseline):
    """The control: a valid configuration in every variable prints nothing and dumps."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    dump = tmp_path / "dump"
    env = {"MSPROBE_TASK": "statistics", "MSPROBE_STEP": "0-1", "MSPROBE_RANK": "all", "MSPROBE_LIST": "all",
           "MSPROBE_SCOPE": "none", "MSPROBE_DATA_MODE": "all", "MSPROBE_SUMMARY_MODE": "statistics",
           "MSPROBE_STACK": "off", "MSPROBE_COMPRESS": "off", "MSPROBE_BUFFER_MB": "64",
           "MSPROBE_STEP_MARKER": "ApplyAdamWV2", "MSPROBE_LOG_LEVEL": "warn", "MSPROBE_ENABLE": "1"}
    p = run_under_shim(env, cwd, dump)
    assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
    assert shim_lines(p.stderr) == [], describe(p)
    assert sorted(dump_dirs(dump)) == [("step0", "rank"), ("step1", "rank")]
    check_nothing_created(cwd)


@pytest.mark.parametrize("name,value,meant", [("MSPROBE_TASKS", "tensor", "MSPROBE_TASK"),
                                              ("MSPROBE_DUMPPATH", "x", "MSPROBE_DUMP_PATH"),
                                              ("MSPROBE_SETP", "1", "MSPROBE_STEP")])
def test_a_misspelt_variable_is_named_with_the_one_meant(tmp_path, baseline, name, value, meant):
    """Issue 39: values were checked strictly, names not at all: MSPROBE_TASKS=tensor gave a statistics dump and not a
    word. Now one line names it and the setting it is closest to; the rest of the configuration still applies."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    dump = tmp_path / "dump"
    p = run_under_shim({name: value}, cwd, dump)
    assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
    lines = shim_lines(p.stderr)
    assert len(lines) == 1, lines
    assert name in lines[0] and f"did you mean {meant}?" in lines[0] and "warning" in lines[0], lines
    assert sorted(dump_dirs(dump)) == [("step0", "rank"), ("step1", "rank")]  # capture went on, with the defaults
    # MSPROBE_ENABLE=0 asks the shim to stay out of the way: nothing is said.
    quiet = run_under_shim({name: value, "MSPROBE_ENABLE": "0"}, tmp_path / "cwd", tmp_path / "dump0")
    assert shim_lines(quiet.stderr) == [], describe(quiet)


ACL_APP = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", "build"), "bin", "acl_app")


@pytest.mark.parametrize("env,said", [
    ({"MSPROBE_LIST": "Matmull"},
     r"0 of \d+ kernels matched MSPROBE_LIST=Matmull; op types seen: Add, Adds, ApplyAdamWV2, .*Gelu, .*Matmul, "),
    ({"MSPROBE_STEP": "7"}, r"MSPROBE_STEP=7 selected none of the \d+ kernels: this run had steps 0-1$"),
    ({"MSPROBE_RANK": "3", "RANK_ID": "0"},
     r"MSPROBE_RANK=3 selected none of the \d+ kernels: this process is rank 0$"),
])
def test_filters_that_select_nothing_say_so_at_exit(tmp_path, baseline, env, said):
    """Issue 39: --list Matmull, --step 7 on a 2-step run: no dump, no line, exit 0, and after an hour-long job an
    empty folder and no clue. Now one line at exit, at the default level, says which filter left nothing and why."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = run_under_shim(env, cwd, tmp_path / "dump")
    assert p.returncode == 0 and p.stdout == baseline.stdout, describe(p)
    lines = shim_lines(p.stderr)
    assert len(lines) == 1 and re.search(said, lines[0]), lines
    assert "warning" not in lines[0], lines  # an outcome, not a problem
    assert dump_dirs(tmp_path / "dump") == {}


def test_a_step_filter_on_a_program_with_no_optimizer_says_how_steps_end(tmp_path):
    """Every inference loop: no step marker ever runs, so MSPROBE_STEP=1 can select nothing."""
    env = with_shim(clean_env(MSPROBE_DUMP_PATH=str(tmp_path / "dump"), MSPROBE_STEP="1"))
    p = run([ACL_APP], env, cwd=str(tmp_path))
    assert p.returncode == 0, describe(p)
    lines = shim_lines(p.stderr)
    assert len(lines) == 1 and "this run had step 0 only (no step ended" in lines[0], lines
    assert "MSPROBE_STEP_MARKER" in lines[0] and "msprobe_shim_step()" in lines[0], lines


# Names in the scripts that are not variables of theirs: misspelt settings the tests use on purpose, a placeholder,
# a C macro a generator reads (MSPROBE_HOOK_FAMILY) and the name this test invents.
MISSPELT_ON_PURPOSE = {"MSPROBE_TASKS", "MSPROBE_DUMPPATH", "MSPROBE_SETP", "MSPROBE_STEPS", "MSPROBE_NAME",
                       "MSPROBE_X", "MSPROBE_FOO_BAR_BAZ", "MSPROBE_HOOK_FAMILY", "MSPROBE_NOT_A_SCRIPTS_NAME"}
SCRIPT_VARIABLE = re.compile(r"MSPROBE_[A-Z0-9_]+")


def script_variables():
    """Every MSPROBE_* name the project's scripts, tests and benchmarks read or set (their .py and .sh files)."""
    root = os.environ.get("MSPROBE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    names = set()
    for folder in ("scripts", "test", "bench", "packaging", "examples", ".ci"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                if f.endswith((".py", ".sh")) or f == "run":
                    with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                        names.update(SCRIPT_VARIABLE.findall(fh.read()))
    return names - MISSPELT_ON_PURPOSE


def test_the_projects_own_variables_are_not_taken_for_misspelt_settings(tmp_path):
    """The scripts' and tests' MSPROBE_* variables (MSPROBE_BUILD_DIR ...) are in the shim's table of known names, so
    a run from the project's own scripts is not told they are misspelt settings; a name nobody uses still is."""
    names = script_variables()
    assert "MSPROBE_BUILD_DIR" in names and "MSPROBE_KILL_SEED" in names, sorted(names)
    env = with_shim(clean_env(MSPROBE_DUMP_PATH=str(tmp_path / "dump")))
    env.update({n: "1" for n in names if n not in env})
    env.update({"MSPROBE_ENABLE": "1", "MSPROBE_LOG_LEVEL": "warn", "MSPROBE_WRITE_WAIT_S": "30"})
    env = {k: v for k, v in env.items() if not k.startswith("MSPROBE_") or k in names or k == "MSPROBE_DUMP_PATH"}
    for setting in ("MSPROBE_TASK", "MSPROBE_STEP", "MSPROBE_RANK", "MSPROBE_LIST", "MSPROBE_SCOPE", "MSPROBE_CONFIG",
                    "MSPROBE_DATA_MODE", "MSPROBE_SUMMARY_MODE", "MSPROBE_FILE_FORMAT", "MSPROBE_STACK",
                    "MSPROBE_COMPRESS", "MSPROBE_BUFFER_MB", "MSPROBE_OVERFLOW_NUMS", "MSPROBE_STEP_MARKER",
                    "MSPROBE_PRECISION", "MSPROBE_DEVICE_STATS", "MSPROBE_FLIGHT_KERNELS", "MSPROBE_FLIGHT_ON_EXIT"):
        env.pop(setting, None)  # real settings: their values must be valid, and the defaults are
    env["MSPROBE_NOT_A_SCRIPTS_NAME"] = "1"
    p = run([ACL_APP], env, cwd=str(tmp_path))
    assert p.returncode == 0, describe(p)
    unknown = [line for line in shim_lines(p.stderr) if "is not a variable" in line]
    assert len(unknown) == 1 and "MSPROBE_NOT_A_SCRIPTS_NAME" in unknown[0], unknown


def test_a_run_without_cann_headers_says_what_it_cannot_read(tmp_path):
    """Without ASCEND_HOME_PATH (CANN's set_env.sh not sourced) the shim cannot read most aclnn ops' arguments: it says
    so at the first op, names the first op it could not read, and counts them at exit; the host is unchanged."""
    plain = run([PYTHON, TRAIN, "--steps", "2"], clean_env(), cwd=str(tmp_path))
    env = with_shim(clean_env(MSPROBE_DUMP_PATH=str(tmp_path / "dump")))
    del env["ASCEND_HOME_PATH"]
    p = run([PYTHON, TRAIN, "--steps", "2"], env, cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout == plain.stdout, describe(p)
    lines = shim_lines(p.stderr)
    assert "no CANN op headers found" in lines[0] and "ASCEND_HOME_PATH" in lines[0], lines
    unread = [line for line in lines if "no CANN header declares an aclnn op" in line]
    assert len(unread) == 1 and re.search(r"\(aclnn\w+GetWorkspaceSize\)", unread[0]), lines
    m = re.search(r"(\d+) aclnn calls without readable arguments", lines[-1])
    assert m and int(m.group(1)) >= 1, lines
