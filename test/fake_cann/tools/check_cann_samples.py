#!/usr/bin/env python3
"""Compiles CANN's own plain C++ samples against the stand-in and runs them (outside CI).

Usage: check_cann_samples.py --fake-cann BUILD/fake_cann [--runtime DIR] [--hccl DIR] [--only SUBSTR] [--markdown]
                              [--keep]

--runtime: a checkout (or `git archive`) of hicann/runtime (its example/ folder is read); --hccl: of hicann/hccl
(examples/). A bare mirror is accepted too (its HEAD is exported to a temporary folder).

Which samples: runtime example/ and hccl examples/01_point_to_point, 02_collectives. A sample whose CMakeLists builds an
AscendC kernel (ascendc_library, a .asc file) is listed as skipped; one that links a CANN library the stand-in does
not provide (profiling, TDT channels and queues, libc_sec) as `no link`. Every other sample is compiled with g++ from the sources its
CMakeLists.txt / Makefile names, against BUILD/fake_cann/include, and linked against the stand-in's libraries: on the
CANN 9.x install (--fake-cann BUILD/fake_cann9) as the sample names them; on the 8.x one (BUILD/fake_cann) the 9.x names
the samples link (libacl_rt, libascend_dump, ...) are the stand-in's libascendcl, which holds the same functions. It
then runs with a timeout in a scratch copy of its folder (all its programs at once, for the two-process IPC samples;
with the arguments its run.sh gives, where RUN_PLANS lists them) and passes when every process exits 0.

Prints one line per sample on stderr: `runs`, `links, fails` (and why), `no build` / `no link` (the first compiler or
linker error, or the library the stand-in lacks) or `skipped`; with --markdown the same as a table on stdout.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STAND_IN_LIBS = {"ascendcl", "nnopbase", "opapi", "hccl", "acl_op_compiler", "runtime"}
# CANN 9.x libraries whose functions the stand-in's libascendcl holds (CANN 8.x layout).
NINE_X_IN_ASCENDCL = {"acl_rt", "acl_rt_impl", "ascend_dump", "acl_mdl", "acl_op_executor"}
SYSTEM_LIBS = {"dl", "pthread", "m", "rt", "stdc++"}
NOT_IN_STAND_IN = {"msprofiler", "acl_tdt_channel", "acl_tdt_queue", "ms_tools_ext", "acl_prof", "c_sec"}
RUN_TIMEOUT_S = 120
# Samples whose run.sh passes arguments: (target, arguments, run alone before the others); the others run at once.
RUN_PLANS = {
    "2_advanced_features/ipcevent/1_ipcevent_multi_device": [("precheck", ["2"], True), ("proc_a", ["1"], False),
                                                             ("proc_b", ["1", "1"], False)],
}


def export_tree(src: Path, sub: str, scratch: Path) -> Path:
    """A bare mirror's HEAD exported under scratch; a work tree is used as it is."""
    if (src / sub).is_dir():
        return src
    out = scratch / src.name.replace("/", "_")
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(src), "archive", "HEAD", sub], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def cmake_targets(text: str):
    """[(target, [sources])] from add_executable() calls."""
    out = []
    for m in re.finditer(r"add_executable\s*\(([^)]*)\)", text):
        words = m.group(1).split()
        srcs = [w.replace("${CMAKE_CURRENT_SOURCE_DIR}/", "") for w in words[1:]]
        out.append((words[0], [w for w in srcs if re.search(r"\.(cpp|cc|c)$", w)]))
    return out


def cmake_libs(text: str):
    libs = set()
    for m in re.finditer(r"target_link_libraries\s*\(([^)]*)\)", text):
        for w in m.group(1).split()[1:]:
            n = re.search(r"lib([A-Za-z0-9_]+)\.so", w)
            if n:
                libs.add(n.group(1))
            elif re.fullmatch(r"[A-Za-z0-9_]+", w) and w not in ("PRIVATE", "PUBLIC", "INTERFACE"):
                libs.add(w)
    return libs


class Sample:
    def __init__(self, name, folder: Path, root: Path):
        self.name, self.folder, self.root = name, folder, root
        self.targets, self.libs, self.skip = [], set(), None
        self.flags = ["-std=c++17"]


def runtime_samples(repo: Path):
    out = []
    example = repo / "example"
    for cml in sorted(example.rglob("CMakeLists.txt")):
        folder = cml.parent
        s = Sample(str(folder.relative_to(example)), folder, example)
        text = cml.read_text(errors="replace")
        if re.search(r"ascendc_\w*library", text) or list(folder.glob("*.asc")):
            s.skip = "AscendC kernel"
        s.targets = [(t, [folder / src for src in srcs]) for t, srcs in cmake_targets(text)]
        s.libs = cmake_libs(text) - {"kernels", "Threads::Threads", "pthread"}
        if "-Werror" in text:
            s.flags += ["-Wall", "-Werror"]
        out.append(s)
    return out


def hccl_samples(repo: Path):
    out = []
    for mk in sorted((repo / "examples").glob("0[12]_*/*/Makefile")):
        folder = mk.parent
        s = Sample("hccl/" + str(folder.relative_to(repo / "examples")), folder, repo / "examples")
        text = mk.read_text(errors="replace")
        srcs = re.search(r"^SOURCES\s*=\s*(.*)$", text, re.M).group(1).split()
        target = re.search(r"^TARGET\s*=\s*(\S+)", text, re.M).group(1)
        s.targets = [(target, [folder / x for x in srcs])]
        s.libs = set(re.findall(r"-l([A-Za-z0-9_]+)", text))
        s.flags = ["-std=c++14", "-Werror"]
        out.append(s)
    return out


def link_names(libs, nine_x):
    """The stand-in libraries for the names a sample links, or (None, reason). nine_x: the install has CANN 9.x's
    libraries (the aclrt implementation's own library, libacl_rt_impl, is libacl_rt there)."""
    names = set()
    for lib in sorted(libs):
        if lib in SYSTEM_LIBS:
            continue
        if lib in NOT_IN_STAND_IN:
            return None, f"links lib{lib}.so (not in the stand-in)"
        if lib in NINE_X_IN_ASCENDCL:
            names.add(("acl_rt" if lib == "acl_rt_impl" else lib) if nine_x else "ascendcl")
        elif lib in STAND_IN_LIBS or (nine_x and lib == "hcomm"):
            names.add(lib)
        else:
            return None, f"links {lib} (unknown)"
    return sorted(names), None


def first_error(text: str) -> str:
    for line in text.splitlines():
        if "error" in line or "undefined reference" in line:
            return re.sub(r"^.*?(error|undefined reference)", r"\1", line).strip()[:160]
    return text.strip().splitlines()[-1][:160] if text.strip() else "failed"


def build(s: Sample, fake: Path, work: Path):
    names, why = link_names(s.libs, (fake / "lib64" / "libacl_rt.so").exists())
    if why:
        return why
    inc = fake / "include"
    incs = [inc, inc / "aclnn", s.folder, s.folder.parent, s.folder.parent.parent, s.root]
    for target, srcs in s.targets:
        cmd = ["g++", *s.flags, *[f"-I{d}" for d in incs], *map(str, srcs), f"-L{fake / 'lib64'}",
               *[f"-l{n}" for n in names], "-lpthread", "-ldl", f"-Wl,-rpath,{fake / 'lib64'}", "-o", str(work / target)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            kind = "link" if "undefined reference" in r.stderr else "compile"
            missing = sorted(set(re.findall(r"undefined reference to `([^'(]+)", r.stderr)))
            detail = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "") if missing else first_error(
                r.stderr)
            return f"{kind}: {detail}"
    return None


def wait_for(target, p, work: Path):
    """None, or why the process failed."""
    try:
        out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return f"{target}: timed out after {RUN_TIMEOUT_S} s"
    (work / f"{target}.log").write_text(out)
    if p.returncode != 0:
        errs = [ln for ln in out.splitlines() if "ERROR" in ln or "err" in ln.lower()]
        tail = (errs or out.strip().splitlines() or [""])[0]
        return f"{target}: exit {p.returncode}: {tail.strip()[:150]}"
    return None


def run(s: Sample, work: Path, env):
    plan = RUN_PLANS.get(s.name) or [(t, [], False) for t, _ in s.targets[:len(s.targets) if len(s.targets) > 1 else 1]]
    start = lambda t, args: subprocess.Popen([str(work / t), *args], cwd=work, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)
    problems = []
    for target, args, alone in plan:
        if alone and (why := wait_for(target, start(target, args), work)):
            return why
    procs = [(target, start(target, args)) for target, args, alone in plan if not alone]
    for target, p in procs:
        if why := wait_for(target, p, work):
            problems.append(why)
    return "; ".join(problems) or None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake-cann", required=True, type=Path)
    ap.add_argument("--runtime", type=Path)
    ap.add_argument("--hccl", type=Path)
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = ap.parse_args()
    fake = a.fake_cann.resolve()
    if not (fake / "include" / "acl" / "acl.h").exists():
        sys.exit(f"check_cann_samples: {fake} is not the stand-in's install (no include/acl/acl.h)")
    scratch = Path(tempfile.mkdtemp(prefix="cann_samples_"))
    samples = []
    if a.runtime:
        samples += runtime_samples(export_tree(a.runtime, "example", scratch))
    if a.hccl:
        samples += hccl_samples(export_tree(a.hccl, "examples", scratch))
    if not samples:
        sys.exit("check_cann_samples: no samples (give --runtime and/or --hccl)")
    env = dict(os.environ, ASCEND_HOME_PATH=str(fake), LD_LIBRARY_PATH=str(fake / "lib64"))
    rows = []
    for s in samples:
        if a.only not in s.name:
            continue
        if s.skip:
            rows.append((s.name, "skipped", s.skip))
            continue
        work = scratch / "work" / s.name.replace("/", "__")
        shutil.copytree(s.folder, work)
        why = build(s, fake, work)
        if why:
            rows.append((s.name, "no link" if why.startswith(("link", "links")) else "no build", why))
        else:
            why = run(s, work, env)
            rows.append((s.name, "runs" if why is None else "links, fails", why or ""))
        print(f"{rows[-1][0]:70s} {rows[-1][1]:12s} {rows[-1][2]}", file=sys.stderr, flush=True)
    if a.markdown:
        print("| sample | result | why |\n|---|---|---|")
        for name, res, why in rows:
            print(f"| `{name}` | {res} | {why.replace('|', '/')} |")
    counts = {}
    for _, res, _ in rows:
        counts[res] = counts.get(res, 0) + 1
    print(", ".join(f"{v} {k}" for k, v in sorted(counts.items())), file=sys.stderr)
    if not a.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"scratch: {scratch}", file=sys.stderr)


if __name__ == "__main__":
    main()
