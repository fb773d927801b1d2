"""The commands and quotes of the project's markdown, as the doc tests read them (test_inspect_docs.py, test_readme.py,
test_architecture_doc.py).

What a doc may hold, and how each is checked:

- A ```console block: examples run as they stand. A line `$ COMMAND` (a trailing backslash continues it) runs COMMAND
  with bash; `# exit N` at its end is the exit status it must have (0 when not said). The lines after it, up to the
  next `$ ` line, are output the command must print on stdout, in order and on consecutive lines: a line `...` stands
  for any number of lines, `...` inside a line for any text; lines after the last one quoted are not looked at.
- A ```sh block: commands a reader copies (test_readme.py runs the README's in order, in one shell's state).
  `<!-- not run: REASON -->` on the line before it says why a test does not run it.
- `<!-- checked: COMMAND -->` before a fenced block or a table: the block is COMMAND's whole output, run with bash in the
  source root (`...` as above; a quote that is not the whole output ends with a `...` line).
- `<!-- quoted from: FILE -->` before a fenced block or a table: its lines stand in FILE (of the source tree) in the
  same order, on consecutive lines (`...` for lines left out between them).
"""
import re
from dataclasses import dataclass

FENCE = re.compile(r"^( *)```([^`\s]*)\s*$")  # indented inside a list item, too
MARKER = re.compile(r"^\s*<!--\s*(checked|quoted from|not run):\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    kind: str        # the fence's language ("console", "sh", "" ...), or "table"
    lines: list      # the block's lines, without the fences
    line: int        # 1-based line of its first line in the doc
    marker: tuple    # (kind, text) of the marker on the line before it, or None


def blocks(text):
    """Every fenced block and table of a markdown text, with the marker just before it."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = MARKER.match(lines[i - 1]) if i > 0 else None
        marker = (m.group(1), m.group(2)) if m else None
        fence = FENCE.match(lines[i])
        if fence:
            indent = len(fence.group(1))
            end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("```")), len(lines))
            out.append(Block(fence.group(2), [line[indent:] for line in lines[i + 1:end]], i + 2, marker))
            i = end + 1
        elif lines[i].startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            out.append(Block("table", lines[i:end], i + 1, marker))
            i = end
        else:
            i += 1
    return out


def console_examples(text, name="doc"):
    """[(command, expected exit status, [quoted lines])] of a doc's console blocks, in order."""
    return [step for block in blocks(text) if block.kind == "console" for step in console_steps(block, name)]


def console_steps(block, name="doc"):
    """[(command, expected exit status, [quoted lines])] of one console block."""
    out, lines, i = [], block.lines, 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"{name}:{block.line + i}: a console block must start with a command: {line!r}"
        command = line[2:]
        while command.endswith("\\"):
            i += 1
            command += "\n" + lines[i]  # the backslash stays: bash continues the line
        i += 1
        quoted = []
        while i < len(lines) and not lines[i].startswith("$ "):
            quoted.append(lines[i])
            i += 1
        m = re.search(r"#\s*exit (\d+)\s*$", command)
        out.append((command, int(m.group(1)) if m else 0, quoted))
    return out


def line_matches(quoted, actual):
    parts = quoted.rstrip().split("...")
    return re.fullmatch(".*?".join(map(re.escape, parts)), actual.rstrip(), re.S) is not None


def missing(quoted, actual, whole=False):
    """The first quoted line the output does not hold where it should, or None. `whole`: the quote is all of the
    output (nothing may follow its last line unless that line is `...`), and it starts at the first line."""
    at, free = 0, False  # free: the next quoted line may come after any number of output lines
    for q in quoted:
        if q.strip() == "...":
            free = True
            continue
        while at < len(actual) and not line_matches(q, actual[at]):
            if not free:
                return q
            at += 1
        if at == len(actual):
            return q
        at, free = at + 1, False
    if whole and not free and at < len(actual):
        return f"(nothing more; the output goes on with {actual[at]!r})"
    return None


def found_in(quoted, text_lines):
    """None when the quoted lines stand in `text_lines` in order and on consecutive lines (`...` for a gap), else what
    is wrong: the first quoted line the text lacks, or that they are not together."""
    first = next((q for q in quoted if q.strip() != "..."), None)
    if first is None or any(missing(quoted, text_lines[s:]) is None
                            for s, line in enumerate(text_lines) if line_matches(first, line)):
        return None
    absent = next((q for q in quoted if q.strip() != "..." and not any(line_matches(q, t) for t in text_lines)), None)
    return absent or f"{first} (and the lines after it are there, but not in this order or not together)"
