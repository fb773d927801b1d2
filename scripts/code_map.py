#!/usr/bin/env python3
"""What the build itself says about the code, for the docs that quote it (docs/architecture.md, docs/test_map.md).

    scripts/code_map.py layers                      the include view of each product library, as a markdown table
    scripts/code_map.py tests [-o FILE]             docs/test_map.md: each product module and the tests that cover it
    scripts/code_map.py tests --check FILE          exit 1, with the command that fixes it, when FILE is not that

Both configure the source tree into a temporary folder with CMake's file API (nothing is built, the build folder is
not touched) and read what CMake decided: each target's sources, the libraries on its link line, its include view
(cmake/layers.cmake); `ctest --show-only=json-v1` gives each test's command.

How a test is said to cover a product module (a .cpp of shim/, collector/, format/, tools/, or a header with no .cpp of
its own, such as record/kernel_record.h):
  - a unit test (defined under test/unit/) covers a module when the program it runs (its gtest, or the helper program
    or library its pytest file names) links the module (its own sources or a library on its link line) AND the test's
    own sources include one of the module's headers (following the test's own headers): its header of the same name,
    or for a .cpp without one, the headers of its folder without a .cpp of their own that it includes (commands.h for
    tools/inspect/cmd_*.cpp). A header-only module is covered by a test that includes it;
  - an integration test (test/integration/, and the benchmarks' smoke tests) covers every module of the programs it
    runs: a program counts as run when its file name (libmsprobe_shim.so, msprobe-inspect, ...) is a string in the
    test file, in a helper module it imports (test/python/, its own folder) through the names it uses, in its command
    line, or in a markdown page the test names (the doc tests run the pages' commands).
"""
import argparse
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("shim", "collector", "format", "record", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FIX = "scripts/code_map.py tests -o docs/test_map.md"


# ---- the build's own account, from a throw-away configure -----------------------------------------------------------

@dataclass
class Target:
    name: str
    kind: str
    artifacts: list          # paths relative to the build folder
    sources: list            # paths relative to ROOT
    links: list              # artifacts of the libraries on its link line (relative to the build folder)
    source_dir: str          # where it is defined, relative to ROOT
    view: str = None         # its include view folder (absolute), when it has one


@dataclass
class Build:
    folder: str
    targets: dict = field(default_factory=dict)   # name -> Target
    tests: list = field(default_factory=list)     # ctest's tests (name, command)

    def by_artifact(self):
        return {a: t for t in self.targets.values() for a in t.artifacts}

    def closure_sources(self, target):
        """Every source compiled into `target`: its own and those of the libraries on its link line."""
        owners = self.by_artifact()
        out = set(target.sources)
        for lib in target.links:
            if lib in owners:
                out.update(owners[lib].sources)
        return out


def configure(folder):
    query = os.path.join(folder, ".cmake", "api", "v1", "query")
    os.makedirs(query)
    open(os.path.join(query, "codemodel-v2"), "w").close()
    r = subprocess.run(["cmake", "-S", ROOT, "-B", folder, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"code_map.py: cmake could not configure the tree:\n{r.stdout}{r.stderr}")
    build = Build(folder)
    reply = os.path.join(folder, ".cmake", "api", "v1", "reply")
    index = json.load(open(glob.glob(os.path.join(reply, "index-*.json"))[0]))
    model = next(o for o in index["objects"] if o["kind"] == "codemodel")
    for ref in json.load(open(os.path.join(reply, model["jsonFile"])))["configurations"][0]["targets"]:
        t = read_target(json.load(open(os.path.join(reply, ref["jsonFile"]))), folder)
        build.targets[t.name] = t
    build.tests = ctest_commands(build)
    return build


def read_target(d, folder):
    links = [f["fragment"] for f in d.get("link", {}).get("commandFragments", []) if f["role"] == "libraries"]
    views = [i["path"] for g in d.get("compileGroups", []) for i in g.get("includes", [])
             if "/include_views/" in i["path"]]
    return Target(name=d["name"], kind=d["type"], artifacts=[a["path"] for a in d.get("artifacts", [])],
                  sources=[s["path"] for s in d["sources"] if not os.path.isabs(s["path"])],
                  links=[os.path.relpath(f, folder) if os.path.isabs(f) else f for f in links if not f.startswith("-")],
                  source_dir=d["paths"]["source"], view=views[0] if views else None)


def ctest_commands(build):
    """[(name, command)]: ctest names a test's command only when its program exists, so empty stand-ins are made."""
    for t in build.targets.values():
        if t.kind == "EXECUTABLE":
            for a in t.artifacts:
                path = os.path.join(build.folder, a)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w"):
                    pass
                os.chmod(path, 0o755)
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build.folder, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"code_map.py: ctest could not list the tests:\n{r.stderr}")
    return [(t["name"], t.get("command", [])) for t in json.loads(r.stdout)["tests"]]


# ---- layers ---------------------------------------------------------------------------------------------------------

def folders_of(target):
    return sorted({os.path.dirname(s) for s in target.sources if s.endswith((".cpp", ".S"))})


def view_folders(view):
    out = []
    for dirpath, dirnames, filenames in os.walk(view):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                out.append(os.path.relpath(p, view))
    return sorted(out)


def layers_table(build):
    rows = []
    for t in build.targets.values():
        if t.view is None or not os.path.isdir(t.view):
            continue
        own = folders_of(t)
        sees = [f for f in view_folders(t.view) if f not in own]
        rows.append((len(sees), t.name, own, sees))
    lines = ["| library | its folders | may include, besides its own |", "|---|---|---|"]
    for _, name, own, sees in sorted(rows):
        lines.append(f"| `{name}` | {', '.join(own)} | {', '.join(sees) or 'nothing'} |")
    return "\n".join(lines) + "\n"


# ---- modules and includes -------------------------------------------------------------------------------------------

def product_files():
    out = []
    for top in PRODUCT:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            out += [os.path.relpath(os.path.join(dirpath, n), ROOT) for n in names if n.endswith((".h", ".cpp"))]
    return sorted(out)


def includes_of(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            return INCLUDE.findall(f.read())
    except OSError:
        return []


def module_headers(files):
    """{module: the headers that stand for it}: see the docstring's rule."""
    stems = {os.path.splitext(f)[0] for f in files if f.endswith(".cpp")}
    shared = {f for f in files if f.endswith(".h") and os.path.splitext(f)[0] not in stems}
    out = {}
    for f in files:
        stem, ext = os.path.splitext(f)
        if ext == ".h" and stem not in stems:
            out[f] = {f}
        elif ext == ".cpp":
            own = stem + ".h"
            out[f] = {own} if own in files else {h for h in includes_of(f)
                                                 if h in shared and os.path.dirname(h) == os.path.dirname(f)}
    return out


def included(sources, through_product):
    """The product headers `sources` include: through their non-product headers only (a test's own), or through
    every header (`through_product`: what a program compiles)."""
    seen, product, todo = set(), set(), list(sources)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for inc in includes_of(path):
            for cand in (inc, os.path.normpath(os.path.join(os.path.dirname(path), inc))):
                if not os.path.isfile(os.path.join(ROOT, cand)):
                    continue
                is_product = cand.split("/")[0] in PRODUCT
                if is_product:
                    product.add(cand)
                if through_product or not is_product:
                    todo.append(cand)
                break
    return product


# ---- what a Python test or script runs ------------------------------------------------------------------------------

def string_tokens(node):
    """The path and word parts of the string constants under `node` (docstrings left out)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.update(t for t in re.split(r"[/\s=:]", n.value) if t)
    return out


def without_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


class PyModule:
    """A Python file: which of `names` (program file names) each top-level name reaches, through the file's other
    top-level names and the helper modules it imports."""

    def __init__(self, path, finder):
        self.path, self.finder = path, finder
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        self.body = without_docstring(tree.body)
        self.defs, self.imports = {}, {}  # name -> node; local alias -> (module path, attribute or None)
        for node in self.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.defs[t.id] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if (p := finder(path, a.name)):
                        self.imports[a.asname or a.name] = (p, None)
            elif isinstance(node, ast.ImportFrom) and node.module and (p := finder(path, node.module)):
                for a in node.names:
                    self.imports[a.asname or a.name] = (p, a.name)


class Reach:
    def __init__(self, programs):
        self.programs, self.modules, self.memo = set(programs), {}, {}

    def find(self, importer, name):
        for folder in (os.path.dirname(importer), os.path.join(ROOT, "test", "python")):
            p = os.path.join(folder, name.replace(".", "/") + ".py")
            if os.path.isfile(p):
                return os.path.normpath(p)
        return None

    def module(self, path):
        if path not in self.modules:
            self.modules[path] = PyModule(path, self.find)
        return self.modules[path]

    def of_page(self, name):
        """The programs a markdown page names: a doc test runs the commands of the pages it names."""
        for folder in (ROOT, os.path.join(ROOT, "docs")):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return set(re.split(r"[/\s=:`()\[\]]", open(path, encoding="utf-8").read())) & self.programs
        return set()

    def of_nodes(self, mod, nodes, stack):
        out = set()
        for node in nodes:
            tokens = string_tokens(node)
            out |= tokens & self.programs
            for page in (t for t in tokens if t.endswith(".md")):
                out |= self.of_page(page)
            for n in ast.walk(node):
                if isinstance(n, ast.Name):
                    out |= self.of_name(mod, n.id, stack)
                elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in mod.imports:
                    path, attr = mod.imports[n.value.id]
                    if attr is None:
                        out |= self.of_name(self.module(path), n.attr, stack)
        return out

    def of_name(self, mod, name, stack):
        key = (mod.path, name)
        if key in self.memo or key in stack:
            return self.memo.get(key, set())
        stack = stack | {key}
        if name in mod.defs:
            out = self.of_nodes(mod, [mod.defs[name]], stack)
        elif name in mod.imports and mod.imports[name][1] is not None:
            path, attr = mod.imports[name]
            out = self.of_name(self.module(path), attr, stack)
        else:
            out = set()
        self.memo[key] = out
        return out

    def of_file(self, path):
        mod = self.module(os.path.normpath(path))
        return self.of_nodes(mod, mod.body, frozenset())


# ---- the map --------------------------------------------------------------------------------------------------------

def kind_of(path):
    rel = os.path.relpath(path, ROOT)
    if rel.startswith("test/unit/"):
        return "unit"
    if rel.startswith(("test/integration/", "bench/")):
        return "integration"
    return None


def test_runs(build, command, reach, by_name):
    """(the file that defines what the test is, the program targets it runs)."""
    owners = build.by_artifact()
    rel = {os.path.relpath(c, build.folder): c for c in command if c.startswith(build.folder)}
    if command and command[0].startswith(build.folder):
        target = owners.get(os.path.relpath(command[0], build.folder))
        return (os.path.join(ROOT, target.source_dir) if target else None), [target] if target else []
    script = next((c for c in command if c.endswith(".py") and os.path.isfile(c)), None)
    if script is None:
        return None, []
    names = reach.of_file(script) | {os.path.basename(c) for c in command}
    runs = [owners[a] for a in rel if a in owners]
    runs += [by_name[n] for n in names if n in by_name]
    return script, sorted({t.name: t for t in runs}.values(), key=lambda t: t.name)


def coverage(build):
    files = product_files()
    headers = module_headers(files)
    program_of = {}  # artifact file name -> target, for the targets that hold product code
    for t in build.targets.values():
        if any(s.split("/")[0] in PRODUCT for s in build.closure_sources(t)):
            program_of.update({os.path.basename(a): t for a in t.artifacts})
    reach = Reach(program_of)
    unit, integration = {m: set() for m in headers}, {m: set() for m in headers}
    runners = {}  # integration test -> the programs it runs
    for name, command in build.tests:
        where, runs = test_runs(build, command, reach, program_of)
        kind = kind_of(where) if where else None
        if kind is None or not runs:
            continue
        if kind == "integration":
            runners[name] = sorted({os.path.basename(t.artifacts[0]) for t in runs})
        for t in runs:
            linked = build.closure_sources(t)
            if kind == "integration":
                compiled = linked | included(linked, True)
                for m in headers:
                    if m in compiled:
                        integration[m].add(name)
                continue
            own = included([s for s in t.sources if s.split("/")[0] not in PRODUCT], False)
            for m, hs in headers.items():
                if hs & own and (m.endswith(".h") or m in linked):
                    unit[m].add(name)
    return headers, unit, integration, runners


def test_map(build):
    headers, unit, integration, runners = coverage(build)
    groups = {}
    for name, programs in runners.items():
        groups.setdefault(tuple(programs), []).append(name)
    label = {key: f"I{i + 1}" for i, key in enumerate(sorted(groups))}
    out = [
        "# Test map",
        "",
        f"Generated by `{FIX}` from what CMake and ctest say: for each product module, the tests",
        "that cover it (run one with `ctest -R NAME`). Not kept by hand: the ctest `architecture.test_map` fails when",
        "this file is not what the script writes.",
        "",
        "- A **unit test** covers a module when the program it runs links the module and its own sources include the",
        "  module's header (or through the test's own headers; a header-only module: the test includes it).",
        "- An **integration test** covers every module of the programs it runs; the column counts them and names their",
        "  groups (below).",
        "",
        "| module | unit tests | integration tests |",
        "|---|---|---|",
    ]
    for m in sorted(headers):
        tests = ", ".join(f"`{t}`" for t in sorted(unit[m])) or "**none**"
        hit = sorted(label[k] for k in groups if set(groups[k]) & integration[m])
        out.append(f"| `{m}` | {tests} | {len(integration[m])} ({', '.join(hit)}) |" if hit else
                   f"| `{m}` | {tests} | none |")
    out += ["", "## Integration tests, by the programs they run", ""]
    for key in sorted(groups):
        n = len(groups[key])
        out.append(f"**{label[key]}**, {n} test{'s' if n > 1 else ''} running {', '.join(key)}: "
                   + ", ".join(f"`{t}`" for t in sorted(groups[key])))
        out.append("")
    bare = [m for m in sorted(headers) if not unit[m]]
    out += ["## Modules no unit test reaches", "",
            f"{len(bare)} of {len(headers)}: " + ", ".join(f"`{m}`" for m in bare), ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["layers", "tests"])
    ap.add_argument("-o", "--output", help="write the map to this file (default: stdout)")
    ap.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from what would be written")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="code_map_")
    try:
        build = configure(os.path.join(folder, "build"))
        text = layers_table(build) if args.what == "layers" else test_map(build)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{args.check} is not what the code says now: run {FIX}")
        print(f"{args.check} is up to date")
    elif args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
