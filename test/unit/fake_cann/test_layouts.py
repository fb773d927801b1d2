"""The stand-in's two CANN library layouts (test/fake_cann/README.md "Two layouts"), read from the installed ELF files
with binutils (nm, readelf) and exercised through ctypes:

* which library defines which function on each layout: CANN 8.x's libascendcl holds the ACL; on 9.x aclInit, aclrt*,
  aclmdlRI*, the model dump switches and data buffers are libacl_rt's (runtime src/acl/aclrt_impl/acl_rt_wrapper.h),
  acldump* libascend_dump's, aclmdl* and tensor descriptors libacl_mdl's (ge api/acl/acl_model/model/acl_model.cpp),
  aclop* execution libacl_op_executor's, communicators libhcomm's and collectives libhccl's (hccl src/ops/);
* each 9.x library's DT_NEEDED and -Bsymbolic as CANN 9's CMake links it;
* the compatibility libascendcl: exactly 8.x's libascendcl's ACL functions, each a jump to <name>Impl, an alias of the
  function in the library that holds it now;
* libacl_rt reaches libruntime under no runtime function's name (CANN 9 keeps the aclrt implementation inside
  libruntime), where 8.x's libascendcl calls rtMalloc through its PLT;
* a host that dlopens libascendcl.so, as torch_npu and MindSpore still do on CANN 9, gets functions that work.
"""
import os
import re
import subprocess
import sys
import textwrap

import pytest

BUILD = os.environ.get("MSPROBE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build"))
LIB64 = {"8.x": os.path.join(BUILD, "fake_cann", "lib64"), "9.x": os.path.join(BUILD, "fake_cann9", "lib64")}
LIBS = {"8.x": ["ascendcl", "acl_op_compiler", "nnopbase", "opapi", "runtime", "hccl"],
        "9.x": ["acl_rt", "ascend_dump", "acl_mdl", "acl_op_executor", "acl_op_compiler", "nnopbase", "opapi",
                "runtime", "hcomm", "hccl"]}
# function: (its 8.x library, its 9.x library)
HOME = {
    "aclInit": ("ascendcl", "acl_rt"), "aclFinalize": ("ascendcl", "acl_rt"), "aclrtMalloc": ("ascendcl", "acl_rt"),
    "aclrtMallocAlign32": ("ascendcl", "acl_rt"), "aclrtLaunchKernel": ("ascendcl", "acl_rt"),
    "aclmdlRICaptureBegin": ("ascendcl", "acl_rt"), "aclmdlInitDump": ("ascendcl", "acl_rt"),
    "aclmdlSetDump": ("ascendcl", "acl_rt"), "aclCreateDataBuffer": ("ascendcl", "acl_rt"),
    "aclDataTypeSize": ("ascendcl", "acl_rt"),
    "acldumpRegCallback": ("ascendcl", "ascend_dump"), "acldumpGetPath": ("ascendcl", "ascend_dump"),
    "aclopStartDumpArgs": ("ascendcl", "ascend_dump"),
    "aclmdlLoadFromFile": ("ascendcl", "acl_mdl"), "aclmdlExecute": ("ascendcl", "acl_mdl"),
    "aclmdlExecuteV2": ("ascendcl", "acl_mdl"), "aclCreateTensorDesc": ("ascendcl", "acl_mdl"),
    "aclopExecuteV2": ("ascendcl", "acl_op_executor"), "aclopCreateAttr": ("ascendcl", "acl_op_executor"),
    "aclopCompileAndExecute": ("acl_op_compiler", "acl_op_compiler"),
    "aclCreateTensor": ("nnopbase", "nnopbase"), "aclnnAdd": ("opapi", "opapi"), "rtMalloc": ("runtime", "runtime"),
    "HcclGetRootInfo": ("hccl", "hcomm"), "HcclCommInitRootInfo": ("hccl", "hcomm"),
    "HcclCommInitClusterInfo": ("hccl", "hcomm"), "HcclGetRankSize": ("hccl", "hcomm"),
    "HcclCommDestroy": ("hccl", "hcomm"), "HcclGetErrorString": ("hccl", "hcomm"),
    "HcclAllReduce": ("hccl", "hccl"), "HcclBarrier": ("hccl", "hccl"), "HcclSend": ("hccl", "hccl"),
    "HcclAlltoAllV": ("hccl", "hccl"),
}
# The system's libraries, and the sanitizers' runtimes a sanitized build links every object with (scripts/sanitize.sh).
SYSTEM = re.compile(r"^(libc|libm|libstdc\+\+|libgcc_s|libelf|libpthread|libdl|librt|ld-linux.*|lib[at]san|libubsan)\.so")
NEEDED_9X = {
    "acl_rt": {"ascend_dump", "runtime"}, "ascend_dump": {"runtime"},
    "acl_op_executor": {"acl_rt", "ascend_dump", "runtime"},
    "acl_mdl": {"acl_op_executor", "acl_rt", "ascend_dump", "runtime"},
    "acl_op_compiler": {"acl_op_executor", "acl_rt", "runtime"}, "nnopbase": {"acl_rt", "ascend_dump", "runtime"},
    "opapi": {"nnopbase", "runtime"}, "hcomm": {"runtime"}, "hccl": {"hcomm", "acl_rt", "runtime"},
    "ascendcl": {"acl_rt", "ascend_dump", "acl_mdl", "acl_op_executor"}, "runtime": set(),
}
SYMBOLIC_9X = {"acl_rt", "runtime", "acl_mdl", "acl_op_executor", "acl_op_compiler", "opapi", "hccl"}


def lib(layout, name):
    path = os.path.join(LIB64[layout], f"lib{name}.so")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    return path


def tool(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def functions(path):
    """{name: address} of the functions an ELF file defines and exports."""
    out = {}
    for line in tool("nm", "-D", "--defined-only", path).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TW":
            out[parts[2]] = int(parts[0], 16)
    return out


def needed(path):
    return {re.sub(r"^lib|\.so$", "", n) for n in re.findall(r"\(NEEDED\).*\[(.*)\]", tool("readelf", "-d", path))
            if not SYSTEM.match(n)}


def symbolic(path):
    return "(SYMBOLIC)" in tool("readelf", "-d", path)


def plt_names(path):
    """The symbols of an object's JUMP_SLOT (PLT) relocations: every function it calls through its PLT."""
    names = set(re.findall(r"R_(?:X86_64|AARCH64)_JUMP_SLOT\s+\S+\s+(\S+?)(?:@\S*)?\s", tool("readelf", "-rW", path)))
    return names - {"__cxa_finalize", "__gmon_start__"}  # the C runtime's own (aarch64 calls them through the PLT)


@pytest.mark.parametrize("layout", ["8.x", "9.x"])
def test_each_function_lives_in_the_library_its_layout_keeps_it_in(layout):
    defined = {name: functions(lib(layout, name)) for name in LIBS[layout]}
    for fn, homes in HOME.items():
        home = homes[0 if layout == "8.x" else 1]
        assert [name for name, fns in defined.items() if fn in fns] == [home], fn


def test_each_9x_library_needs_and_binds_as_cann_9_links_it():
    for name, want in NEEDED_9X.items():
        path = lib("9.x", name)
        assert needed(path) == want, name
        assert symbolic(path) == (name in SYMBOLIC_9X), name
    assert not symbolic(lib("8.x", "ascendcl"))  # 8.x unchanged


def test_the_compatibility_libascendcl_forwards_every_8x_function_to_its_impl():
    old = {f for f in functions(lib("8.x", "ascendcl")) if f.startswith("acl")}
    compat = lib("9.x", "ascendcl")
    exported = {f for f in functions(compat) if f.startswith("acl")}
    assert exported == old and len(old) > 200
    calls = plt_names(compat)
    assert calls == {f + "Impl" for f in old}, sorted(calls ^ {f + "Impl" for f in old})[:10]
    # Each <name>Impl is an alias of <name> in exactly one of the libraries it needs.
    homes = {name: functions(lib("9.x", name)) for name in NEEDED_9X["ascendcl"]}
    for f in sorted(old):
        where = [name for name, fns in homes.items() if f + "Impl" in fns]
        assert len(where) == 1 and homes[where[0]][f + "Impl"] == homes[where[0]][f], (f, where)


def test_libacl_rt_reaches_libruntime_under_no_runtime_functions_name():
    runtime = {f for f in functions(lib("9.x", "runtime")) if re.match(r"rt[A-Z]", f)}
    calls = plt_names(lib("9.x", "acl_rt"))
    assert not calls & runtime, sorted(calls & runtime)
    assert {"__wrap_rtMalloc", "__wrap_rtMemcpyAsync", "__wrap_rtStreamCreate"} <= calls
    # CANN 8.x's libascendcl calls them through its PLT, under their own names.
    assert {"rtMalloc", "rtMemcpyAsync"} <= plt_names(lib("8.x", "ascendcl"))


HOST = textwrap.dedent("""
    import ctypes, os, sys
    lib64 = sys.argv[1]
    acl = ctypes.CDLL(os.path.join(lib64, "libascendcl.so"))          # as torch_npu and MindSpore open it
    P, S = ctypes.c_void_p, ctypes.c_size_t
    acl.aclrtMalloc.argtypes = [ctypes.POINTER(P), S, ctypes.c_int]
    acl.aclrtMemcpy.argtypes = [P, S, P, S, ctypes.c_int]
    acl.aclrtFree.argtypes = [P]
    assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
    dev = P()
    assert acl.aclrtMalloc(ctypes.byref(dev), 64, 0) == 0 and dev.value
    src, back = (ctypes.c_ubyte * 64)(*range(64)), (ctypes.c_ubyte * 64)()
    assert acl.aclrtMemcpy(dev, 64, src, 64, 1) == 0 and acl.aclrtMemcpy(back, 64, dev, 64, 2) == 0
    assert bytes(back) == bytes(range(64))
    # MindSpore's GetAscendPath: dladdr of the function it was given names a file of the install.
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", P), ("sname", ctypes.c_char_p), ("saddr", P)]
    info = DlInfo()
    libc = ctypes.CDLL(None)
    assert libc.dladdr(ctypes.cast(acl.aclrtMalloc, P), ctypes.byref(info))
    print(info.fname.decode())
    assert acl.aclrtFree(dev) == 0 and acl.aclrtResetDevice(0) == 0 and acl.aclFinalize() == 0
""")


@pytest.mark.parametrize("layout", ["8.x", "9.x"])
def test_a_host_that_dlopens_libascendcl_gets_working_functions(layout, tmp_path):
    env = dict(os.environ, ASCEND_HOME_PATH=os.path.dirname(LIB64[layout]), LD_LIBRARY_PATH=LIB64[layout])
    p = subprocess.run([sys.executable, "-c", HOST, LIB64[layout]], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == os.path.join(LIB64[layout], "libascendcl.so")
