"""msprobe-inspect summary and replay on flight records (MSPROBE_TASK=flight, issue 20).

A flight record is a tensor dump of the last kernels before a trigger, each kernel marked with flight_trigger (and
flight_trigger_kernel for an overflow). The records here are made without the flight task: examples/train.py runs
under the shim with MSPROBE_TASK=tensor, and flight_record() keeps a launch_index window of that REAL dump, deleting
every other kernel from dump.json, construct.json, stack.json, dump_tensor_data/ and mapping.csv, then adds the
fields. summary must name the record, its trigger and its span; replay must name the first recorded kernel that
departs from its CPU reference, or, when none does, the first output that turned non-finite from finite inputs.
"""
import csv
import functools
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import shimtest
from inspect_support import folders, inspect, load_dump, tensors_of


@dataclass
class Window:
    """The kernels of launch_index lo..hi (each rank folder) become one record with this trigger."""
    lo: int
    hi: int
    trigger: str
    trigger_kernel: str = None  # for "overflow": the kernel whose output is non-finite


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """dumps(name): a tensor dump of train.py, 2 steps: "clean", "overflow" (--overflow-at 1: a Muls kernel
    multiplies an activation by inf at step 1), "ranks2" (2 rank processes)."""
    root = tmp_path_factory.mktemp("flight")
    args = {"clean": [], "overflow": ["--overflow-at", "1"], "ranks2": ["--ranks", "2"]}

    @functools.lru_cache(maxsize=None)
    def get(name):
        run = shimtest.run_train(root / name, "--steps", "2", *args[name], task="tensor")
        return Path(run.dump.root)
    return get


def kernels(dump):
    """(folder, name, entry) of every kernel, folders in order, kernels by launch_index."""
    out = []
    for f in folders(dump):
        data = load_dump(f)["data"]
        out += [(f, n, data[n]) for n in sorted(data, key=lambda n: data[n]["launch"]["index"])]
    return out


def muls(dump):
    """The planted overflow: (folder, name, entry) of the Muls kernel."""
    (hit,) = [k for k in kernels(dump) if k[1].startswith("Muls.")]
    return hit


def overflow_text(folder, entry):
    """overflow_check's finding for the entry's first output, counted from its file."""
    a = np.load(Path(folder) / "dump_tensor_data" / entry["output"][0]["data_name"])
    return f"output.0: {int(np.isnan(a).sum())} NaN, {int(np.isposinf(a).sum())} +Inf, {int(np.isneginf(a).sum())} -Inf"


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)  # NaN / Infinity written as msprobe writes them


def drop_tensor_files(folder, entries):
    """Deletes the files of `entries`' tensors; returns the file names deleted."""
    gone = set()
    for entry in entries:
        for _, t in tensors_of(entry):
            if t.get("data_name"):
                (Path(folder) / "dump_tensor_data" / t["data_name"]).unlink(missing_ok=True)
                gone.add(t["data_name"])
    return gone


def keep_stacks(folder, names):
    """stack.json with only `names` (grouped {"0": [[names], [frames]]} form; emptied groups go, renumbered)."""
    path = Path(folder) / "stack.json"
    if not path.exists():
        return
    with open(path) as f:
        stacks = json.load(f)
    groups = [[[n for n in g[0] if n in names], g[1]] for g in stacks.values()]
    write_json(path, {str(i): g for i, g in enumerate(g for g in groups if g[0])})


def keep_mapping(folder):
    """mapping.csv without the rows of deleted files."""
    path = Path(folder) / "dump_tensor_data" / "mapping.csv"
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and (path.parent / r[0]).exists()]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def mark(folder, name, entry, window):
    entry["flight_trigger"] = window.trigger
    if window.trigger_kernel:
        entry["flight_trigger_kernel"] = window.trigger_kernel
        if name == window.trigger_kernel:
            entry["overflow"] = overflow_text(folder, entry)


def flight_record(src, dest, windows, notes=()):
    """A copy of the tensor dump `src` in `dest` holding only the kernels of `windows` (Window), marked as a flight
    record. `notes`: kernel names whose input.0 the ring kept as statistics only (data_name and file removed, a
    flight_note added). Folders left without kernels go. Returns dest."""
    shutil.copytree(src, dest)
    for folder in folders(dest):
        dump = load_dump(folder)
        window_of = {n: w for n, e in dump["data"].items() for w in windows if w.lo <= e["launch"]["index"] <= w.hi}
        if not window_of:
            shutil.rmtree(folder)
            continue
        drop_tensor_files(folder, [e for n, e in dump["data"].items() if n not in window_of])
        dump["data"] = {n: e for n, e in dump["data"].items() if n in window_of}
        for name, entry in dump["data"].items():
            mark(folder, name, entry, window_of[name])
            if name in notes:
                drop_tensor_files(folder, [{"input_args": [entry["input_args"][0]]}])
                del entry["input_args"][0]["data_name"]
                entry["flight_note"] = "input.0 (96 MiB) is larger than the ring: statistics only"
        write_json(folder / "dump.json", dump)
        with open(folder / "construct.json") as f:
            construct = json.load(f)
        write_json(folder / "construct.json", {n: v for n, v in construct.items() if n in window_of})
        keep_stacks(folder, set(window_of))
        keep_mapping(folder)
    for step in Path(dest).glob("step*"):
        if not any(step.iterdir()):
            step.rmdir()
    return dest


def summary_json(dump):
    return json.loads(inspect("summary", dump, "--json", expect=0).stdout)


# ---- summary --------------------------------------------------------------------------------------------------------
def test_plain_dump_summary_has_no_flight_output(dumps):
    dump = dumps("overflow")
    text = inspect("summary", dump, expect=0).stdout.replace(str(dump), "DUMP")  # the path may say "flight"
    assert "flight" not in text
    assert "flight_records" not in summary_json(dump)


def test_summary_names_an_overflow_record_spanning_two_steps(dumps, tmp_path):
    """The 8 kernels up to the planted overflow: 3 at the end of step 0, 5 in step 1 ending with the Muls."""
    folder, name, entry = muls(dumps("overflow"))
    li = entry["launch"]["index"]
    assert folder.parent.name == "step1"
    text_of_overflow = overflow_text(folder, entry)
    rec = flight_record(dumps("overflow"), tmp_path / "rec", [Window(li - 7, li, "overflow", name)])
    inspect("verify", rec, expect=0)  # the helper leaves a consistent dump
    per_step = {f.parent.name: len(load_dump(f)["data"]) for f in folders(rec)}
    assert per_step == {"step0": 3, "step1": 5}
    s = summary_json(rec)
    assert s["kernels"] == 8 and s["steps"] == [0, 1] and s["tasks"] == ["tensor"]
    assert s["flight_records"] == [{
        "rank": "rank", "trigger": "overflow", "trigger_kernel": name, "trigger_step": 1, "trigger_launch_index": li,
        "overflow": text_of_overflow, "kernels": 8, "steps": [0, 1], "first_launch_index": li - 7,
        "last_launch_index": li, "flight_notes": 0}]
    n_inf = int(text_of_overflow.split(", ")[1].split()[0]) + int(text_of_overflow.split(", ")[2].split()[0])
    assert n_inf > 0
    text = inspect("summary", rec, expect=0).stdout
    assert "flight      a flight record (MSPROBE_TASK=flight): 1 record(s), listed below\n" in text
    assert (f"\nflight records (per rank, kernels in launch order)\n"
            f"  rank     overflow in {name} at step 1 (launch_index {li}): {text_of_overflow}\n"
            f"           8 kernel(s) recorded, steps 0, 1, launch_index {li - 7}-{li}\n"
            f"\nfirst NaN/Inf per rank") in text


def test_summary_counts_flight_notes(dumps, tmp_path):
    folder, name, entry = muls(dumps("overflow"))
    li = entry["launch"]["index"]
    noted = [n for _, n, e in kernels(dumps("overflow")) if e["launch"]["index"] in (li - 2, li - 1)]
    rec = flight_record(dumps("overflow"), tmp_path / "rec", [Window(li - 4, li, "overflow", name)], notes=noted)
    (r,) = summary_json(rec)["flight_records"]
    assert (r["kernels"], r["flight_notes"], r["steps"]) == (5, 2, [1])
    first = min(noted, key=lambda n: load_dump(folder)["data"][n]["launch"]["index"])
    assert (f"           5 kernel(s) recorded, step 1, launch_index {li - 4}-{li}\n"
            f"           flight_note on 2 kernel(s), first {first}: input.0 (96 MiB) is larger than the ring: "
            f"statistics only\n") in inspect("summary", rec, expect=0).stdout


@pytest.mark.parametrize("trigger", ["exit", "signal SIGTERM"])
def test_summary_names_an_exit_or_signal_record(dumps, tmp_path, trigger):
    """The last 6 kernels of the run (step 1), written at exit or at a fatal signal."""
    ks = kernels(dumps("clean"))
    last = ks[-1][2]["launch"]["index"]
    rec = flight_record(dumps("clean"), tmp_path / "rec", [Window(last - 5, last, trigger)])
    (r,) = summary_json(rec)["flight_records"]
    assert r == {"rank": "rank", "trigger": trigger, "trigger_kernel": None, "trigger_step": None,
                 "trigger_launch_index": None, "overflow": None, "kernels": 6, "steps": [1],
                 "first_launch_index": last - 5, "last_launch_index": last, "flight_notes": 0}
    assert (f"  rank     {trigger}\n           6 kernel(s) recorded, step 1, launch_index {last - 5}-{last}\n"
            in inspect("summary", rec, expect=0).stdout)


def test_summary_lists_records_per_rank_and_trigger(dumps, tmp_path):
    """Two ranks, each with two records (MSPROBE_OVERFLOW_NUMS=2): ranks in order, then records by launch order."""
    dump = dumps("ranks2")
    by_rank = {}
    for f, n, e in kernels(dump):
        if f.parent.name == "step0":
            by_rank.setdefault(f.name, []).append((e["launch"]["index"], n))
    assert sorted(by_rank) == ["rank0", "rank1"]
    # Same program on both ranks: the same names at the same launch indexes.
    assert by_rank["rank0"] == by_rank["rank1"]
    seq = by_rank["rank0"]
    first, second = seq[5], seq[12]
    windows = [Window(first[0] - 2, first[0], "overflow", first[1]), Window(second[0] - 3, second[0], "overflow",
                                                                            second[1])]
    rec = flight_record(dump, tmp_path / "rec", windows)
    got = [(r["rank"], r["trigger_kernel"], r["trigger_launch_index"], r["kernels"], r["steps"])
           for r in summary_json(rec)["flight_records"]]
    assert got == [("rank0", first[1], first[0], 3, [0]), ("rank0", second[1], second[0], 4, [0]),
                   ("rank1", first[1], first[0], 3, [0]), ("rank1", second[1], second[0], 4, [0])]


# ---- replay ---------------------------------------------------------------------------------------------------------
def replay(dump, out, expect):
    r = inspect("replay", dump, "--out", out, expect=expect)
    (result,) = Path(out).glob("accuracy_checking_result_*.csv")
    with open(result, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return r.stdout, rows


def flight_report(stdout):
    """replay's flight report: everything after its results lines."""
    return stdout.split("\nflight record ", 1)[1]


def test_replay_plain_dump_has_no_flight_report(dumps, tmp_path):
    stdout, _ = replay(dumps("clean"), tmp_path, expect=0)
    assert "flight" not in stdout.replace(str(tmp_path), "OUT")


def test_replay_none_departs_names_the_first_non_finite_output(dumps, tmp_path):
    """Every recorded kernel computed correctly (the Muls multiplied by inf as it was asked): replay says so and
    names the Muls, the first kernel whose output is non-finite while its inputs are finite."""
    folder, name, entry = muls(dumps("overflow"))
    li = entry["launch"]["index"]
    rec = flight_record(dumps("overflow"), tmp_path / "rec", [Window(li - 7, li, "overflow", name)])
    stdout, rows = replay(rec, tmp_path / "out", expect=0)
    assert [r["Forward Test Success"] for r in rows] == ["pass"] * 8
    assert [int(r["Launch Index"]) for r in rows] == list(range(li - 7, li + 1))
    assert flight_report(stdout) == (
        f"rank: overflow in {name} (8 kernel(s), steps 0, 1, launch_index {li - 7}-{li})\n"
        f"  no recorded kernel departs from its CPU reference (8 compared, all pass)\n"
        f"  first non-finite output from finite inputs: step1/rank {name} (launch_index {li})\n"
        f"    the kernels computed correctly: the values ran out of range (a data or scale problem, not a kernel "
        f"bug)\n")


@pytest.mark.parametrize("corrupt_back", [[2], [5, 2]])
def test_replay_names_the_first_departing_kernel(dumps, tmp_path, corrupt_back):
    """Recorded kernels' output.0 scaled by 1.5 (li - 2: step 1's first Matmul; li - 5: an ApplyAdamWV2 of step 0):
    the first in launch order is named, with its folder and launch index."""
    folder, name, entry = muls(dumps("overflow"))
    li = entry["launch"]["index"]
    rec = flight_record(dumps("overflow"), tmp_path / "rec", [Window(li - 7, li, "overflow", name)])
    by_li = {e["launch"]["index"]: (f, n, e) for f, n, e in kernels(rec)}
    for back in corrupt_back:
        f, n, e = by_li[li - back]
        path = f / "dump_tensor_data" / e["output"][0]["data_name"]
        a = np.load(path)
        assert np.all(np.isfinite(a)) and np.any(a != 0)
        np.save(path, a * np.float32(1.5))
    stdout, rows = replay(rec, tmp_path / "out", expect=1)
    bad = [(r["Step"], r["API name"], int(r["Launch Index"])) for r in rows if r["Forward Test Success"] != "pass"]
    assert sorted(bad, key=lambda b: b[2]) == [(by_li[li - b][0].parent.name[4:], by_li[li - b][1], li - b)
                                              for b in sorted(corrupt_back, reverse=True)]
    f, n, _ = by_li[li - max(corrupt_back)]
    status = {r["API name"]: r["Forward Test Success"] for r in rows}[n]
    assert status == "error"
    assert flight_report(stdout) == (
        f"rank: overflow in {name} (8 kernel(s), steps 0, 1, launch_index {li - 7}-{li})\n"
        f"  first kernel departing from its CPU reference: {f.parent.name}/rank {n} (launch_index "
        f"{li - max(corrupt_back)}): error\n")


def test_replay_skips_a_tensor_kept_as_statistics_only(dumps, tmp_path):
    """A flight_note kernel (input.0 without data) is skipped with the reason, not failed, and listed as not
    judged; the report still names the Muls."""
    folder, name, entry = muls(dumps("overflow"))
    li = entry["launch"]["index"]
    (noted,) = [n for _, n, e in kernels(dumps("overflow")) if e["launch"]["index"] == li - 2]
    rec = flight_record(dumps("overflow"), tmp_path / "rec", [Window(li - 4, li, "overflow", name)], notes=[noted])
    stdout, rows = replay(rec, tmp_path / "out", expect=0)
    status = {r["API name"]: (r["Forward Test Success"], r["Message"]) for r in rows}
    assert status[noted][0] == "SKIP" and "input.0: tensor data not saved" in status[noted][1], status[noted]
    assert [s for n, (s, _) in status.items() if n != noted] == ["pass"] * 4
    assert flight_report(stdout) == (
        f"rank: overflow in {name} (5 kernel(s), step 1, launch_index {li - 4}-{li})\n"
        f"  no recorded kernel departs from its CPU reference (4 compared, all pass)\n"
        f"  first non-finite output from finite inputs: step1/rank {name} (launch_index {li})\n"
        f"    the kernels computed correctly: the values ran out of range (a data or scale problem, not a kernel "
        f"bug)\n"
        f"  not judged: 1 kernel(s)\n"
        f"    skipped (see the CSV for why): {noted}\n")
