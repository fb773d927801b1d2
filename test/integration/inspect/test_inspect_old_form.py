"""msprobe-inspect on dumps written before kernel names carried ".forward" and the launch fields moved into "launch"
(issue 27): made from a REAL dump of examples/train.py by to_old_form(), they read as before, and compare pairs an
old dump with a new one kernel by kernel, in both directions.
"""
import csv
import json

import pytest

from inspect_support import folders, inspect, load_dump, make_dump, to_old_form


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("old_form")
    new = make_dump(root / "new", steps=2, task="tensor")
    return new, to_old_form(new, root / "old")


def test_the_old_copy_really_is_the_old_form(dumps):
    new, old = dumps
    for n, o in zip(folders(new), folders(old)):
        dn, do = load_dump(n)["data"], load_dump(o)["data"]
        assert len(dn) == len(do) > 20
        assert all(k.endswith(".forward") for k in dn) and not any(k.endswith(".forward") for k in do)
        assert all("launch" in e and "launch_index" not in e for e in dn.values())
        assert all("launch" not in e and isinstance(e["launch_index"], int) for e in do.values())


def test_verify_summary_and_show_read_the_old_form(dumps):
    new, old = dumps
    inspect("verify", old, expect=0)
    summary_old = inspect("summary", old, "--json", expect=0).stdout
    summary_new = inspect("summary", new, "--json", expect=0).stdout
    assert json.loads(summary_old)["kernels"] == json.loads(summary_new)["kernels"]
    o = load_dump(folders(old)[0])["data"]
    name = min(o, key=lambda k: o[k]["launch_index"] if k.startswith("Gelu.") else 1 << 62)
    shown = inspect("show", folders(old)[0], name, expect=0).stdout
    assert shown.startswith(name + "  ") and f"launch_index {o[name]['launch_index']}" in shown
    # On a new dump, the name without its direction token picks the kernel (it is also the prefix of ...1x names).
    shown = inspect("show", folders(new)[0], name, expect=0).stdout
    assert shown.startswith(name + ".forward  "), shown[:200]


@pytest.mark.parametrize("order", ["old-new", "new-old"])
def test_compare_pairs_old_and_new_dumps(dumps, tmp_path, order):
    new, old = dumps
    a, b = (old, new) if order == "old-new" else (new, old)
    r = inspect("compare", a, b, "--out", tmp_path, expect=0)
    assert ", 0 only in A, 0 only in B" in r.stdout, r.stdout
    assert "no divergence: every matched tensor passes" in r.stdout
    (result,) = tmp_path.glob("compare_result_*.csv")
    with open(result, newline="") as f:
        rows = list(csv.DictReader(f))
    tensors = sum(len(load_dump(f)["data"]) for f in folders(new))
    assert len(rows) > tensors and all(row["Result"] == "pass" for row in rows)
