"""MSPROBE_RACECHECK=1 on examples/stream_race.py (docs/races.md): a tensor the compute stream writes, a second stream
uses (an op on a side stream, an in-place all-reduce on the HCCL stream, or a read before its block goes back to the
caching allocator) and the compute stream overwrites. Each left-out wait is reported in races.json with both kernels
as dump.json names them, their streams, their tensors and the bytes they share; each correct twin is silent."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from shimtest import BUILD, PYTHON, SOURCE, clean_env, run

INSPECT = os.path.join(BUILD, "bin", "msprobe-inspect")

HOST = os.path.join(SOURCE, "examples", "stream_race.py")
ELEMENTS = 1024
OPS = ["adds", "allreduce", "reuse"]
# What the second stream's kernel is, how it touches g, and the race kind with the compute stream's write.
SECOND = {"adds": ("Adds", ["input.0"], "read", "read-write"),
          "allreduce": ("HcclAllReduce", ["input.0", "output.0"], "read-write", "write-write"),
          "reuse": ("Adds", ["input.0"], "read", "read-write")}


def race_run(tmp_path, op, plant):
    r = run([PYTHON, HOST, "--op", op, "--plant", plant, "--elements", str(ELEMENTS)], tmp_path / f"{op}-{plant}",
            env={"MSPROBE_RACECHECK": "1"}).check()
    assert r.stdout.startswith("sum "), r.stdout
    folders = r.dump.folders()
    assert len(folders) == 1, folders
    with open(os.path.join(folders[0].path, "races.json")) as f:
        races = json.load(f)["races"]
    return r, folders[0], races


@pytest.mark.parametrize("op", OPS)
def test_the_correct_program_is_silent(tmp_path, op):
    r, folder, races = race_run(tmp_path, op, "none")
    assert races == {}
    assert "race check" not in r.stderr
    # The check did look: the second stream's kernel is in the dump, on a stream of its own.
    streams = {e["launch"]["stream_id"] for _, e in folder.entries()}
    assert len(streams) == 2, streams


@pytest.mark.parametrize("plant", ["no-wait-before", "no-wait-after"])
@pytest.mark.parametrize("op", OPS)
def test_a_missing_wait_is_reported_with_both_kernels(tmp_path, op, plant):
    r, folder, races = race_run(tmp_path, op, plant)
    assert list(races) == ["race.0"], races
    race = races["race.0"]
    entries = dict(folder.entries())
    a, b = race["first"], race["second"]
    other, tensors, access, kind = SECOND[op]
    # Before: the compute stream's Muls (g's producer) first; after: the second stream's kernel first.
    order = ("Muls", other) if plant == "no-wait-before" else (other, "Muls")
    assert (a["kernel"].split(".")[0], b["kernel"].split(".")[0]) == order
    for side in (a, b):
        assert side["kernel"] in entries
        assert side["stream_id"] == entries[side["kernel"]]["launch"]["stream_id"]
        assert side["step"] == 0
        assert side["stack"] and any("stream_race.py" in frame for frame in side["stack"])  # both call stacks
    assert a["stream_id"] != b["stream_id"]
    assert race["kind"] == kind
    by_op = {a["kernel"].split(".")[0]: a, b["kernel"].split(".")[0]: b}
    assert by_op["Muls"]["access"] == "write" and by_op["Muls"]["tensors"] == ["output.0"]
    assert by_op[other]["access"] == access and by_op[other]["tensors"] == tensors
    # g's bytes, whole, on both sides.
    begin, end = (int(v, 16) for v in race["bytes"])
    assert end - begin == ELEMENTS * 4
    assert [int(v, 16) for v in a["range"]] == [begin, end] == [int(v, 16) for v in b["range"]]
    assert race["count"] == 1
    assert f"race check: 1 {kind} race(s) between streams (1 distinct)" in r.stderr


def test_both_waits_missing_gives_both_races(tmp_path):
    r, folder, races = race_run(tmp_path, "adds", "both")
    pairs = sorted((v["first"]["kernel"].split(".")[0], v["second"]["kernel"].split(".")[0]) for v in races.values())
    assert pairs == [("Adds", "Muls"), ("Muls", "Adds")]
    assert "race check: 2 read-write race(s) between streams (2 distinct)" in r.stderr


def inspect_summary(root, *args):
    p = subprocess.run([INSPECT, "summary", str(root), *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_summary_lists_the_races(tmp_path):
    r, folder, races = race_run(tmp_path, "allreduce", "no-wait-after")
    race = races["race.0"]
    text = inspect_summary(r.dump.root)
    a, b = race["first"], race["second"]
    assert "races between streams (MSPROBE_RACECHECK): 1 distinct in 1 checked folder(s)" in text
    line = next(x for x in text.splitlines() if "write-write" in x)
    assert f"{ELEMENTS * 4} byte(s), 1 time(s)" in line
    assert f"{a['kernel']} (stream {a['stream_id']}, read-write input.0+output.0)" in line
    assert f"{b['kernel']} (stream {b['stream_id']}, write output.0)" in line
    j = json.loads(inspect_summary(r.dump.root, "--json"))
    assert j["races"] == [{"folder": "step0/rank0", "kind": "write-write", "bytes": ELEMENTS * 4, "count": 1,
                           "first": {"kernel": a["kernel"], "stream_id": a["stream_id"], "access": "read-write",
                                     "tensors": ["input.0", "output.0"]},
                           "second": {"kernel": b["kernel"], "stream_id": b["stream_id"], "access": "write",
                                      "tensors": ["output.0"]}}]


def test_summary_of_a_clean_checked_dump_says_none(tmp_path):
    r, folder, races = race_run(tmp_path, "adds", "none")
    assert "races between streams (MSPROBE_RACECHECK): 0 distinct in 1 checked folder(s)" in inspect_summary(r.dump.root)
    assert json.loads(inspect_summary(r.dump.root, "--json"))["races"] == []


def page_json(html, ident):
    m = re.search(r'<script id="' + re.escape(ident) + r'" type="application/json">(.*?)</script>', html, re.S)
    assert m, f"no {ident} in the page"
    return json.loads(m.group(1))


def report_of(tmp_path, root):
    page = tmp_path / "report.html"
    p = subprocess.run([INSPECT, "report", str(root), "-o", str(page)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return page


def test_the_report_shows_the_races_beside_the_kernels(tmp_path):
    r, folder, races = race_run(tmp_path, "adds", "both")
    html = report_of(tmp_path, r.dump.root).read_text()
    data = page_json(html, "report-data")
    assert 'id="races"' in html
    blob = page_json(html, "folder-0")
    names = [data["stems"][blob["name"][2 * i]] + data["tails"][blob["name"][2 * i + 1]] for i in range(len(blob["x"]))]
    expected = sorted((v["first"]["kernel"], v["second"]["kernel"], v["kind"]) for v in races.values())
    assert sorted((x["first"]["name"], x["second"]["name"], x["kind"]) for x in data["races"]) == expected
    for x in data["races"]:
        assert x["folder"] == 0 and x["bytes"] == ELEMENTS * 4 and x["count"] == 1
        for side in (x["first"], x["second"]):
            assert names[side["pos"]] == side["name"]  # the row links to the kernel in the page's data
            assert side["stream"] == dict(folder.entries())[side["name"]]["launch"]["stream_id"]


def test_the_report_draws_the_races_in_a_browser(tmp_path):
    from browser import Browser
    b = Browser.find()
    if b is None:
        pytest.skip(f"no browser test: {Browser.why_not}")
    r, folder, races = race_run(tmp_path, "allreduce", "no-wait-before")
    dom = b.dump_dom(report_of(tmp_path, r.dump.root), "")
    assert dom.by_id("errors").text() == ""
    assert dom.find("body").attrs.get("data-errors") == "0"
    assert dom.by_id("status").attrs.get("data-state") == "done"
    rows = list(dom.by_id("races-table").find_all("tr"))[1:]
    race = races["race.0"]
    assert [[a.text() for a in tr.find_all("a")] for tr in rows] == [[race["first"]["kernel"],
                                                                       race["second"]["kernel"]]]
    assert "write-write" in rows[0].text()


def test_races_json_holds_a_race_before_the_process_ends(tmp_path):
    """Written as the run goes: a host killed (SIGKILL: no exit handler runs) after the race leaves a valid races.json
    that holds it."""
    dump = tmp_path / "dump"
    env = clean_env({"LD_PRELOAD": os.path.join(BUILD, "lib", "libmsprobe_shim.so"), "MSPROBE_DUMP_PATH": str(dump),
                     "MSPROBE_RACECHECK": "1"})
    p = subprocess.Popen([PYTHON, HOST, "--op", "adds", "--plant", "no-wait-after", "--hold", "60"], env=env,
                         cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("sum ")
        assert p.stdout.readline().strip() == "holding"
        path = dump / "step0" / "rank" / "races.json"
        deadline = time.monotonic() + 30
        races = {}
        while time.monotonic() < deadline:
            text = path.read_text() if path.exists() else ""
            if text:  # created empty, then its object in one write: valid whenever it holds something
                races = json.loads(text)["races"]
                if races:
                    break
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGKILL
    assert "race check" not in p.stderr.read()  # the exit line never came
    after = json.loads(path.read_text())["races"]
    assert after == races and list(after) == ["race.0"]
    assert (after["race.0"]["first"]["kernel"].split(".")[0], after["race.0"]["second"]["kernel"].split(".")[0]) == (
        "Adds", "Muls")
