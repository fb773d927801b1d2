"""msprobe-inspect report (issue 31): one self-contained HTML file that shows a dump.

The dumps are REAL (examples/train.py under the shim on the CANN stand-in): statistics dumps of a run with a planted
overflow (--overflow-at 1: a Muls scales an activation to inf) and of a clean run, a two-rank tensor dump and a flight
record. Every number the page holds is checked against dump.json and stack.json read with Python's json (the
expected values are computed here, independently of the tool), and the first NaN and first divergence against rules
written out here and against `msprobe-inspect compare`.

The browser tests load the reports in Debian's chromium, headless (a few page loads): the rendered DOM (--dump-dom)
must show the dump's numbers and no error, and a screenshot must not be blank. They skip, saying why, where chromium
cannot start.
"""
import functools
import json
import math
import re
from pathlib import Path

import pytest

import sanitizer_preload
import shimtest
from browser import Browser
from inspect_support import folders, frame_line, inspect, load_dump, stack_of, tensors_of, to_old_form, user_frame

STATS = ("Max", "Min", "Mean", "Norm")
CHARTJS = Path("/usr/share/javascript/chart.js/chart.min.js")


# ---- The dumps -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """dumps(name) -> dump root: "overflow" and "clean" (statistics, 3 steps), "ranks2" (tensor, 2 ranks, overflow at
    step 1), "flight" (MSPROBE_TASK=flight, overflow at step 1)."""
    root = tmp_path_factory.mktemp("report")
    runs = {"overflow": (["--steps", "3", "--overflow-at", "1"], "statistics"),
            "clean": (["--steps", "3"], "statistics"),
            "ranks2": (["--steps", "2", "--ranks", "2", "--overflow-at", "1"], "tensor"),
            "flight": (["--steps", "2", "--overflow-at", "1"], "flight")}

    @functools.lru_cache(maxsize=None)
    def get(name):
        args, task = runs[name]
        run = shimtest.run_train(root / name, *args, task=task)
        return Path(run.dump.root)
    return get


@pytest.fixture(scope="module")
def reports(dumps, tmp_path_factory):
    """reports(name, against=None) -> (html path, msprobe-inspect's stdout)."""
    out = tmp_path_factory.mktemp("html")

    @functools.lru_cache(maxsize=None)
    def get(name, against=None):
        path = out / f"{name}{'-vs-' + against if against else ''}.html"
        args = ["report", dumps(name), "-o", path] + (["--against", dumps(against)] if against else [])
        r = inspect(*args, expect=0)
        return path, r.stdout
    return get


def lines(frames):
    """Frames as the page shows them, each on one line (None: no stack)."""
    return None if frames is None else [frame_line(f) for f in frames]


def page_json(html, ident):
    """The JSON of <script id=ident type="application/json">, read with Python's json."""
    m = re.search(r'<script id="' + re.escape(ident) + r'" type="application/json">(.*?)</script>', html, re.S)
    assert m, f"no {ident} in the page"
    return json.loads(m.group(1))


def page_data(path):
    html = Path(path).read_text()
    data = page_json(html, "report-data")
    return html, data, [page_json(html, f"folder-{i}") for i in range(len(data["folders"]))]


# ---- What the page must hold, computed from the dump ------------------------------------------------------------------
def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def non_finite(t):
    return any(is_num(t.get(s)) and not math.isfinite(t[s]) for s in STATS)


def fold(values, pick):
    values = [float(v) for v in values if is_num(v)]
    if not values:
        return None
    if any(math.isnan(v) for v in values):
        return math.nan
    return pick(values)


def expected_kernel(name, entry):
    rows = tensors_of(entry)
    outs = [t for row, t in rows if row.startswith("output")]
    flags = 0
    for row, t in rows:
        for s in STATS:
            v = t.get(s)
            if is_num(v) and not math.isfinite(v):
                flags |= 4 if row.startswith("input") else (1 if math.isnan(v) else 2)
    if not any(is_num(t.get(s)) for t in outs for s in STATS):
        flags |= 8
    return {"name": name, "x": entry["launch"]["index"], "flags": flags,
            "norm": fold([t.get("Norm") for t in outs], max), "max": fold([t.get("Max") for t in outs], max),
            "min": fold([t.get("Min") for t in outs], min), "rows": rows}


def expected_folder(folder):
    """The kernels of a folder in launch order, with what the page plots for each."""
    data = load_dump(folder)["data"]
    names = sorted(data, key=lambda n: data[n]["launch"]["index"])
    return [expected_kernel(n, data[n]) for n in names]


def page_value(v):
    return {"NaN": math.nan, "Inf": math.inf, "-Inf": -math.inf}.get(v, v) if isinstance(v, str) else v


def same(a, b):
    """Equal as the dump's numbers are: NaN equals NaN; ints and floats by value; bools as bools."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def label(folder):
    return f"{folder.parent.name}/{folder.name}"


def rank_folders_by_label(root):
    return {label(f): f for f in folders(root)}


def first_nan_expected(root):
    """first-nan's rule where no collective joins the candidates (these dumps: each rank's first anomaly is its own
    compute origin): per rank, steps then launch order, the first kernel (not a collective) whose outputs hold NaN/Inf
    while its inputs are finite; independent origins ordered by (step, time stamp, rank)."""
    best = None
    ranks = []
    for f in folders(root):
        if f.name not in ranks:
            ranks.append(f.name)
    done = set()
    for f in folders(root):
        if f.name in done:
            continue
        data = load_dump(f)["data"]
        for k in expected_folder(f):
            outs_bad = any(non_finite(t) for row, t in k["rows"] if row.startswith("output"))
            ins_ok = not any(non_finite(t) for row, t in k["rows"] if row.startswith("input"))
            if outs_bad and ins_ok and not k["name"].startswith("Hccl"):
                key = (int(f.parent.name[4:]), data[k["name"]]["launch"]["timestamp"], ranks.index(f.name))
                if best is None or key < best[0]:
                    best = (key, f, k["name"])
                done.add(f.name)
                break
    return best


# ---- The file ---------------------------------------------------------------------------------------------------------
def test_report_is_one_self_contained_file(dumps, reports):
    path, stdout = reports("overflow")
    html = path.read_text()
    assert "written: " + str(path) in stdout
    # Nothing fetched: no external script, style, image or frame, and a policy that forbids any fetch.
    assert not re.search(r'<(script|img|iframe|link)\b[^>]*\b(src|href)=', html), "the page loads a file"
    assert "default-src 'none'" in html
    # Chart.js is inside, byte for byte Debian's build (embedded when msprobe-inspect was built).
    assert "Chart.js v3.9.1" in html
    if CHARTJS.exists():
        assert CHARTJS.read_text() in html
    data = page_json(html, "report-data")
    assert data["chartjs"] == "3.9.1"
    assert data["root"] == str(dumps("overflow"))


def test_every_kernel_as_in_the_dump(dumps, reports):
    root = dumps("overflow")
    path, _ = reports("overflow")
    html, data, blobs = page_data(path)
    by_label = rank_folders_by_label(root)
    assert [f["label"] for f in data["folders"]] == list(by_label)
    for info, blob in zip(data["folders"], blobs):
        folder = by_label[info["label"]]
        expected = expected_folder(folder)
        assert info["kernels"] == len(expected) == len(blob["x"])
        assert info["nan"] == sum(1 for k in expected if k["flags"] & 1)
        assert info["inf"] == sum(1 for k in expected if k["flags"] & 2)
        assert info["task"] == "statistics"
        bad = [k for k in expected if k["flags"] & 3]
        assert info["first_bad"] == ({"pos": expected.index(bad[0]), "x": bad[0]["x"], "kernel": bad[0]["name"]}
                                     if bad else None)
        for pos, k in enumerate(expected):
            assert data["stems"][blob["name"][2 * pos]] + data["tails"][blob["name"][2 * pos + 1]] == k["name"]
            assert blob["x"][pos] == k["x"]
            assert blob["flags"][pos] == k["flags"], k["name"]
            for key in ("norm", "max", "min"):
                assert same(page_value(blob[key][pos]), k[key]), (k["name"], key, blob[key][pos], k[key])
            frames = stack_of(folder, k["name"])
            sid = blob["stack"][pos]
            # Each frame on one line, as the commands print it; the user's own frame named for the tables.
            assert (None if sid < 0 else [data["frames"][i] for i in data["stacks"][sid]]) == lines(frames)
            if sid >= 0:
                assert frames[data["stack_user"][sid]] == user_frame(frames)
            # A small folder: every kernel's tensors, exactly as dump.json holds them.
            rows = blob["tensors"][str(pos)]
            assert [r[0] for r in rows] == [row for row, _ in k["rows"]]
            for r, (_, t) in zip(rows, k["rows"]):
                assert r[1] == t["dtype"] and r[2] == str(t["shape"])
                for i, s in enumerate(STATS):
                    assert same(page_value(r[3 + i]), t.get(s)), (k["name"], r[0], s)
    # The planted overflow makes NaN/Inf from step 1 on, none before.
    assert [f["nan"] + f["inf"] > 0 for f in data["folders"]] == [False, True, True]


def test_first_nan_is_the_planted_overflow(dumps, reports):
    root = dumps("overflow")
    path, stdout = reports("overflow")
    _, data, _ = page_data(path)
    (key, folder, kernel) = first_nan_expected(root)
    assert kernel.startswith("Muls.")  # train.py's planted overflow
    m = data["first_nan"]
    assert (m["rank"], m["step"], m["kernel"]) == (folder.name, int(folder.parent.name[4:]), kernel)
    assert data["folders"][m["folder"]]["label"] == label(folder)
    assert m["stack"] == lines(stack_of(folder, kernel))
    assert m["stack"][m["stack_user"]] == frame_line(user_frame(stack_of(folder, kernel)))
    assert "train.py" in m["stack"][m["stack_user"]] and "TinyModel.blow_up" in m["stack"][m["stack_user"]]
    assert "finite" in m["verdict"]
    # The route: the next kernels in launch order whose inputs are non-finite.
    expected = expected_folder(folder)
    at = [k["name"] for k in expected].index(kernel)
    route = [k["name"] for k in expected[at + 1:] if k["flags"] & 4][:8]
    assert [s["kernel"] for s in m["spread"]] == route
    assert f"first NaN: {label(folder)} {kernel}" in stdout


def test_against_a_clean_run(dumps, reports):
    a, b = dumps("overflow"), dumps("clean")
    path, stdout = reports("overflow", "clean")
    _, data, blobs = page_data(path)
    b_folders = rank_folders_by_label(b)
    top = []
    for fi, (info, blob) in enumerate(zip(data["folders"], blobs)):
        assert info["against"] == info["label"]
        b_data = load_dump(b_folders[info["label"]])["data"]
        b_stems = {n[: -len(".forward")]: n for n in b_data}
        for pos, k in enumerate(expected_folder(rank_folders_by_label(a)[info["label"]])):
            bn = b_stems.get(k["name"][: -len(".forward")])
            assert blob["matched"][pos] == (bn is not None)
            rel, where = None, ""
            if bn is not None:
                b_rows = dict(tensors_of(b_data[bn]))
                for row, t in k["rows"]:
                    if not row.startswith("output") or row not in b_rows:
                        continue
                    for s in STATS:
                        r = stat_rel(t.get(s), b_rows[row].get(s))
                        if r is not None and (rel is None or r > rel):
                            rel, where = r, f"{row} {s}"
            assert same(page_value(blob["rel"][pos]), rel), (k["name"], blob["rel"][pos], rel)
            assert blob["where"][pos] == where
            if rel:
                top.append((-rel, fi, pos))
    top.sort()
    assert [(d["folder"], d["pos"]) for d in data["top"]] == [(fi, pos) for _, fi, pos in top[:20]]
    assert data["top"] and data["top"][0]["folder"] >= 1  # step 0 is the same in both runs
    # The first divergence is compare's first diverging kernel.
    cmp = inspect("compare", a, b, "--out", path.parent / "cmp", expect=0).stdout
    m = re.search(r"^first diverging kernel \(launch order\): (\S+) (\S+) \(launch_index (\d+)\)", cmp, re.M)
    assert m, cmp
    d = data["first_diff"]
    assert (label_of(d), d["kernel"], d["launch_index"]) == (m.group(1), m.group(2), int(m.group(3)))
    assert f"first divergence: {m.group(1)} {m.group(2)}" in stdout


def stat_rel(a, b):
    """compare's statistics relative difference; a statistic null on one side only is infinitely different."""
    if a is None or b is None:
        return None if a is None and b is None else math.inf
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if (math.isnan(a) and math.isnan(b)) or (math.isinf(a) and a == b) else math.inf
    return abs(a - b) / (max(abs(a), abs(b)) + 1e-10)


def label_of(mark):
    return (f"step{mark['step']}/" if mark["step"] is not None else "") + mark["rank"]


def test_two_ranks_tensor_dump(dumps, reports):
    root = dumps("ranks2")
    path, _ = reports("ranks2")
    _, data, blobs = page_data(path)
    by_label = rank_folders_by_label(root)
    assert sorted({f["rank"] for f in data["folders"]}) == ["rank0", "rank1"]
    assert [f["label"] for f in data["folders"]] == list(by_label)
    for info, blob in zip(data["folders"], blobs):
        expected = expected_folder(by_label[info["label"]])
        assert info["task"] == "tensor"
        assert (info["kernels"], info["nan"], info["inf"]) == (
            len(expected), sum(1 for k in expected if k["flags"] & 1), sum(1 for k in expected if k["flags"] & 2))
        assert [same(page_value(v), k["norm"]) for v, k in zip(blob["norm"], expected)] == [True] * len(expected)
    key, folder, kernel = first_nan_expected(root)
    m = data["first_nan"]
    assert (label_of(m), m["kernel"]) == (label(folder), kernel)
    # Each rank plants its own overflow and no collective carries it first (first-nan's causal order): the other rank's
    # is another origin, on the route after the origin's own rank.
    other = [s for s in m["spread"] if s["rank"] != m["rank"]]
    assert other and other[0]["note"].startswith("another origin: compute"), m["spread"]
    assert [s["rank"] for s in m["spread"]][: len(m["spread"]) - len(other)] == [m["rank"]] * (len(m["spread"]) - len(other))


def test_flight_record(dumps, reports):
    root = dumps("flight")
    path, stdout = reports("flight")
    _, data, _ = page_data(path)
    summary = json.loads(inspect("summary", root, "--json", expect=0).stdout)
    records = summary["flight_records"]
    assert len(data["flight"]) == len(records) >= 1
    assert "flight records: " + str(len(records)) in stdout
    for page, rec in zip(data["flight"], records):
        assert (page["rank"], page["trigger"], page["trigger_kernel"] or None) == (
            rec["rank"], rec["trigger"], rec["trigger_kernel"])
        assert len(page["kernels"]) == rec["kernels"]
        assert page["overflow"] == (rec["overflow"] or "")
        xs = [page_json(path.read_text(), f"folder-{k['folder']}")["x"][k["pos"]] for k in page["kernels"]]
        assert xs[0] == rec["first_launch_index"] and xs[-1] == rec["last_launch_index"]
        assert rec["trigger_kernel"] in [k["name"] for k in page["kernels"]]


def test_dump_of_the_older_form(dumps, tmp_path):
    """A dump written before kernel names ended in .forward (launch fields at each entry's top level) is drawn the
    same, and pairs with a new dump for --against by the name without its token."""
    old = to_old_form(dumps("overflow"), tmp_path / "old")
    path = tmp_path / "old.html"
    out = inspect("report", old, "--against", dumps("overflow"), "-o", path, expect=0).stdout
    _, data, blobs = page_data(path)
    for blob, folder in zip(blobs, folders(old)):
        names = [data["stems"][blob["name"][2 * p]] + data["tails"][blob["name"][2 * p + 1]]
                 for p in range(len(blob["x"]))]
        dump = load_dump(folder)["data"]
        assert names == sorted(dump, key=lambda n: dump[n]["launch_index"])
        assert not any(n.endswith(".forward") for n in names)
        assert all(blob["matched"]) and all(r in (0, None) for r in blob["rel"])  # the same run, paired by name
    assert data["first_nan"]["kernel"].startswith("Muls.") and not data["first_nan"]["kernel"].endswith(".forward")
    assert "first divergence: none" in out


def test_large_folder_keeps_the_named_kernels_tensors_and_grows_linearly(tmp_path):
    """A folder of more than 10,000 kernels writes the tensors only of the kernels the page names; the file grows
    linearly with the kernels (a synthetic statistics dump, one NaN planted)."""
    sizes = {}
    for n in (12_000, 24_000):
        root = tmp_path / f"d{n}"
        nan_at = n // 3
        synthetic_dump(root / "step0" / "rank0", n, nan_at)
        path = tmp_path / f"r{n}.html"
        inspect("report", root, "-o", path, expect=0)
        html, data, (blob,) = page_data(path)
        assert data["folders"][0]["kernels"] == n and data["folders"][0]["nan"] == 1
        m = data["first_nan"]
        assert m["pos"] == nan_at and list(blob["tensors"]) == [str(p) for p in [nan_at] + list(range(nan_at + 1, nan_at + 9))]
        assert blob["flags"][nan_at] == 1 and page_value(blob["max"][nan_at]) != page_value(blob["max"][nan_at])
        sizes[n] = path.stat().st_size
    assert sizes[24_000] - sizes[12_000] <= 1.2 * (sizes[12_000] - len(CHARTJS.read_bytes() if CHARTJS.exists() else b""))


def synthetic_dump(folder, n, nan_at):
    """A statistics folder of n kernels, one output NaN at launch position nan_at; later kernels take it as input."""
    folder.mkdir(parents=True)
    lines = []
    for i in range(n):
        def t(v, nan=False):
            return {"type": "mindspore.Tensor", "dtype": "Float32", "shape": [4, 4], "Max": math.nan if nan else v,
                    "Min": -v, "Mean": v / 4, "Norm": v * 2}
        bad_in = nan_at < i <= nan_at + 8
        entry = {"input_args": [t(1.0 + i % 7, nan=bad_in)], "output": [t(2.0 + i % 5, nan=i == nan_at)],
                 "launch": {"index": i, "task_id": i, "stream_id": 0, "timestamp": 1_700_000_000 + i}}
        lines.append(json.dumps(f"Add.Default.{i}.forward") + ": " + json.dumps(entry))
    (folder / "dump.json").write_text('{"task": "statistics", "level": "L2", "framework": "mindspore", '
                                      '"dump_data_dir": null, "data": {\n' + ",\n".join(lines) + "\n}}\n")


def test_usage_errors(tmp_path, dumps):
    r = inspect("report", expect=2)
    assert "ROOT" in r.stderr
    r = inspect("report", tmp_path / "nothing", "-o", tmp_path / "x.html", expect=2)
    assert "nothing" in r.stderr
    r = inspect("report", dumps("overflow"), "--stat-rtol", "x", "-o", tmp_path / "x.html", expect=2)
    assert "--stat-rtol 'x' is not a number" in r.stderr
    r = inspect("report", dumps("overflow"), "-o", tmp_path / "no" / "such" / "dir" / "x.html", expect=2)
    assert "x.html" in r.stderr
    assert not (tmp_path / "x.html").exists()


# ---- In a browser -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    if sanitizer_preload.ASAN:
        pytest.skip("no browser test under ASan: its runtime is preloaded into every child, chromium too (the normal "
                    "stage loads the pages)")
    b = Browser.find()
    if b is None:
        pytest.skip(f"no browser test: {Browser.why_not}")
    return b


def rendered(browser, path, fragment=""):
    """The DOM after the page drew; it must have finished and logged no error."""
    dom = browser.dump_dom(path, fragment)
    status = dom.by_id("status")
    errors = dom.by_id("errors")
    assert errors is not None and errors.text() == "", errors.text()
    assert dom.find("body").attrs.get("data-errors") == "0"
    assert status.attrs.get("data-state") == "done", status.attrs
    return dom


def numbers(text):
    return [int(x) for x in re.findall(r"\d+", text)]


def test_browser_shows_the_dumps_numbers(browser, dumps, reports):
    """The overflow run against the clean one: overview, the drawn folder's summary, the first NaN with its tensors,
    and the kernels that differ most, as the page shows them."""
    root = dumps("overflow")
    path, _ = reports("overflow", "clean")
    _, data, _ = page_data(path)
    dom = rendered(browser, path)
    by_label = rank_folders_by_label(root)
    # Overview: one cell per folder with its counts.
    cells = list(dom.by_id("overview-table").find_all("td", cls="cell"))
    assert len(cells) == len(by_label)
    for td in cells:
        info = data["folders"][int(td.attrs["data-folder"])]
        expected = expected_folder(by_label[info["label"]])
        assert numbers(td.find("span", cls="kernels").text())[0] == len(expected)
        assert numbers(td.find("span", cls="nan").text())[0] == sum(1 for k in expected if k["flags"] & 1)
        assert numbers(td.find("span", cls="inf").text())[0] == sum(1 for k in expected if k["flags"] & 2)
        assert ("nan" in td.attrs["class"].split()) == any(k["flags"] & 1 for k in expected)
        bad = [k for k in expected if k["flags"] & 3]
        first = td.find("span", cls="first-bad")
        assert (first.text(), first.attrs["title"]) == (f"from launch_index {bad[0]['x']}", bad[0]["name"]) if bad \
            else first is None
    # The drawn folder is the first NaN's, its summary from the dump.
    key, folder, kernel = first_nan_expected(root)
    expected = expected_folder(folder)
    summary = dom.by_id("series-summary")
    assert summary.find(cls="where").text().startswith(label(folder))
    assert int(summary.find(cls="sum-kernels").text()) == len(expected)
    assert int(summary.find(cls="sum-nan").text()) == sum(1 for k in expected if k["flags"] & 1)
    assert int(summary.find(cls="sum-inf").text()) == sum(1 for k in expected if k["flags"] & 2)
    finite = [k for k in expected if k["norm"] is not None and math.isfinite(k["norm"])]
    top = max(finite, key=lambda k: k["norm"])
    assert float(summary.find(cls="sum-norm").text()) == top["norm"]
    # The first NaN: its name, and its tensors' statistics as dump.json holds them.
    assert dom.by_id("first-nan-kernel").text() == kernel
    assert dom.by_id("first-nan-folder").text() == label(folder)
    rows = dict(next(k for k in expected if k["name"] == kernel)["rows"])
    table = dom.by_id("first-nan-tensors")
    shown = list(table.find_all("tr"))[1:]
    assert [tr.attrs["data-row"] for tr in shown] == list(rows)
    for tr in shown:
        for s in STATS:
            assert same(float(tr.find("td", cls="stat-" + s).text()), rows[tr.attrs["data-row"]][s])
    # The kernel panel opened on the first NaN, with its stack.
    panel = dom.by_id("kernel")
    assert kernel in panel.text()
    assert [li.text() for li in panel.find("ol", cls="stack").find_all("li")] == lines(stack_of(folder, kernel))
    # Against: the kernels that differ most, in order, with their values.
    trs = list(dom.by_id("top-diffs").find_all("tr"))[1:]
    assert len(trs) == len(data["top"])
    for tr, d in zip(trs, data["top"]):
        assert (int(tr.attrs["data-folder"]), int(tr.attrs["data-pos"])) == (d["folder"], d["pos"])
        assert same(float(tr.find(cls="rel").text()), page_value(d["rel"]))
        # Its stack cell names the user's own line (train.py's), not the interpreter's _start on every row.
        frames = stack_of(by_label[data["folders"][d["folder"]]["label"]], tr.find("a", cls="kernel").text())
        cell = tr.find("td", cls="stack").find("summary").text()
        assert cell == frame_line(user_frame(frames)) and "examples/train.py, line " in cell, cell
    assert dom.by_id("first-diff-kernel").text() == data["first_diff"]["kernel"]
    assert dom.by_id("flight").attrs.get("hidden") is not None  # no flight record here


def test_browser_link_to_a_kernel_of_another_rank(browser, dumps, reports):
    """#rank=..&step=..&kernel=.. opens that kernel: its tensors (a tensor dump, two ranks) and its stack."""
    root = dumps("ranks2")
    path, _ = reports("ranks2")
    folder = rank_folders_by_label(root)["step0/rank1"]
    k = next(k for k in expected_folder(folder) if k["name"].startswith("HcclAllReduce."))
    dom = rendered(browser, path, f"#rank=rank1&step=0&kernel={k['name']}")
    panel = dom.by_id("kernel")
    assert panel.find(cls="kernel-name").text() == k["name"]
    shown = list(panel.find("table").find_all("tr"))[1:]
    assert [tr.attrs["data-row"] for tr in shown] == [row for row, _ in k["rows"]]
    for tr, (_, t) in zip(shown, k["rows"]):
        for s in STATS:
            assert same(float(tr.find("td", cls="stat-" + s).text()), t[s])
    assert [li.text() for li in panel.find("ol", cls="stack").find_all("li")] == lines(stack_of(folder, k["name"]))
    assert dom.by_id("series-summary").find(cls="where").text().startswith("step0/rank1")


# Drives the page's controls once it has loaded, as a person would, and writes what it saw on <body data-drive>.
DRIVER = r"""<script>
window.addEventListener("load", function () {
  const out = {};
  const $ = (id) => document.getElementById(id);
  const shown = () => document.querySelector("#series-summary .sum-kernels").textContent;
  try {
    $("step").value = "all";
    $("step").dispatchEvent(new Event("change"));
    out.all = shown();
    $("filter").value = "^Gelu\\.";
    $("filter").dispatchEvent(new Event("change"));
    out.gelu = shown();
    $("filter").value = "";
    $("filter").dispatchEvent(new Event("change"));
    $("log").click();
    const canvas = $("series-chart");
    let chart = Chart.getChart(canvas);
    out.scale = chart.options.scales.y.type;
    const r = canvas.getBoundingClientRect();
    const marker = chart.getDatasetMeta(3).data[0];  // the first NaN marker
    chart.options.onClick(new MouseEvent("click", { clientX: r.left + marker.x, clientY: r.top + marker.y }), [], chart);
    out.clicked = document.querySelector("#kernel .kernel-name").textContent;
    const x = chart.scales.x;
    out.range = [x.min, x.max];
    canvas.dispatchEvent(new MouseEvent("mousedown", { clientX: r.left + x.left + 10, clientY: r.top + 60 }));
    canvas.dispatchEvent(new MouseEvent("mouseup", { clientX: r.left + x.left + 210, clientY: r.top + 60 }));
    chart = Chart.getChart(canvas);
    out.zoomed = [chart.scales.x.min, chart.scales.x.max];
    $("whole").click();
    out.whole = [chart.scales.x.min, chart.scales.x.max];
    document.querySelector('#overview-table td.cell[data-folder="0"]').click();
    out.cell = document.querySelector("#series-summary .where").textContent;
  } catch (e) {
    out.error = String((e && e.stack) || e);
  }
  document.body.setAttribute("data-drive", JSON.stringify(out));
});
</script>"""


def test_browser_controls(browser, dumps, reports, tmp_path):
    """The step selector (all steps), the name filter, the log-scale switch, a click on a NaN marker, a drag to zoom
    and the whole-range button, and a click on an overview cell, driven in the page."""
    root = dumps("overflow")
    path, _ = reports("overflow")
    driven = tmp_path / "driven.html"
    driven.write_text(path.read_text().replace("</body>", DRIVER + "</body>"))
    dom = rendered(browser, driven)
    out = json.loads(dom.find("body").attrs["data-drive"])
    assert "error" not in out, out["error"]
    every = [k for f in folders(root) for k in expected_folder(f)]
    assert int(out["all"]) == len(every)
    assert int(out["gelu"]) == sum(1 for k in every if re.match(r"^Gelu\.", k["name"])) > 0
    assert out["scale"] == "linear"
    assert out["clicked"] == next(k["name"] for k in every if k["flags"] & 1)
    lo, hi = out["range"]
    assert lo < out["zoomed"][0] < out["zoomed"][1] < hi
    assert out["whole"] == out["range"]
    assert out["cell"].startswith("step0/")


def test_browser_flight_record(browser, dumps, reports):
    root = dumps("flight")
    path, _ = reports("flight")
    _, data, _ = page_data(path)
    dom = rendered(browser, path)
    body = dom.by_id("flight-body")
    for ri, rec in enumerate(data["flight"]):
        box = body.find(id=f"flight-{ri}")
        assert box.find(cls="trigger").text() == f"{rec['rank']}: {rec['trigger_text']}"
        rows = list(box.find("table").find_all("tr"))[1:]
        assert [tr.find("a").text() if tr.find("a") else None for tr in rows] == [k["name"] for k in rec["kernels"]]
        triggers = [tr for tr in rows if "trigger" in tr.attrs.get("class", "").split()]
        assert [tr.find("a").text() for tr in triggers] == [rec["trigger_kernel"]]


def test_browser_screenshot_is_not_blank(browser, reports, tmp_path):
    from PIL import Image
    path, _ = reports("overflow", "clean")
    png = browser.screenshot(path, tmp_path / "report.png", 1280, 1400)
    img = Image.open(png).convert("RGB")
    assert img.size == (1280, 1400)
    pixels = list(img.getdata())
    colors = set(pixels)
    assert len(colors) > 50, f"{len(colors)} colours: a blank page?"
    # The chart drew: pixels in the Norm line's colour and in the NaN marker's.
    near = lambda p, c: all(abs(a - b) <= 24 for a, b in zip(p, c))  # noqa: E731
    assert sum(1 for p in pixels if near(p, (0x1f, 0x77, 0xb4))) > 100
    assert sum(1 for p in pixels if near(p, (0xd6, 0x27, 0x28))) > 20


# ---- An LLM's dump (issue 42) -----------------------------------------------------------------------------------------
LLM_DRIVER = r"""<script>
window.addEventListener("load", function () {
  const out = {};
  const $ = (id) => document.getElementById(id);
  const chart = () => Chart.getChart($("series-chart"));
  try {
    out.options = [...$("optype").options].map((o) => [o.value, o.textContent]);
    out.marks = chart().options.plugins.markLines.lines.map((m) => m.label || "");
    for (const op of ["MatmulAllReduce", "FlashAttentionScore"]) {
      $("optype").value = op;
      $("optype").dispatchEvent(new Event("change"));
      const c = chart(), points = c.data.datasets.find((d) => d.data.length && d.data[0].k !== undefined).data;
      out[op] = { shown: document.querySelector("#series-summary .sum-kernels").textContent,
                  title: c.options.plugins.tooltip.callbacks.title([{ raw: points[0] }]) };
    }
  } catch (e) {
    out.error = String((e && e.stack) || e);
  }
  document.body.setAttribute("data-drive", JSON.stringify(out));
});
</script>"""


def test_browser_llm_dump(browser, tmp_path):
    """examples/llm_train.py --moe on two ranks, rank 0's attention overflowing at step 1: the op-type selector lists
    the drawn folder's op types with their counts from dump.json (attention, MoE and MC2 kernels among them) and
    draws one op type alone; a long name is shortened in the chart's mark and whole, in lines, on hover; the first
    NaN's route lists the MatmulAllReduce that carried it to rank 1, as an all-reduce's hop is listed."""
    run = shimtest.run([shimtest.PYTHON, str(shimtest.SOURCE) + "/examples/llm_train.py", "--steps", "2", "--ranks",
                        "2", "--moe", "--mark-steps", "--nan-at", "1", "--nan-rank", "0"], tmp_path / "run", shim=True,
                       env={"MSPROBE_TASK": "statistics", "HCCL_CONNECT_TIMEOUT": "60", "HCCL_EXEC_TIMEOUT": "60"},
                       timeout=300).check()
    root = Path(run.dump.root)
    path = tmp_path / "llm.html"
    inspect("report", root, "-o", path, expect=0)
    driven = tmp_path / "driven.html"
    driven.write_text(path.read_text().replace("</body>", LLM_DRIVER + "</body>"))
    dom = rendered(browser, driven)
    out = json.loads(dom.find("body").attrs["data-drive"])
    assert "error" not in out, out["error"]
    data = load_dump(root / "step1" / "rank0")["data"]  # the first NaN's folder, drawn first
    counts = {}
    for name in data:
        counts[name.split(".")[0]] = counts.get(name.split(".")[0], 0) + 1
    assert out["options"][0] == ["", f"all op types ({len(counts)})"]
    assert {v: t for v, t in out["options"][1:]} == {op: f"{op} ({n})" for op, n in counts.items()}
    assert {"FlashAttentionScore", "GroupedMatmulV5", "HcclAlltoAllV", "MatmulAllReduce"} <= set(counts)
    muls = next(n for n in data if n.startswith("Muls."))
    mark = next(m for m in out["marks"] if m.startswith("first NaN: "))
    short = mark[len("first NaN: "):]
    assert len(muls) > 40 and len(short) <= 40 and short.startswith("Muls.\u2026") and muls.endswith(short[6:]), mark
    for op in ("MatmulAllReduce", "FlashAttentionScore"):
        assert int(out[op]["shown"]) == counts[op]
        title = out[op]["title"]
        assert "".join(title) in data and "".join(title).startswith(op + ".") and max(map(len, title)) <= 60, title
        assert len(title) > 1  # these names are longer than a line
    hops = [li.text() for li in dom.by_id("first-nan-spread").find_all("li")]
    mc2 = [h for h in hops if h.startswith("step1/rank1 MatmulAllReduce.")]
    assert len(mc2) == 1 and mc2[0].endswith(": rank 0 -> rank 1"), hops
