#!/usr/bin/env bash
# The whole test suite from nothing, as CI runs it: installs dependencies, builds, runs every test with ctest, then
# the collector's concurrency tests under TSan (scripts/sanitize.sh thread), a short run of every fuzz target
# (scripts/fuzz.sh), the whole suite again under ASan+UBSan (scripts/sanitize.sh address) and the aarch64 cross
# build with its tests under qemu-user (scripts/test_aarch64.sh). Extra arguments go to the first ctest
# (e.g. scripts/test.sh -R aclnn). MSPROBE_TEST_STAGES picks stages (default "normal tsan fuzz asan aarch64").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
read -r -a stages <<<"${MSPROBE_TEST_STAGES:-normal tsan fuzz asan aarch64}"
"$here/scripts/setup.sh"

status=0
summary=()
for stage in "${stages[@]}"; do
  log=$(mktemp)
  case $stage in
    normal)
      "$here/scripts/build.sh"
      (cd "$build" && ctest --output-on-failure --timeout 900 -j2 "$@") 2>&1 | tee "$log" || status=1
      summary+=("[normal]   $(grep -E 'tests passed|tests failed' "$log" | tail -1)") ;;
    asan | tsan)
      which=$([ "$stage" = asan ] && echo address || echo thread)
      MSPROBE_BUILD_DIR=$build "$here/scripts/sanitize.sh" "$which" 2>&1 | tee "$log" || status=1
      summary+=("[$stage]     $(grep -E '^  \[(address|thread)\]' "$log" | sed 's/^  \[[a-z]*\] //')") ;;
    fuzz)
      MSPROBE_FUZZ_BUILD_DIR=$build-fuzz "$here/scripts/fuzz.sh" 2>&1 | tee "$log" || status=1
      summary+=("[fuzz]     $(grep -E '^fuzz: (findings|[0-9]+ targets)' "$log" | tail -1)") ;;
    aarch64)
      MSPROBE_AARCH64_BUILD_DIR=$build-aarch64 "$here/scripts/test_aarch64.sh" 2>&1 | tee "$log" || status=1
      summary+=("[aarch64]  $(grep -E 'tests passed|tests failed' "$log" | tail -1)") ;;
    *) echo "test.sh: unknown stage $stage (normal, tsan, fuzz, asan, aarch64)" >&2; exit 2 ;;
  esac
  rm -f "$log"
done
echo
echo "test.sh: summary"
printf '  %s\n' "${summary[@]}"
exit $status
