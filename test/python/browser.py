"""Debian's chromium, headless, for the tests and the benchmark of msprobe-inspect's report: load a page from the disk
and read what a person would see (the rendered DOM with --dump-dom, a PNG with --screenshot).

    b = Browser.find()                   # None, with Browser.why_not, where chromium cannot start here
    dom = b.dump_dom(path, "#rank=rank0") # the DOM after the page's scripts ran, parsed: dom.by_id("status")
    b.screenshot(path, png, 1280, 1600)

Every run gets a fresh --user-data-dir and the flags that keep chromium off the network and quiet (no first run, no
background networking, no component update, no sync); as root it needs --no-sandbox.
"""
import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    """An element of the parsed DOM: tag, attrs (dict), children (Nodes and strings)."""

    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.children, self.parent = tag, dict(attrs), [], parent

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag=None, cls=None, **attrs):
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            if cls and cls not in n.attrs.get("class", "").split():
                continue
            if all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                yield n

    def find(self, tag=None, cls=None, **attrs):
        return next(self.find_all(tag, cls, **attrs), None)

    def by_id(self, ident):
        return next((n for n in self.iter() if n.attrs.get("id") == ident), None)

    def __repr__(self):
        return f"<{self.tag} {self.attrs}>"


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse_html(text):
    b = _TreeBuilder()
    b.feed(text)
    b.close()
    return b.root


class Browser:
    why_not = ""

    def __init__(self, exe):
        self.exe = exe

    @classmethod
    def find(cls):
        """The browser when chromium is installed and loads a page here; else None with why_not set."""
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            cls.why_not = "chromium is not installed (scripts/setup.sh installs Debian's)"
            return None
        b = cls(exe)
        with tempfile.TemporaryDirectory() as d:
            page = Path(d) / "probe.html"
            page.write_text("<!DOCTYPE html><p id=probe></p><script>document.getElementById('probe')"
                            ".textContent = 'ran'</script>")
            try:
                r = b.run("--dump-dom", page.as_uri(), timeout=120)
            except (OSError, subprocess.TimeoutExpired) as e:
                cls.why_not = f"chromium cannot start here: {e}"
                return None
            if r.returncode != 0 or ">ran<" not in r.stdout:
                tail = "\n".join(r.stderr.strip().splitlines()[-5:])
                cls.why_not = f"chromium cannot start here (exit {r.returncode}): {tail}"
                return None
        return b

    def run(self, *args, timeout=180, extra_flags=()):
        with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
            flags = ["--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--disable-default-apps",
                     "--disable-extensions", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={profile}"]
            if os.geteuid() == 0:
                flags.append("--no-sandbox")
            return subprocess.run([self.exe, *flags, *extra_flags, *args], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)

    def dump_dom_text(self, path, fragment="", width=1280, height=1000, timeout=180):
        r = self.run(f"--window-size={width},{height}", "--dump-dom", Path(path).resolve().as_uri() + fragment,
                     timeout=timeout)
        assert r.returncode == 0, f"chromium --dump-dom exited {r.returncode}:\n{r.stderr[-3000:]}"
        return r.stdout

    def dump_dom(self, path, fragment="", **kw):
        return parse_html(self.dump_dom_text(path, fragment, **kw))

    def screenshot(self, path, png, width=1280, height=1600, fragment="", timeout=180):
        r = self.run(f"--window-size={width},{height}", f"--screenshot={png}",
                     Path(path).resolve().as_uri() + fragment, timeout=timeout)
        assert r.returncode == 0 and Path(png).is_file(), f"chromium --screenshot exited {r.returncode}:\n{r.stderr[-3000:]}"
        return Path(png)
