"""msprobe-inspect as a new user meets it (issue 39): each test is the user's command as they typed it, on dumps made by
the real example hosts under the shim (examples/train.py, acl_app), and the words they must see.

Expected values come from the dumps themselves, read with Python's json, never from the tool.
"""
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import shimtest
from inspect_support import SHIM, folders, frame_line, inspect, load_dump, stack_of, user_frame

BIN = Path(shimtest.BUILD) / "bin"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """dumps(name) -> dump root, made on first use: the README's example ("bad": train.py --steps 3 --overflow-at 1,
    statistics; "clean": the same without the overflow), "gelu" / "plain" (tensor dumps, one with the stand-in's planted
    Gelu bug), "acl" (examples/acl_app: every kernel in rank0, those before HCCL's initialisation included)."""
    root = tmp_path_factory.mktemp("newuser")
    runs = {"bad": (["--steps", "3", "--overflow-at", "1"], "statistics", {}),
            "clean": (["--steps", "3"], "statistics", {}),
            "gelu": (["--steps", "2"], "tensor", {"FAKE_CANN_PERTURB_OP": "Gelu"}),
            "plain": (["--steps", "2"], "tensor", {})}

    @functools.lru_cache(maxsize=None)
    def get(name):
        if name == "acl":
            run = shimtest.run([BIN / "acl_app"], root / name).check()
        else:
            args, task, env = runs[name]
            run = shimtest.run_train(root / name, *args, task=task, env=env)
        return Path(run.dump.root)
    return get


def copy_of(src, tmp_path, name="dump"):
    dst = tmp_path / name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def first_of(folder, op):
    """The first kernel of op type `op` of a folder, in launch order."""
    d = load_dump(folder)["data"]
    return min((k for k in d if k.split(".")[0] == op), key=lambda k: d[k]["launch"]["index"])


# ---- Item 8: stacks, one line per frame everywhere ---------------------------------------------------------------
def assert_one_line_per_frame(stdout, frames):
    """Every frame of `frames` is one line of `stdout`, and no line starts with a Python frame's source line (the
    break printed as it is drops the source line to column 0)."""
    lines = [x.strip() for x in stdout.splitlines()]
    for f in frames:
        assert frame_line(f) in lines, (frame_line(f), stdout)
    sources = {f.split("\n", 1)[1].strip() for f in frames if f.startswith("File ") and "\n" in f} - {""}
    assert sources and not [x for x in stdout.splitlines() if x.strip() in sources], stdout


def test_stacks_are_one_line_per_frame_in_every_command(dumps, tmp_path):
    bad, clean, gelu = dumps("bad"), dumps("clean"), dumps("gelu")
    step1 = bad / "step1" / "rank"
    muls, first_gelu = first_of(step1, "Muls"), first_of(step1, "Gelu")
    summary = inspect("summary", bad, expect=0).stdout
    assert_one_line_per_frame(summary, stack_of(step1, muls))
    assert_one_line_per_frame(inspect("show", bad, "Gelu#0", "--step", "1", expect=0).stdout,
                              stack_of(step1, first_gelu))
    assert_one_line_per_frame(inspect("first-nan", bad, expect=1).stdout, stack_of(step1, muls))
    replayed = inspect("replay", gelu, "--out", tmp_path / "replay", expect=1).stdout
    g0 = gelu / "step0" / "rank"
    assert_one_line_per_frame(replayed, stack_of(g0, first_of(g0, "Gelu")))
    # compare: the same program, so one stack, not two copies of 37 frames.
    cmp = inspect("compare", gelu, dumps("plain"), "--out", tmp_path / "cmp", expect=0).stdout
    frames = stack_of(g0, first_of(g0, "Gelu"))
    assert_one_line_per_frame(cmp, frames)
    assert cmp.count("stack (the same in A and B):") == 1 and "A stack:" not in cmp
    assert [x.strip() for x in cmp.splitlines()].count(frame_line(frames[-1])) == 1
    # One-line messages name the innermost frame of the user's own code: train.py's line, not _start.
    user = frame_line(user_frame(frames))
    assert "examples/train.py, line " in user and "TinyModel.forward" in user
    assert re.search(rf"^  step0/rank {re.escape(first_of(g0, 'Gelu'))} \(launch_index \d+\) at {re.escape(user)}$",
                     cmp, re.M), cmp


def test_compare_prints_both_stacks_when_they_differ(dumps, tmp_path):
    a, b = dumps("gelu"), copy_of(dumps("plain"), tmp_path, "plain")
    f = b / "step0" / "rank"
    gelu = first_of(f, "Gelu")
    stacks = json.loads((f / "stack.json").read_text())
    for key, (names, frames) in stacks.items():
        if gelu in names:  # B's Gelu launched from another line: its own group
            names.remove(gelu)
            stacks[str(len(stacks))] = [[gelu], ["File /elsewhere/run.py, line 7, in other, \n y = gelu(x)"]]
            break
    (f / "stack.json").write_text(json.dumps(stacks))
    out = inspect("compare", a, b, "--out", tmp_path / "cmp", expect=0).stdout
    assert "  A stack:\n" in out and "  B stack:\n    File /elsewhere/run.py, line 7, in other, y = gelu(x)\n" in out
    assert "the same in A and B" not in out


# ---- Item 6: one process, one rank folder; the folder "rank" (no number), by name -----------------------------------
def test_one_process_one_rank_folder_and_the_folder_rank_by_name(dumps):
    acl = dumps("acl")  # acl_app: kernels before HCCL's initialisation, then its HcclAllReduce: all of one process
    assert sorted(p.name for p in (acl / "step0").iterdir()) == ["rank0"]  # it wrote step0/rank and step0/rank0
    rank0 = load_dump(acl / "step0" / "rank0")["data"]
    hccl = first_of(acl / "step0" / "rank0", "HcclAllReduce")
    first = min(rank0, key=lambda k: rank0[k]["launch"]["index"])
    assert not first.startswith("Hccl"), first  # the kernels before the communicator are there too
    assert inspect("show", acl, "HcclAllReduce#0", expect=0).stdout.startswith(f"{hccl}  (step0/rank0, ")
    for r in ("rank0", "0"):
        out = inspect("show", acl, hccl, "--rank", r, "--json", expect=0).stdout
        assert json.loads(out)["folder"] == "step0/rank0" and json.loads(out)["entry"] == rank0[hccl]
    # A process with no rank at all (train.py on one device, no HCCL) writes "rank": chosen by that name (refused
    # before: "not a non-negative integer").
    bad = dumps("bad")
    unnumbered = load_dump(bad / "step0" / "rank")["data"]
    first = min(unnumbered, key=lambda k: unnumbered[k]["launch"]["index"])
    op = first.split(".")[0]
    assert inspect("show", bad, f"{op}#0", "--rank", "rank", expect=0).stdout.startswith(f"{first}  (step0/rank, ")
    assert inspect("show", bad, f"{op}#0", "--rank", "rank", "--step", "step0", "--json", expect=0).stdout == \
        inspect("show", bad, first, "--rank", "rank", "--step", "0", "--json", expect=0).stdout
    assert "step0/rank: no kernel of op type 'HcclAllReduce'" in \
        inspect("show", bad, "HcclAllReduce#0", "--rank", "rank", "--step", "0", expect=2).stderr
    assert "no kernel named or starting with 'Nope'" in inspect("show", acl, "Nope", expect=2).stderr
    assert "--rank 'x' is not a rank" in inspect("show", acl, "Add#0", "--rank", "x", expect=2).stderr
    assert "no folder for rank7" in inspect("show", acl, "Add#0", "--rank", "7", expect=2).stderr
    # first-nan / first-diff name it by the same name, not "rank (none)".
    out = inspect("first-nan", bad, expect=1).stdout
    assert "origin: rank (folder rank, no number), step 1: Muls." in out and "(none)" not in out


# ---- Item 4: the finished part of a live run, and of a killed one -------------------------------------------------
def complete_entries(path):
    """The kernels of a dump.json journal that are complete (the header line, then one entry per line), counted here
    with Python's json: what a reader can take from a file still being written or cut by a kill."""
    lines = Path(path).read_text().split("\n")[1:]
    n = 0
    for line in lines:
        try:
            json.loads("{" + line.rstrip(",") + "}")
        except ValueError:
            break
        n += 1
    return n


def is_closed(path):
    try:
        json.loads(Path(path).read_text())
        return True
    except ValueError:
        return False


def newest_folders(dump):
    """The newest step's folder of each rank: what a live run is writing (its dump.json valid JSON all the while)."""
    newest = {}
    for f in Path(dump).glob("step*/rank*"):
        step = int(f.parent.name[4:])
        if f.name not in newest or step > newest[f.name][0]:
            newest[f.name] = (step, f)
    return [f for _, f in newest.values()]


@pytest.fixture
def live(tmp_path):
    """A train.py run under the shim, stopped (SIGSTOP) once it has written a few dozen kernels: alive, holding its rank
    lock, its newest step's folder the one being written. Killed at the end of the test."""
    dump = tmp_path / "live"
    env = shimtest.clean_env({"LD_PRELOAD": SHIM, "MSPROBE_DUMP_PATH": dump, "MSPROBE_TASK": "tensor"})
    p = subprocess.Popen([shimtest.PYTHON, shimtest.TRAIN, "--steps", "1000"], env=env, cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, stopped = time.monotonic() + 120, False
        while not stopped and time.monotonic() < deadline and p.poll() is None:
            journal = dump / "step0" / "rank" / "dump.json"
            if journal.exists() and journal.read_text().count("\n") > 30:
                os.kill(p.pid, signal.SIGSTOP)
                # Stopped with the newest folder begun but nothing in it yet: go on.
                stopped = all(complete_entries(f / "dump.json") for f in newest_folders(dump))
                if not stopped:
                    os.kill(p.pid, signal.SIGCONT)
            time.sleep(0.005)
        assert stopped and p.poll() is None, "train.py ended before it could be stopped with a folder being written"
        yield dump, p
    finally:
        p.kill()
        p.wait()


def test_a_live_run_is_read_and_the_folder_being_written_named(live, dumps, tmp_path):
    dump, p = live
    open_folders = newest_folders(dump)
    assert open_folders and all(is_closed(f / "dump.json") for f in dump.glob("step*/rank*"))  # valid all the time
    being = f"being written by a running process (pid {p.pid}): its "
    # The command: a step of the live run. It said "invalid JSON ... (if a crash cut it short, repair...)".
    step = open_folders[0].parent
    r = inspect("summary", step, expect=0)
    n = len(load_dump(step / "rank")["data"])
    assert re.search(rf"^kernels\s+{n} in 1 folder", r.stdout, re.M), r.stdout
    assert f"{step.name}/rank: {being}{n} kernel" in r.stdout, r.stdout
    assert "repair" not in r.stdout + r.stderr and "invalid JSON" not in r.stderr
    s = json.loads(inspect("summary", dump, "--json", expect=0).stdout)
    assert {x["folder"] for x in s["incomplete"]} == {f"{f.parent.name}/rank" for f in open_folders}
    assert all(x["state"] == "being written" and x["owner"] == f"pid {p.pid}" for x in s["incomplete"])
    # Every command reads the finished part and names the rest, without calling it a crash.
    v = inspect("verify", dump, expect=0).stdout
    assert f"{being}" in v and "folder(s) still being written, checked so far" in v, v
    cmp = inspect("compare", dump, dumps("plain"), "--out", tmp_path / "cmp", expect=0).stdout
    assert f"read in part: A {open_folders[0].parent.name}/rank: {being}" in cmp, cmp
    assert inspect("show", dump, "Gelu#0", expect=0).stdout.startswith("Gelu.")
    rp = inspect("replay", dump, "--out", tmp_path / "replay")
    assert rp.returncode == 0 and "read in part: " in rp.stdout and being in rp.stdout, rp.stdout + rp.stderr
    rep = inspect("report", dump, "-o", tmp_path / "live.html", expect=0).stdout
    assert f"read in part: {open_folders[0].parent.name}/rank: {being}" in rep, rep
    fn = inspect("first-nan", dump, expect=0).stdout
    assert "being written: " in fn and being in fn and "problem:" not in fn, fn
    conv = inspect("convert", dump, expect=1).stdout
    assert f"{being}" in conv and "left alone: convert it after the run ends" in conv, conv
    rep = inspect("repair", dump, expect=1).stdout
    assert f"being written by a running process (pid {p.pid}): left alone" in rep, rep

    # Killed: the same folders are now a killed run's; every command still reads them and says what repair does.
    p.kill()
    p.wait()
    r = inspect("summary", dump, expect=1)
    assert "the run that wrote it was killed or crashed (its rank lock is left)" in r.stdout
    assert "'msprobe-inspect repair' sets their files aside" in r.stdout
    for args in (["compare", dump, dumps("plain"), "--out", tmp_path / "cmp2"], ["report", dump, "-o", tmp_path / "k.html"],
                 ["replay", dump, "--out", tmp_path / "replay2"], ["first-nan", dump]):
        out = inspect(*args)
        assert out.returncode == 1 and "was killed or crashed" in out.stdout, (args, out.stdout, out.stderr)
    assert inspect("show", dump, "Gelu#0", expect=0).stdout.startswith("Gelu.")


# ---- Item 7: repair never deletes data ---------------------------------------------------------------------------
def data_names(folder):
    """Every data_name of a folder's dump.json (closed, or its complete entries when not closed)."""
    path = Path(folder) / "dump.json"
    if is_closed(path):
        data = load_dump(folder)["data"]
    else:
        data = {}
        for line in path.read_text().split("\n")[1:]:
            try:
                data.update(json.loads("{" + line.rstrip(",") + "}"))
            except ValueError:
                break
    return {t["data_name"] for e in data.values() for k in ("input_args", "output") for t in (e.get(k) or [])
            if isinstance(t, dict) and "data_name" in t}


def tensor_files(root):
    """{(folder, file name): bytes} of every file under dump_tensor_data/ and repair_set_aside/."""
    out = {}
    for f in Path(root).glob("step*/rank*"):
        for sub in ("dump_tensor_data", "repair_set_aside"):
            for p in (f / sub).glob("*") if (f / sub).is_dir() else []:
                out[(f.relative_to(root), p.name)] = p.read_bytes()
    return out


def kernel_of(file_name):
    return re.sub(r"\.(input|output)\.[\d.]+\.npy$", "", file_name)


def test_repair_after_a_kill_moves_files_aside_and_lists_them(live):
    dump, p = live
    p.kill()
    p.wait()
    before = tensor_files(dump)
    orphans = sorted((f.relative_to(dump), n.name) for f in dump.glob("step*/rank*") if (f / "dump_tensor_data").is_dir()
                     for n in (f / "dump_tensor_data").iterdir()
                     if n.name != "mapping.csv" and n.name not in data_names(f))
    assert orphans  # the writer works on several kernels at once: their files precede their entries
    # --dry-run names every file it would move, and moves none.
    dry = inspect("repair", dump, "--dry-run", expect=0).stdout
    for folder, name in orphans:
        assert f"{folder}/dump_tensor_data/{name} -> repair_set_aside/{name}" in dry, dry
    assert tensor_files(dump) == before and not list(dump.glob("step*/rank*/repair_set_aside"))
    r = inspect("repair", dump, expect=0).stdout
    kernels = {kernel_of(n) for _, n in orphans}
    folders = {f for f, _ in orphans}
    for folder in folders:
        mine = [n for f, n in orphans if f == folder]
        assert (f"{folder}/dump_tensor_data: {len(mine)} file{'s' if len(mine) > 1 else ''} of "
                f"{len({kernel_of(n) for n in mine})} kernel") in r, r
    assert f"{len(orphans)} file(s) set aside in repair_set_aside/ (nothing is deleted)" in r, r
    # Not one byte lost: every file is where repair said, as it was.
    after = tensor_files(dump)
    assert sorted(after.values()) == sorted(before.values())
    for folder, name in orphans:
        assert (dump / folder / "repair_set_aside" / name).read_bytes() == before[(folder, name)]
        assert not (dump / folder / "dump_tensor_data" / name).exists()
    assert kernels
    inspect("verify", dump, expect=0)


def test_repair_of_a_cut_dump_json_keeps_the_dropped_kernels_files(dumps, tmp_path):
    root = copy_of(dumps("plain"), tmp_path)
    f = root / "step0" / "rank"
    lines = (f / "dump.json").read_text().split("\n")
    keep = 10
    (f / "dump.json").write_text("\n".join(lines[:keep + 1]) + "\n" + lines[keep + 1][:40])  # cut in entry `keep`
    dropped = {t["data_name"] for n, e in load_dump(dumps("plain") / "step0" / "rank")["data"].items()
               for k in ("input_args", "output") for t in (e.get(k) or []) if isinstance(t, dict) and "data_name" in t
               } - data_names(f)
    before = tensor_files(root)
    r = inspect("repair", root, expect=0).stdout
    n_kernels = len({kernel_of(n) for n in dropped})
    assert f"step0/rank/dump_tensor_data: {len(dropped)} files of {n_kernels} kernels that never reached dump.json " \
           f"moved to repair_set_aside/:" in r, r
    assert sorted(p.name for p in (f / "repair_set_aside").iterdir()) == sorted(dropped)
    assert sorted(tensor_files(root).values()) == sorted(before.values())
    inspect("verify", root, expect=0)


# ---- Item 5: a kernel only one run has, where the runs part -------------------------------------------------------
def only_in(a_folder, b_folder):
    """The kernels of a's folder that b's lacks, in a's launch order."""
    da, db = load_dump(a_folder)["data"], load_dump(b_folder)["data"]
    return sorted(set(da) - set(db), key=lambda k: da[k]["launch"]["index"]), da


def test_a_kernel_only_one_run_has_is_named_where_the_runs_part(dumps, tmp_path):
    bad, clean = dumps("bad"), dumps("clean")  # the README's example: --overflow-at 1 adds one Muls
    extra, data = only_in(bad / "step1" / "rank", clean / "step1" / "rank")
    assert len(extra) == 1 and extra[0].startswith("Muls.")
    muls, li = extra[0], data[extra[0]]["launch"]["index"]
    gelu = next(k for k in sorted(data, key=lambda k: data[k]["launch"]["index"])
                if k.startswith("Gelu.") and data[k]["launch"]["index"] > li)
    # compare: the Muls first, the Gelu after it (it named the Gelu alone).
    out = inspect("compare", bad, clean, "--out", tmp_path / "cmp", expect=0).stdout
    assert f"first diverging kernel (launch order): step1/rank {muls} (launch_index {li}): only in A\n" in out, out
    assert (f"then the first kernel both runs have that diverges: step1/rank {gelu} "
            f"(launch_index {data[gelu]['launch']['index']})") in out, out
    assert out.index("only in A\n") < out.index("then the first kernel")
    # first-diff: the Muls is the origin, of kind "only in A", its note ahead of "from before the dump".
    doc = json.loads(inspect("first-diff", bad, clean, "--json", expect=1).stdout)
    assert (doc["kernel"], doc["kind"], doc["launch_index"], doc["step"]) == (muls, "only in A", li, 1), doc
    assert doc["parted_at"].startswith(f"{gelu} (launch_index {data[gelu]['launch']['index']})")
    assert "likeliest cause" in doc["notes"][0] and "come from before the dump" in doc["notes"][1], doc["notes"]
    assert doc["stack"] == stack_of(bad / "step1" / "rank", muls)
    text = inspect("first-diff", bad, clean, expect=1).stdout
    assert f"origin: rank (folder rank, no number), step 1: {muls} (launch_index {li})" in text
    assert text.index("likeliest cause") < text.index("come from before the dump")
    # The other way round the Muls is only in B, named by B's launch index.
    doc = json.loads(inspect("first-diff", clean, bad, "--json", expect=1).stdout)
    assert (doc["kernel"], doc["kind"], doc["launch_index"]) == (muls, "only in B", li), doc
    out = inspect("compare", clean, bad, "--out", tmp_path / "cmp", expect=0).stdout
    assert f"first diverging kernel (launch order): step1/rank {muls} (launch_index {li}): only in B\n" in out, out
    # The report marks it as its first divergence.
    inspect("report", bad, "--against", clean, "-o", tmp_path / "r.html", expect=0)
    html = (tmp_path / "r.html").read_text()
    page = json.loads(re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html, re.S)[1])
    assert page["first_diff"]["kernel"] == muls and page["first_diff"]["verdict"].startswith("only in A")


def test_a_kernel_only_one_run_has_does_not_hide_a_kernel_that_computes_differently(dumps, tmp_path):
    """The planted Gelu bug: its inputs agree, its output does not. A kernel only in A before it is not blamed."""
    a = copy_of(dumps("gelu"), tmp_path)
    f = a / "step0" / "rank"
    d = load_dump(f)
    order = sorted(d["data"], key=lambda k: d["data"][k]["launch"]["index"])
    gelu = next(k for k in order if k.startswith("Gelu."))
    before = order[order.index(gelu) - 1]
    extra = dict(d["data"][before], launch={**d["data"][before]["launch"]})
    for key in ("input_args", "output"):  # no files: a statistics entry
        extra[key] = [{k: v for k, v in t.items() if k != "data_name"} if isinstance(t, dict) else t
                      for t in extra[key]]
    d["data"]["Extra.Default.0.forward"] = extra
    (f / "dump.json").write_text(json.dumps(d))
    doc = json.loads(inspect("first-diff", a, dumps("plain"), "--json", expect=1).stdout)
    assert (doc["kernel"], doc["kind"]) == (gelu, "compute"), doc
    out = inspect("compare", a, dumps("plain"), "--out", tmp_path / "cmp", expect=0).stdout
    assert f"first diverging kernel (launch order): step0/rank {gelu} (launch_index " in out and "only in A\n" not in out


# ---- Item 11: smaller things ----------------------------------------------------------------------------------------
def test_version_summary_mode_and_a_file_for_its_folder(dumps, tmp_path):
    version = (Path(shimtest.SOURCE) / "VERSION").read_text().strip()
    assert inspect("--version", expect=0).stdout == f"msprobe-inspect {version}\n"
    assert "msprobe-inspect --version" in inspect("--help", expect=0).stdout
    # md5 mode is said (it was not).
    md5 = shimtest.run_train(tmp_path / "md5", "--steps", "1", env={"MSPROBE_SUMMARY_MODE": "md5"})
    root = Path(md5.dump.root)
    out = inspect("summary", root, expect=0).stdout
    assert "\nmode        md5: each tensor's CRC-32 beside its statistics (MSPROBE_SUMMARY_MODE=md5)\n" in out, out
    assert json.loads(inspect("summary", root, "--json", expect=0).stdout)["summary_mode"] == "md5"
    assert "\nmode        statistics (MSPROBE_SUMMARY_MODE=statistics: no CRC)\n" in \
        inspect("summary", dumps("bad"), expect=0).stdout
    # A rank folder's dump.json stands for the folder ("not a directory" before).
    f = dumps("bad") / "step0" / "rank"
    def summary(path):
        doc = json.loads(inspect("summary", path, "--json", expect=0).stdout)
        return {k: v for k, v in doc.items() if k != "dump"}
    assert summary(f / "dump.json") == summary(f) and summary(f)["kernels"] == len(load_dump(f)["data"])
    assert "not a directory" in inspect("summary", tmp_path / "md5" / "launches.log", expect=2).stderr


def test_compare_can_fail_on_a_difference(dumps, tmp_path):
    bad, clean = dumps("bad"), dumps("clean")
    inspect("compare", bad, clean, "--out", tmp_path, expect=0)
    inspect("compare", bad, clean, "--out", tmp_path, "--fail-on-diff", expect=1)
    inspect("compare", clean, clean, "--out", tmp_path, "--fail-on-diff", expect=0)


def test_errors_name_the_users_file_and_convert_says_why_nothing(dumps, tmp_path):
    r = inspect("report", dumps("bad"), "-o", tmp_path / "nowhere" / "r.html", expect=2)
    assert f"{tmp_path / 'nowhere' / 'r.html'}: cannot be written: its folder {tmp_path / 'nowhere'} does not exist" \
        in r.stderr and ".tmp." not in r.stderr, r.stderr
    out = inspect("convert", dumps("bad"), expect=0).stdout
    assert "convert: 0 converted, 0 already npy, 0 not converted\n" in out
    assert "nothing to convert: no tensor of this dump has a file (task statistics)" in out, out
    assert "nothing to convert" not in inspect("convert", copy_of(dumps("plain"), tmp_path), expect=0).stdout


@pytest.fixture(scope="module")
def browser():
    import sanitizer_preload
    from browser import Browser
    if sanitizer_preload.ASAN:
        pytest.skip("no browser test under ASan: its runtime is preloaded into every child, chromium too")
    b = Browser.find()
    if b is None:
        pytest.skip(f"no browser test: {Browser.why_not}")
    return b


# What the report's page shows of the README's example, measured in the page once it has drawn.
LOOK = r"""<script>
window.addEventListener("load", function () {
  const out = {};
  try {
    const input = document.getElementById("filter");
    const ctx = document.createElement("canvas").getContext("2d");
    const style = getComputedStyle(input);
    ctx.font = style.font;
    out.placeholder = ctx.measureText(input.placeholder).width;
    out.room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    // The Norm line's segments that pass over kernels whose outputs hold NaN/Inf: how each is drawn.
    const chart = Chart.getChart(document.getElementById("series-chart"));
    const ds = chart.data.datasets[0], flags = [];
    out.crossing = [];
    for (let i = 0; i + 1 < ds.data.length; i++) {
      if (ds.data[i + 1].x - ds.data[i].x > 1) out.crossing.push(ds.segment.borderColor({ p0DataIndex: i, p1DataIndex: i + 1 }));
    }
    out.panel = document.querySelector("#kernel .kernel-details p").textContent;
  } catch (e) {
    out.error = String((e && e.stack) || e);
  }
  document.body.setAttribute("data-look", JSON.stringify(out));
});
</script>"""


def test_report_cosmetics(browser, dumps, tmp_path):
    bad = dumps("bad")
    path = tmp_path / "r.html"
    inspect("report", bad, "--against", dumps("clean"), "-o", path, expect=0)
    path.write_text(path.read_text().replace("</body>", LOOK + "</body>"))
    muls = first_of(bad / "step1" / "rank", "Muls")
    dom = browser.dump_dom(path, f"#rank=rank&step=all&kernel={muls}")
    out = json.loads(dom.find("body").attrs["data-look"])
    assert "error" not in out, out["error"]
    assert out["placeholder"] <= out["room"], out  # the filter's placeholder is not cut
    # The lines stop where the NaN region begins (a pale dashed line was drawn across it).
    assert out["crossing"] and set(out["crossing"]) == {"transparent"}, out["crossing"]
    # One phrase, not two labels run together ("outputs hold NaN outputs hold Inf").
    assert out["panel"].endswith("launch_index %d; outputs hold NaN and Inf" %
                                 load_dump(bad / "step1" / "rank")["data"][muls]["launch"]["index"]), out["panel"]


def test_flight_record_counts_agree_with_the_shim(browser, tmp_path):
    run = shimtest.run_train(tmp_path / "flight", "--steps", "2", "--overflow-at", "1", task="flight")
    m = re.search(r"flight record: overflow: .*; written with the (\d+) kernels before it", run.stderr)
    assert m, run.stderr
    before = int(m.group(1))
    root = Path(run.dump.root)
    assert f"{before + 1} kernel(s) recorded" in inspect("summary", root, expect=0).stdout
    path = tmp_path / "f.html"
    inspect("report", root, "-o", path, expect=0)
    dom = browser.dump_dom(path, "")
    shown = dom.find(cls="record-count").text()
    assert shown == f"{before + 1} kernel(s) recorded, in launch order: the trigger and the {before} before it", shown


def test_repair_of_a_live_run_leaves_only_the_folder_being_written(dumps, tmp_path):
    """A run that goes on holds its rank's lock; the steps it closed are finished (the capture side closes a step's
    files when the step ends) and are not "being written": only the open folder is left alone."""
    import fcntl
    root = copy_of(dumps("clean"), tmp_path)
    last = root / "step2" / "rank" / "dump.json"
    last.write_text(last.read_text()[:-4] + ",\n")  # reopened: the journal of the step being written
    lock = root / ".msprobe_shim.rank.lock"
    lock.write_text(f"{os.getpid()}\n")
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = inspect("repair", root, expect=1).stdout
        assert f"step2/rank: being written by a running process (pid {os.getpid()}): left alone" in r, r
        assert "step0/rank:" not in r and "step1/rank:" not in r, r
        assert ", 1 folder(s) still being written" in r and " 0 repaired, 0 cannot" in r, r
        s = inspect("summary", root, expect=0).stdout
        assert f"step2/rank: being written by a running process (pid {os.getpid()}): its " in s, s
    finally:
        os.close(fd)
