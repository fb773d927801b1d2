#!/usr/bin/env bash
# The whole test suite from nothing: installs dependencies, builds, runs every test with ctest.
# Extra arguments go to ctest (e.g. scripts/test.sh -R aclnn).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
cd "$build"
ctest --output-on-failure --timeout 900 -j2 "$@"
