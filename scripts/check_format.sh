#!/usr/bin/env bash
# Fails when clang-format (the repository's .clang-format) would change any product source: format/, record/,
# collector/, shim/, tools/. Prints the files that differ (and, with -v, the diff), then a closing
# "N passed, N failed" line (one per file). `scripts/check_format.sh --fix` reformats them instead.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
mode=check verbose=0
for arg in "$@"; do
  case $arg in
    --fix) mode=fix ;;
    -v) verbose=1 ;;
    *) echo "usage: scripts/check_format.sh [--fix] [-v]" >&2; exit 2 ;;
  esac
done
command -v clang-format >/dev/null || { echo "check_format: clang-format missing (scripts/setup.sh installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'format/*.h' 'format/*.cpp' 'record/*.h' 'collector/*.h' 'collector/*.cpp' \
                                  'shim/*.h' 'shim/*.cpp' 'tools/*.h' 'tools/*.cpp')
if [ "$mode" = fix ]; then
  clang-format -i "${files[@]}"
  echo "check_format: ${#files[@]} files formatted"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    bad=$((bad + 1))
    echo "check_format: $f differs from clang-format (scripts/check_format.sh --fix)"
    [ "$verbose" = 1 ] && diff -u "$f" <(clang-format "$f") || true
  fi
done
echo "check_format: $(clang-format --version | head -1)"
echo "$((${#files[@]} - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
