#!/usr/bin/env bash
# The main job end to end: installs dependencies, builds, runs examples/train.py on the CANN stand-in
# and prints what it did.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
export ASCEND_HOME_PATH="$build/fake_cann"
export PYTHONPATH="$here/examples${PYTHONPATH:+:$PYTHONPATH}"
echo "== examples/train.py on the CANN stand-in ($ASCEND_HOME_PATH)"
/usr/bin/python3 "$here/examples/train.py" --steps 5 "$@"
