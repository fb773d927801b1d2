#!/usr/bin/env python3
"""Census of the aclnn prototype reader over CANN's headers (a developer's tool, outside CI).

  extract  builds a scratch include tree from CANN's ops repositories (bare git directories, as under /work/.mirror):
           every public op_api/aclnn_*.h, plus a header made from the docs page of each op whose header CANN
           generates at build time, plus the docs pages themselves (for the directions CANN documents).
  run      runs the reader (build/bin/prototype_census, built from shim/aclnn/prototypes.cpp) over a tree and prints,
           per op, its inputs, outputs and in/out tensors, what it could not classify and the tensors its docs page
           says the op writes but the reader reads as inputs; then the figures recorded in docs/prototypes.md.

  scripts/prototype_census.py extract --out /tmp/cann_headers /work/.mirror/hicann+ops-{math,nn,transformer}/repo
  scripts/prototype_census.py run /tmp/cann_headers [--census build/bin/prototype_census] [--quiet]
  scripts/prototype_census.py run /tmp/cann_headers --jsonl saved.jsonl   (a census saved earlier, e.g. an older
                                                                           reader's, summarized the same way)

Nothing extracted is meant to be committed: the tree is CANN's text, read here only to measure the reader.
"""
import argparse
import collections
import html
import json
import os
import re
import subprocess
import sys

HEADER_RE = re.compile(r"(^|/)op_api/aclnn_[^/]*\.h$")
DOC_RE = re.compile(r"(^|/)docs/aclnn[^/]*\.md$")
PHASE1_RE = re.compile(r"aclnnStatus\s+aclnn(\w+?)GetWorkspaceSize\s*\(")
TENSOR_KINDS = ("Tensor", "TensorList")


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def preference(path):
    """Lower is better when two repositories hold a header of the same name: released ops before experimental ones
    and before a repository's vendored copy of another's op (3rd/)."""
    return (path.startswith("experimental/") + ("/3rd/" in path), path)


def repo_label(repo):
    """hicann+ops-nn for /work/.mirror/hicann+ops-nn/repo."""
    repo = repo.rstrip("/")
    return os.path.basename(os.path.dirname(repo) if os.path.basename(repo) == "repo" else repo)


def list_sources(repos):
    """{header file name: (repo, path)} (one per name, by preference) and [(repo, path)] of the docs pages."""
    headers, docs = {}, []
    for repo in repos:
        for f in git(repo, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines():
            if HEADER_RE.search(f):
                base = os.path.basename(f)
                if base not in headers or preference(f) < preference(headers[base][1]):
                    headers[base] = (repo, f)
            elif DOC_RE.search(f):
                docs.append((repo, f))
    return headers, docs


def extract(args):
    """Headers into OUT/aclnnop (one per file name), the prototypes of ops that only a released docs page declares
    into OUT/aclnnop/generated, docs pages into OUT/docs/<repo>/..., and OUT/sources.tsv: where each header came
    from."""
    headers, docs = list_sources(args.repos)
    tree = os.path.join(args.out, "aclnnop")
    os.makedirs(os.path.join(tree, "generated"), exist_ok=True)
    declared = set()
    with open(os.path.join(args.out, "sources.tsv"), "w") as sources:
        for base, (repo, path) in sorted(headers.items()):
            text = git(repo, "show", "HEAD:" + path)
            with open(os.path.join(tree, base), "wb") as out:
                out.write(text)
            declared.update(PHASE1_RE.findall(text.decode("utf-8", "replace")))
            sources.write(f"{base}\t{repo_label(repo)}:{path}\n")
        generated = 0
        for repo, path in docs:
            text = git(repo, "show", "HEAD:" + path).decode("utf-8", "replace")
            dest = os.path.join(args.out, "docs", repo_label(repo), path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w") as out:
                out.write(text)
            protos = [p for p in doc_prototypes(text) if p[0] not in declared]
            if not protos or path.startswith("experimental/"):
                continue
            base = "generated/aclnn_" + snake(protos[0][0]) + ".h"
            with open(os.path.join(tree, base), "a") as out:
                out.write(f"// From {repo_label(repo)}:{path} (CANN generates this header at build time)\n")
                for op, decl in protos:
                    out.write(decl + ";\n")
                    declared.add(op)
            sources.write(f"{base}\t{repo_label(repo)}:{path}\n")
            generated += 1
    print(f"{len(headers)} headers, {generated} docs pages made into headers, {len(docs)} docs pages -> {args.out}")


def snake(camel):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", camel).lower()


def doc_prototypes(text):
    """(op, declaration) for each phase-1 prototype in a docs page's code blocks."""
    found = []
    for m in PHASE1_RE.finditer(text):
        close = text.find(")", m.end())
        if close < 0 or "```" in text[m.end():close]:
            continue
        if m.group(1) not in (op for op, _ in found):
            found.append((m.group(1), text[m.start():close + 1]))
    return found


# ---------------------------------------------------------------------------------------------------------------
# What the docs pages say about each parameter: the 输入/输出 (input/output) column of the parameter table, or the
# 计算输入/计算输出 of the older list style.

ROW_RES = [
    re.compile(r"<td>\s*(?:\*\*)?([A-Za-z_]\w*)(?:\*\*)?\s*(?:[（(][^<]*)?</td>\s*<td>\s*([^<]*?)\s*</td>"),
    re.compile(r"^\|\s*(?:\*\*)?([A-Za-z_]\w*)(?:\*\*)?\s*(?:[（(][^|]*)?\|\s*([^|]*?)\s*\|", re.M),
    re.compile(r"^\s*[-*]\s*(?:\*\*)?([A-Za-z_]\w*)(?:\*\*)?\s*[（(][^，,)）]*[，,]\s*([^)）]*)[)）]", re.M),
]


def doc_word(cell):
    cell = html.unescape(cell).replace(" ", "")
    if re.match(r"^(计算)?输入(/|、|\|)?(计算)?输出|^输入输出", cell):
        return "inout"
    if re.match(r"^(计算)?输出", cell):
        return "out"
    if re.match(r"^(计算)?输入", cell):
        return "in"
    return None


def doc_directions(docs_root):
    """{op: {param: in|out|inout}} from every docs page under docs_root."""
    result = {}
    for top, _, files in os.walk(docs_root):
        for f in files:
            if not f.endswith(".md"):
                continue
            text = open(os.path.join(top, f), encoding="utf-8", errors="replace").read()
            for op, section in doc_sections(text, f[5:-3]):
                dirs = {}
                for rx in ROW_RES:
                    for name, cell in rx.findall(section):
                        word = doc_word(cell)
                        if word and name not in dirs:
                            dirs[name] = word
                if dirs and op not in result:
                    result[op] = dirs
    return result


def doc_sections(text, page_op):
    """(op, text) of each `aclnn<Op>GetWorkspaceSize` heading's section; the whole page when it has none."""
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^#+[^\n]*?aclnn(\w+?)GetWorkspaceSize", text, re.M)]
    if not heads:
        return [(page_op, text)]
    ends = [s for s, _ in heads[1:]] + [len(text)]
    out = []
    for (start, op), end in zip(heads, ends):
        phase2 = re.search(r"^#+[^\n]*aclnn%s\s*$" % re.escape(op), text[start:end], re.M)
        out.append((op, text[start:start + phase2.start()] if phase2 else text[start:end]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The census.


def census_lines(binary, tree):
    roots = [tree] if os.path.basename(tree.rstrip("/")) == "aclnnop" else [os.path.join(tree, "aclnnop")]
    out = subprocess.run([binary, *roots], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def summarize(op, docs):
    """The op's tensors by direction; those the reader could not classify (nothing but const-ness said they are
    inputs, in an op whose output only the last-tensor fallback found); tensors the docs page says the op writes
    but the reader takes for inputs."""
    tensors = [p for p in op.get("params", []) if p["kind"] in TENSOR_KINDS]
    by_dir = collections.defaultdict(list)
    for p in tensors:
        by_dir[p["dir"]].append(p["name"] or "?")
    guessed = any(p.get("rule") == "LastTensor" for p in tensors)
    unclassified = [p["name"] or "?" for p in tensors if guessed and p.get("rule") in ("Const", "LastTensor")]
    doc = docs.get(op["op"], {})
    missed = [f'{p["name"]} (docs: {doc[p["name"]]})' for p in tensors
              if doc.get(p["name"]) in ("out", "inout") and p["dir"] == "Input"]
    return tensors, by_dir, unclassified, missed


FIGURES = [
    ("ops", "ops declared"),
    ("not understood", "not understood (header-less path)"),
    ("no tensor", "without a tensor parameter"),
    ("writes", "with an output or in/out tensor"),
    ("fallback", "  of which only by the last-tensor fallback"),
    ("inplace", "Inplace ops (name starts or ends with Inplace)"),
    ("inplace inout", "  first tensor in/out"),
    ("ref", "tensors named *Ref"),
    ("ref inout", "  in/out"),
    ("docs", "ops with a docs table"),
    ("missed", "  with a tensor the docs say is written, read as input"),
]


def count(n, op, tensors, by_dir, unclassified, missed, docs):
    n["ops"] += 1
    if "error" in op:
        n["not understood"] += 1
        return
    n["no tensor"] += not tensors
    n["writes"] += bool(by_dir["Output"] or by_dir["InOut"])
    n["fallback"] += any(p.get("rule") == "LastTensor" for p in tensors)
    if tensors and (op["op"].startswith("Inplace") or op["op"].endswith("Inplace")):
        n["inplace"] += 1
        n["inplace inout"] += tensors[0]["dir"] == "InOut"
    refs = [p for p in tensors if p["name"].endswith("Ref") or p["name"].endswith("RefOptional")]
    n["ref"] += len(refs)
    n["ref inout"] += sum(p["dir"] == "InOut" for p in refs)
    n["docs"] += op["op"] in docs
    n["missed"] += bool(missed)


def op_line(op, by_dir, unclassified, missed):
    if "error" in op:
        return f'{op["op"]}: NOT UNDERSTOOD ({op["header"]})'
    line = f'{op["op"]}: in {", ".join(by_dir["Input"]) or "-"}; out {", ".join(by_dir["Output"]) or "-"}'
    if by_dir["InOut"]:
        line += f'; inout {", ".join(by_dir["InOut"])}'
    if unclassified:
        line += f'; unclassified {", ".join(unclassified)}'
    if missed:
        line += f'; DOCS SAY WRITTEN: {", ".join(missed)}'
    return line


def run(args):
    if args.jsonl:
        ops = [json.loads(line) for line in open(args.jsonl) if line.strip()]
    else:
        binary = args.census or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                             "prototype_census")
        if not os.access(binary, os.X_OK):
            sys.exit(f"prototype_census: {binary} not built (scripts/build.sh prototype_census)")
        if not os.path.isdir(args.tree):
            sys.exit(f"prototype_census: {args.tree} is not a directory")
        ops = census_lines(binary, args.tree)
    docs_root = os.path.join(args.tree, "docs")
    docs = doc_directions(docs_root) if os.path.isdir(docs_root) else {}
    groups = {"headers": collections.Counter(), "generated": collections.Counter()}
    rules = collections.Counter()
    for op in ops:
        facts = summarize(op, docs)
        tensors, by_dir, unclassified, missed = facts
        count(groups["generated" if "/generated/" in op["header"] else "headers"], op, *facts, docs)
        for p in tensors:
            rules[(p.get("rule", "-"), p["dir"])] += 1
        if not args.quiet or "error" in op or unclassified or missed or not (by_dir["Output"] or by_dir["InOut"]):
            print(op_line(op, by_dir, unclassified, missed))
    print(f"\n# figures{'':48} headers  from docs")
    for key, label in FIGURES:
        print(f"{label:58} {groups['headers'][key]:7}  {groups['generated'][key]:9}")
    print("tensors by rule: " + ", ".join(f"{r}->{d} {c}" for (r, d), c in sorted(rules.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract", help="build a scratch include tree from CANN's ops repositories")
    ex.add_argument("--out", required=True)
    ex.add_argument("repos", nargs="+", help="bare git directories of hicann/ops-math, ops-nn, ops-transformer")
    ru = sub.add_parser("run", help="run the reader over a tree made by extract (or any aclnnop folder)")
    ru.add_argument("tree")
    ru.add_argument("--census", help="the prototype_census program (default: build/bin/prototype_census)")
    ru.add_argument("--quiet", action="store_true", help="only the ops with something to look at, and the figures")
    ru.add_argument("--jsonl", help="summarize this saved output of prototype_census instead of running it")
    args = ap.parse_args()
    extract(args) if args.cmd == "extract" else run(args)


if __name__ == "__main__":
    main()
