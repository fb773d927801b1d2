#!/usr/bin/env bash
# clang-tidy (the repository's .clang-tidy) over the product sources, from the build's compile_commands.json.
# Advisory: prints each finding and a count per check; exits 0 unless --strict is given and something was found.
#   scripts/clang_tidy.sh [--strict] [files...]      MSPROBE_BUILD_DIR picks the build (default build/)
# Installs Debian's clang-tidy when it is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
strict=0 files=()
for arg in "$@"; do
  case $arg in
    --strict) strict=1 ;;
    *) files+=("$arg") ;;
  esac
done
if ! command -v clang-tidy >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends clang-tidy >/dev/null
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
ninja -C "$build" fake_cann_headers >/dev/null  # generated headers the shim's sources include
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(cd "$here" && git ls-files 'format/*.cpp' 'collector/*.cpp' 'shim/*.cpp' 'tools/*.cpp')
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
(cd "$here" && clang-tidy -p "$build" --quiet "${files[@]}" 2>/dev/null) >"$out" || true
grep -E '(warning|error): ' "$out" || true
echo "clang_tidy: findings per check:"
grep -oE '\[[a-z0-9.-]+(,[a-z0-9.-]+)*\]$' "$out" | sort | uniq -c | sort -rn || true
n=$(grep -cE '(warning|error): ' "$out" || true)
echo "clang_tidy: ${#files[@]} files, $n findings"
[ "$strict" = 0 ] || [ "$n" -eq 0 ]
