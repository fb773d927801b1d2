"""examples/acl_app: one aclop, rt, aclnn and HCCL launch from a directly linked C++ program, each result
checked by the program itself; built with -g and its launch helpers kept as local (static) functions."""
import os
import subprocess

SOURCE = os.environ.get("MSPROBE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build"))
APP = os.path.join(BUILD, "bin", "acl_app")


def test_acl_app_runs_every_launch_family_and_verifies():
    p = subprocess.run([APP], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for family in ("aclop", "rt", "aclnn", "hccl"):
        assert any(line.split()[:2] == [family, "ok"] for line in lines), p.stdout
    assert lines[-1] == "acl_app: all results match"


def test_acl_app_finds_kernels_without_ascend_home_path():
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_HOME_PATH"}
    p = subprocess.run([APP], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr


def test_acl_app_links_cann_directly_and_has_static_helpers():
    needed = subprocess.run(["readelf", "-d", APP], capture_output=True, text=True, check=True).stdout
    for lib in ("libascendcl.so", "libopapi.so", "libnnopbase.so", "libacl_op_compiler.so", "libhccl.so",
                "libruntime.so"):
        assert f"[{lib}]" in needed, lib
    syms = subprocess.run(["nm", "-C", "--defined-only", APP], capture_output=True, text=True, check=True).stdout
    local = [line.split(" ", 2)[2] for line in syms.splitlines() if line.split(" ", 2)[1:2] == ["t"]]
    for helper in ("launch_aclop_add", "launch_rt_vector_add", "launch_aclnn_mul", "launch_hccl_all_reduce"):
        assert any(name.startswith(helper + "(") for name in local), f"{helper} is not a local text symbol"
    sections = subprocess.run(["readelf", "-S", APP], capture_output=True, text=True, check=True).stdout
    assert ".debug_info" in sections
    assert "[clone" not in syms, "acl_app must be built without IPA clones (-O0)"
