#!/usr/bin/env bash
# The whole test suite from nothing, as CI runs it: installs dependencies, checks that clang-format leaves the product
# code unchanged (scripts/check_format.sh) and that no product function is longer than 80 lines (clang-tidy's
# readability-function-size, scripts/clang_tidy.sh --gate), builds, runs every test with ctest, then
# the collector's concurrency tests under TSan (scripts/sanitize.sh thread), a short run of every fuzz target
# (scripts/fuzz.sh), the whole suite again under ASan+UBSan (scripts/sanitize.sh address) and the aarch64 cross
# build with its tests under qemu-user (scripts/test_aarch64.sh), then the compat stage: the shim's ABI check and
# its runs in a cached Debian 11 chroot (scripts/test_compat.sh, docs/portability.md). Extra arguments go to the
# first ctest (e.g. scripts/test.sh -R aclnn). MSPROBE_TEST_STAGES picks stages (default
# "format tidy normal tsan fuzz asan aarch64 compat").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
read -r -a stages <<<"${MSPROBE_TEST_STAGES:-format tidy normal tsan fuzz asan aarch64 compat}"
"$here/scripts/setup.sh"

status=0
summary=()
for stage in "${stages[@]}"; do
  log=$(mktemp)
  case $stage in
    format)
      "$here/scripts/check_format.sh" 2>&1 | tee "$log" || status=1
      summary+=("[format]   $(tail -1 "$log") (clang-format, product code)") ;;
    tidy)
      # Function size: clang-tidy over every product source (2 at a time, ~2 minutes on 2 idle cores).
      MSPROBE_BUILD_DIR=$build "$here/scripts/clang_tidy.sh" --gate 2>&1 | tee "$log" || status=1
      summary+=("[tidy]     $(grep -E '^clang_tidy: .* files in ' "$log" | tail -1 | sed 's/^clang_tidy: //') (product code)") ;;
    normal)
      "$here/scripts/build.sh"
      (cd "$build" && ctest --output-on-failure --timeout 900 -j2 "$@") 2>&1 | tee "$log" || status=1
      summary+=("[normal]   $(grep -E 'tests passed|tests failed' "$log" | tail -1)")
      # The shim loads on glibc 2.28+ with nothing but libc & co. in DT_NEEDED (docs/portability.md).
      "$here/scripts/check_abi.sh" "$build/lib/libmsprobe_shim.so" >"$log" 2>&1 || status=1
      cat "$log"
      summary+=("[abi]      x86_64: $(sed 's/^check_abi: [^:]*: //' "$log" | tr '\n' ' ')") ;;
    asan | tsan)
      which=$([ "$stage" = asan ] && echo address || echo thread)
      MSPROBE_BUILD_DIR=$build "$here/scripts/sanitize.sh" "$which" 2>&1 | tee "$log" || status=1
      summary+=("[$stage]     $(grep -E '^  \[(address|thread)\]' "$log" | sed 's/^  \[[a-z]*\] //')") ;;
    fuzz)
      MSPROBE_FUZZ_BUILD_DIR=$build-fuzz "$here/scripts/fuzz.sh" 2>&1 | tee "$log" || status=1
      summary+=("[fuzz]     $(grep -E '^fuzz: (findings|[0-9]+ targets)' "$log" | tail -1)") ;;
    aarch64)
      MSPROBE_AARCH64_BUILD_DIR=$build-aarch64 "$here/scripts/test_aarch64.sh" 2>&1 | tee "$log" || status=1
      summary+=("[aarch64]  $(grep -E 'tests passed|tests failed' "$log" | tail -1)")
      "$here/scripts/check_abi.sh" "$build-aarch64/lib/libmsprobe_shim.so" >"$log" 2>&1 || status=1
      cat "$log"
      summary+=("[abi]      aarch64: $(sed 's/^check_abi: [^:]*: //' "$log" | tr '\n' ' ')")
      # The aarch64 wheel from the cross build: build_wheel.sh names it manylinux_2_28 only when readelf proves it.
      rm -rf "$build-aarch64/wheel"
      MSPROBE_BUILD_DIR=$build-aarch64 "$here/scripts/build_wheel.sh" "$build-aarch64/wheel" >"$log" 2>&1 || status=1
      tail -3 "$log"
      wheel=$(ls "$build-aarch64"/wheel/*manylinux_2_28_aarch64.whl 2>/dev/null || true)
      if [ -n "$wheel" ]; then
        summary+=("[wheel]    aarch64: $(basename "$wheel")")
      else
        status=1
        summary+=("[wheel]    aarch64: not built: $(tail -1 "$log")")
      fi ;;
    compat)
      MSPROBE_COMPAT_BUILD_DIR=$build-compat "$here/scripts/test_compat.sh" 2>&1 | tee "$log" || status=1
      summary+=("[compat]   $(grep -E '^compat: ([0-9]+ checks passed|[0-9]+ of [0-9]+ checks failed)' "$log" | tail -1)") ;;
    *) echo "test.sh: unknown stage $stage (format, tidy, normal, tsan, fuzz, asan, aarch64, compat)" >&2; exit 2 ;;
  esac
  rm -f "$log"
done
echo
echo "test.sh: summary"
printf '  %s\n' "${summary[@]}"
exit $status
