"""MindSpore finds its CANN install with dladdr on a linked CANN function (issue 33; reference/mindspore_runtime.md
§1.1): `dladdr((void *)aclrtMalloc, &info)` must name a file under ".../latest/", or it throws "Get ascend path
failed". The shim exports no CANN function, so with it preloaded that answer is CANN's library for every CANN function
the shim hooks, exactly as without it, while the program's direct calls are still captured (shim/hooks/linked_calls.h).

shim_dladdr_host (dladdr/dladdr_host.cpp) is that program: its plugin libascend_path_probe.so takes the address of
every hooked CANN function (the list generated from the shim's hook families, and compared at run time with the
shim's own), then the program opens <install>/lib64/libascendcl.so and dlsyms aclrtMalloc as MindSpore does, runs
one aclop kernel with direct calls and prints where some GOT entries point. The stand-in is loaded as set_env.sh
would have it: LD_LIBRARY_PATH=build/ascend-toolkit/latest/lib64.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_helpers import (BUILD, FAKE_CANN, SHIM, TESTS_BIN, clean_env, describe, dump_dirs, entries_of,  # noqa: E402
                          load_dump, require_built, run, shim_lines, with_shim)

HOST = os.path.join(TESTS_BIN, "shim_dladdr_host")
LATEST = os.path.join(BUILD, "ascend-toolkit", "latest")
CANN_LIBS = {"libascendcl.so", "libacl_op_compiler.so", "libnnopbase.so", "libopapi.so", "libruntime.so",
             "libhccl.so"}


@pytest.fixture(scope="module", autouse=True)
def built():
    require_built(SHIM, HOST)
    assert os.path.islink(LATEST) and os.path.samefile(LATEST, FAKE_CANN), f"{LATEST} does not lead to {FAKE_CANN}"


def env_through(install, **extra):
    """The environment set_env.sh gives: the install's lib64 on LD_LIBRARY_PATH (and the test's own libraries)."""
    env = clean_env(**extra)
    env["ASCEND_HOME_PATH"] = install
    env["LD_LIBRARY_PATH"] = os.pathsep.join([os.path.join(install, "lib64"), TESTS_BIN])
    return env


def lines_starting(stdout, prefix):
    return [line for line in stdout.decode().splitlines() if line.startswith(prefix)]


def got_entries(stdout):
    """{(object, name, kind): file} from the host's "got: OBJECT NAME KIND -> FILE" lines."""
    out = {}
    for line in lines_starting(stdout, "got: "):
        where, file = line[len("got: "):].split(" -> ")
        out[tuple(where.split())] = file
    return out


@pytest.fixture(scope="module", params=["lazy", "now"])
def binding(request):
    return {"LD_BIND_NOW": "1"} if request.param == "now" else {}


@pytest.fixture(scope="module")
def plain(tmp_path_factory, binding):
    p = run([HOST], env_through(LATEST, **binding), cwd=str(tmp_path_factory.mktemp("plain")), timeout=60)
    assert p.returncode == 0, describe(p)
    return p


def test_without_the_shim_every_hooked_function_is_found_in_cann_under_latest(plain):
    answers = lines_starting(plain.stdout, "dladdr(&")
    assert len(answers) > 60, describe(plain)  # every hooked CANN function (72 when written)
    for line in answers:
        name, file = line[len("dladdr(&"):].split("): ")
        assert file.startswith(os.path.join(LATEST, "lib64") + "/"), line
        assert os.path.basename(file) in CANN_LIBS, line
    assert "aclop Add: ok" in plain.stdout.decode()
    assert lines_starting(plain.stdout, "dlsym(aclrtMalloc): ") == ["dlsym(aclrtMalloc): libascendcl.so"]


def test_with_the_shim_dladdr_answers_the_same_and_calls_are_captured(tmp_path, plain, binding):
    env = with_shim(env_through(LATEST, MSPROBE_DUMP_PATH=str(tmp_path / "dump"), MSPROBE_TASK="tensor", **binding))
    p = run([HOST], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, describe(p)
    assert shim_lines(p.stderr) == [], describe(p)
    # The same answer for every function; the shim's own list of hooked CANN functions is the host's.
    assert lines_starting(p.stdout, "dladdr(&") == lines_starting(plain.stdout, "dladdr(&")
    assert lines_starting(p.stdout, "the shim hooks ") != [], describe(p)
    assert lines_starting(p.stdout, "ascend path: ") == lines_starting(plain.stdout, "ascend path: ")
    # What dlsym hands out for a hooked name stays the shim's hook (MindSpore calls through it).
    assert lines_starting(p.stdout, "dlsym(aclrtMalloc): ") == ["dlsym(aclrtMalloc): libmsprobe_shim.so"]
    assert "aclop Add: ok" in p.stdout.decode()
    # The program's direct calls go to the shim, its plugin's `&aclrtMalloc` stays CANN's, unhooked names are left be.
    got = got_entries(p.stdout)
    assert got[("program", "aclopCompileAndExecute", "JUMP_SLOT")] == "libmsprobe_shim.so", got
    assert got[("program", "aclrtMalloc", "JUMP_SLOT")] == "libmsprobe_shim.so", got
    assert got[("program", "aclrtMemcpy", "JUMP_SLOT")] == "libascendcl.so", got
    assert got[("libascend_path_probe.so", "aclrtMalloc", "GLOB_DAT")] == "libascendcl.so", got
    # CANN's own calls into CANN are the shim's too, as when it exported its hooks (aclrtMalloc -> rtMalloc).
    assert got[("libascendcl.so", "rtMalloc", "JUMP_SLOT")] == "libmsprobe_shim.so", got
    plain_got = got_entries(plain.stdout)
    assert plain_got[("program", "aclopCompileAndExecute", "JUMP_SLOT")] == "libacl_op_compiler.so", plain_got
    assert plain_got[("libascendcl.so", "rtMalloc", "JUMP_SLOT")] == "libruntime.so", plain_got
    # The kernel is in the dump, with its data.
    dirs = dump_dirs(tmp_path / "dump")
    adds = [e for d in dirs.values() for e in entries_of(load_dump(d), "Add").values()]
    assert len(adds) == 1, sorted(dirs)
    assert [a["shape"] for a in adds[0]["input_args"]] == [[4], [4]] and adds[0]["output"][0]["Max"] == 11.0, adds


def test_disabled_shim_patches_nothing(tmp_path, plain, binding):
    env = with_shim(env_through(LATEST, MSPROBE_ENABLE="0", MSPROBE_DUMP_PATH=str(tmp_path / "dump"), **binding))
    p = run([HOST], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, describe(p)
    assert lines_starting(p.stdout, "dladdr(&") == lines_starting(plain.stdout, "dladdr(&")
    assert lines_starting(p.stdout, "dlsym(aclrtMalloc): ") == ["dlsym(aclrtMalloc): libascendcl.so"]
    assert got_entries(p.stdout) == got_entries(plain.stdout)
    assert not (tmp_path / "dump").exists()


def test_a_child_forked_before_the_first_cann_call_captures_on_its_own(tmp_path):
    """The shim reads its configuration and redirects the calls at load, but capture starts at the first call, as it
    always did: a child forked before that is not the child of a capturing process (docs/lifecycle.md)."""
    env = with_shim(env_through(LATEST, MSPROBE_DUMP_PATH=str(tmp_path / "dump")))
    p = run([HOST, "--fork-first"], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, describe(p)
    assert p.stdout.decode().count("aclop Add: ok") == 2, describe(p)
    dirs = dump_dirs(tmp_path / "dump")
    assert sorted(dirs) == [("step0", "rank"), ("step0", "rank1")], sorted(dirs)
    for d in dirs.values():
        assert len(entries_of(load_dump(d), "Add")) == 1, d


def test_address_only_references_are_named_at_info_level(tmp_path):
    env = with_shim(env_through(LATEST, MSPROBE_DUMP_PATH=str(tmp_path / "dump"), MSPROBE_LOG_LEVEL="info"))
    p = run([HOST], env, cwd=str(tmp_path), timeout=60)
    assert p.returncode == 0, describe(p)
    named = [line for line in shim_lines(p.stderr) if "libascend_path_probe.so reaches" in line]
    assert len(named) == 1 and "only by address" in named[0], describe(p)


def test_the_check_fails_without_latest_with_or_without_the_shim(tmp_path):
    """The control: the stand-in loaded from build/fake_cann/lib64 has no "latest" in its path, and MindSpore's check
    refuses it. So the check above passes only because dladdr names the library through "latest"."""
    if "latest" in os.path.realpath(FAKE_CANN):
        pytest.skip(f"the build's own path has \"latest\" in it: {FAKE_CANN}")
    for env in (env_through(FAKE_CANN), with_shim(env_through(FAKE_CANN, MSPROBE_DUMP_PATH=str(tmp_path / "d")))):
        p = run([HOST], env, cwd=str(tmp_path), timeout=60)
        assert p.returncode == 3, describe(p)
        assert "Get ascend path failed" in p.stderr.decode(), describe(p)
