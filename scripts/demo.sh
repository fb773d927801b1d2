#!/usr/bin/env bash
# The main job end to end: installs dependencies, builds, runs examples/train.py on the CANN stand-in
# under libmsprobe_shim.so, and prints what was dumped. Extra arguments go to train.py.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
export ASCEND_HOME_PATH="$build/fake_cann"
export PYTHONPATH="$here/examples${PYTHONPATH:+:$PYTHONPATH}"
dump=${MSPROBE_DUMP_PATH:-$build/demo_dump}
rm -rf "$dump"
echo "== examples/train.py under the shim (MSPROBE_TASK=${MSPROBE_TASK:-tensor}, dump in $dump)"
MSPROBE_DUMP_PATH="$dump" MSPROBE_TASK="${MSPROBE_TASK:-tensor}" LD_PRELOAD="$build/lib/libmsprobe_shim.so" \
  /usr/bin/python3 "$here/examples/train.py" --steps 3 "$@"
echo
echo "== what was dumped"
/usr/bin/python3 "$here/scripts/show_dump.py" "$dump"
