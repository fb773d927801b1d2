#!/usr/bin/env bash
# Configures and builds msprobe-shim into build/ (warnings are errors). Usage: scripts/build.sh [ninja targets]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
cmake -S "$here" -B "$build" -G Ninja -DMSPROBE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" "$@"
