#!/usr/bin/env bash
# The main job end to end: installs dependencies, builds, runs examples/train.py on the CANN stand-in
# under libmsprobe_shim.so, and prints what was dumped. Extra arguments go to train.py.
# MSPROBE_DEMO_SKIP_BUILD=1 skips the install and the build (test/integration/examples/test_demo.py runs the rest of this
# script inside a finished build); MSPROBE_BUILD_DIR, MSPROBE_DUMP_PATH and MSPROBE_TASK are honored.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
if [ "${MSPROBE_DEMO_SKIP_BUILD:-0}" != 1 ]; then
  "$here/scripts/setup.sh"
  "$here/scripts/build.sh"
fi
export ASCEND_HOME_PATH="$build/fake_cann"
export PYTHONPATH="$here/examples${PYTHONPATH:+:$PYTHONPATH}"
dump=${MSPROBE_DUMP_PATH:-$build/demo_dump}
rm -rf "$dump"
echo "== examples/train.py under the shim (MSPROBE_TASK=${MSPROBE_TASK:-tensor}, dump in $dump)"
# The shim goes after anything already preloaded (a sanitizer runtime must stay first).
MSPROBE_DUMP_PATH="$dump" MSPROBE_TASK="${MSPROBE_TASK:-tensor}" \
  LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$build/lib/libmsprobe_shim.so" \
  /usr/bin/python3 "$here/examples/train.py" --steps 3 "$@"
echo
echo "== what was dumped"
/usr/bin/python3 "$here/scripts/show_dump.py" "$dump"
