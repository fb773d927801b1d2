#!/usr/bin/env bash
# clang-tidy (the repository's .clang-tidy) over the product sources, from the build's compile_commands.json, one
# clang-tidy per file, two at a time (MSPROBE_TIDY_JOBS).
#   scripts/clang_tidy.sh [--strict] [--gate] [files...]      MSPROBE_BUILD_DIR picks the build (default build/)
# Advisory by default: prints each finding and a count per check; exits 0 unless --strict is given and something was
# found. --gate is the CI stage (scripts/test.sh tidy): only readability-function-size (the house rule: no product
# function of more than .clang-tidy's LineThreshold lines), strict. Either way a file clang-tidy cannot parse, or
# that the build does not compile, fails a strict run: what cannot be read cannot be checked.
# Uses clang-tidy-16 (it parses the C++20 that GCC 12 accepts: lambdas capturing structured bindings, which
# clang-tidy 14 rejects); installs Debian's clang-tidy-16 when it is missing. The build's -Werror is turned off for
# it: compiler warnings are GCC's business (the normal stage), not a reason for clang to refuse a file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
jobs=${MSPROBE_TIDY_JOBS:-2}
strict=0 checks="" label="the checks of .clang-tidy" files=()
for arg in "$@"; do
  case $arg in
    --strict) strict=1 ;;
    --gate) strict=1 checks='-*,readability-function-size' label=readability-function-size ;;
    -*) echo "usage: scripts/clang_tidy.sh [--strict] [--gate] [files...]" >&2; exit 2 ;;
    *) files+=("$arg") ;;
  esac
done
tidy=clang-tidy-16
if ! command -v $tidy >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends $tidy >/dev/null
fi
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
ninja -C "$build" fake_cann_headers >/dev/null  # generated headers the shim's sources include
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(cd "$here" && git ls-files 'format/*.cpp' 'record/*.cpp' 'collector/*.cpp' 'shim/*.cpp' \
                                                 'tools/*.cpp')
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$SECONDS
if [ -n "$checks" ]; then
  # The gate proves it bites: with the same configuration, a function of 81 lines (as clang-tidy counts: from the
  # opening brace's line to the closing one's) is reported and one of 80 is not.
  body() { printf 'int %s(int x) {\n' "$1"; for ((i = 1; i < $2; ++i)); do printf '  x += %d;\n' "$i"; done; printf '}\n'; }
  { body fits 80; body too_long 81; } >"$out/probe.cpp"
  probe=$($tidy --quiet --config-file="$here/.clang-tidy" --checks="$checks" "$out/probe.cpp" -- -std=c++20 2>&1 || true)
  if ! grep -q "function 'too_long' exceeds" <<<"$probe" || grep -q "function 'fits'" <<<"$probe"; then
    echo "$probe"
    echo "clang_tidy: the probe (functions of 80 and 81 lines) was misjudged: the gate does not enforce 80 lines"
    exit 1
  fi
fi
unbuilt=()
for f in "${files[@]}"; do
  abs=$(cd "$here" && realpath -m "$f")
  grep -qF "\"file\": \"$abs\"" "$build/compile_commands.json" || unbuilt+=("$f")
done
# Each file's report on its own (two clang-tidy writing one stream would interleave their lines).
# shellcheck disable=SC2016  # the inner shell expands them
printf '%s\n' "${files[@]}" | (cd "$here" && TIDY_OUT=$out xargs -d '\n' -P "$jobs" -I{} sh -c \
  'f=$1; shift; "$@" "$f" >"$TIDY_OUT/$(printf %s "$f" | tr / _).log" 2>&1 || true' _ {} \
  $tidy -p "$build" --quiet --extra-arg=-Wno-error ${checks:+"--checks=$checks"})
# A finding in a header is reported by every file that includes it: once is enough. Only product files count.
# shellcheck disable=SC2016  # a sed expression
root=$(printf '%s' "$here" | sed 's/[][\.*^$()+?{}|]/\\&/g')
product="^$root/(format|record|collector|shim|tools)/"
logs=$(cat "$out"/*.log)
findings=$(grep -E "${product}[^:]+:[0-9]+:[0-9]+: warning: " <<<"$logs" | sort -u || true)
errors=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (fatal )?error: |^Error while processing' <<<"$logs" | sort -u || true)
while IFS= read -r line; do
  [ -n "$line" ] || continue
  echo "$line"
  # readability-function-size says the size in a note at the same place.
  grep -F "${line%%: warning: *}: note: " <<<"$logs" | grep -E 'note: [0-9]+ (lines|statements)' | sort -u || true
done <<<"$findings"
for f in "${unbuilt[@]}"; do echo "clang_tidy: $f: not in $build/compile_commands.json (not compiled here)"; done
[ -z "$errors" ] || { echo "$errors"; echo "clang_tidy: clang-tidy could not parse the files above"; }
echo "clang_tidy: findings per check:"
[ -z "$findings" ] || grep -oE '\[[a-z0-9.-]+(,[a-z0-9.-]+)*\]$' <<<"$findings" | sort | uniq -c | sort -rn
n=$(grep -c . <<<"$findings" || true)
e=$(grep -c '^Error while processing' <<<"$errors" || true)
unchecked=""
[ $((e + ${#unbuilt[@]})) -eq 0 ] || unchecked=", $e files not parsed, ${#unbuilt[@]} not compiled"
echo "clang_tidy: $label: ${#files[@]} files in $((SECONDS - start)) s, $n findings$unchecked"
[ "$strict" = 0 ] || [ $((n + e + ${#unbuilt[@]})) -eq 0 ]
