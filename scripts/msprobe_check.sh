#!/usr/bin/env bash
# msprobe's own tools on our dumps (issue 41): two runs of examples/llm_train.py with the same arguments (one rank;
# two ranks with --moe in both tensor-parallel modes), in the tensor, statistics and md5 tasks, then msprobe's compare
# on every pair (per step and rank) and its graph tool (build + compare), with the rows matched, unmatched, passed and
# flagged. Run by hand, never in CI: it needs msprobe's source, which this repository neither ships nor copies.
#
#   scripts/msprobe_check.sh [--out DIR] [--plant OP] [--configs ...] [--modes ...] TREE [TREE...]
#
# TREE: a fetched msprobe: the bare git directory the fetch tool brings (github:Ascend/msprobe, mindstudio-probe 26.x;
# github:*/mstt for the mstt-era msprobe 8.3.3) or a checked-out tree. --plant OP adds a third run with
# FAKE_CANN_PERTURB_OP=OP (the stand-in scales that op's outputs by 1.001) and says which rows each mode flags.
# Needs a build (MSPROBE_BUILD_DIR, default build/) and, for msprobe, Debian's python3-numpy, python3-pandas,
# python3-openpyxl, python3-yaml and python3-tqdm; mindspore is replaced by an import-only stub. Exits 1 when a pair
# of identical runs is not matched 100%, 2 when something it needs is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "msprobe_check: $python is missing (msprobe runs on the system Python with Debian's packages)" >&2
  exit 2
fi
for f in "$build/lib/libmsprobe_shim.so" "$build/fake_cann"; do
  if [ ! -e "$f" ]; then
    echo "msprobe_check: $f is missing: build first (scripts/build.sh msprobe_shim and the fake_cann targets)" >&2
    exit 2
  fi
done
exec "$python" "$here/scripts/msprobe_check.py" --build "$build" "$@"
