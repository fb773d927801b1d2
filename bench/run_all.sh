#!/usr/bin/env bash
# Every benchmark of the project, with one command: builds what they need (scripts/build.sh), runs them one after
# the other and writes their markdown to bench/results-latest.md with the machine, date and command.
# bench/RESULTS.md is the curated copy (with the notes on each figure).
#
#   bench/run_all.sh [--quick]        MSPROBE_BUILD_DIR picks the build directory (default: build),
#                                     MSPROBE_BENCH_BASELINE=OLD.so a shim to compare with (compare_shims.py --a)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_BUILD_DIR:-$here/build}
export MSPROBE_BUILD_DIR=$build
python=/usr/bin/python3
quick=()
for arg in "$@"; do
  case $arg in
    --quick) quick=(--quick) ;;
    *) echo "usage: bench/run_all.sh [--quick]" >&2; exit 2 ;;
  esac
done
out=$here/bench/results-latest.md
part=$(mktemp)
trap 'rm -f "$part"' EXIT

# The benchmarks' own targets, and whatever bench_writer*/bench_device_stats* targets the build has.
targets=(msprobe_shim bench_stacks bench_stacks_py bench_passthrough examples msprobe_inspect)
if [ -f "$build/build.ninja" ] && ninja -C "$build" -t targets all 2>/dev/null | grep -q '^msprobe_inspect_mpi:'; then
  targets+=(msprobe_inspect_mpi)
fi
if [ -f "$build/build.ninja" ]; then
  targets+=($(ninja -C "$build" -t targets all 2>/dev/null | grep -oE '^bench_(writer|device_stats)[^:]*' | sort -u || true))
fi
echo "== building ${targets[*]} in $build" >&2
if ! MSPROBE_BUILD_DIR=$build "$here/scripts/build.sh" "${targets[@]}" >"$part" 2>&1; then
  tail -30 "$part" >&2
  echo "run_all.sh: the build failed" >&2
  exit 1
fi

{
  echo "# Benchmark results (latest run)"
  echo
  echo "- Machine: \`$(lscpu | sed -n 's/^Model name: *//p' | head -1)\`, nproc $(nproc), $(uname -sm)," \
       "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Command: \`bench/run_all.sh ${quick[*]:-}\` (build: \`$build\`, $(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2))"
  echo
} >"$out"

# run md|text "title" command...: markdown output goes in as is, plain text in a code block.
run() {
  local kind=$1 title=$2
  shift 2
  echo "== $title" >&2
  local rc=0
  "$@" >"$part" 2>"$part.err" || rc=$?
  if [ $rc -eq 0 ]; then
    if [ "$kind" = md ]; then
      { echo "## $title"; echo; cat "$part"; echo; } >>"$out"
    else
      { echo "## $title"; echo; echo '```'; cat "$part"; echo '```'; echo; } >>"$out"
    fi
  else
    { echo "## $title"; echo; echo "FAILED (exit $rc):"; echo '```'; tail -20 "$part.err"; echo '```'; echo; } >>"$out"
    failed=1
  fi
  rm -f "$part.err"
}
failed=0
run text "Call-stack capture, native frames (bench_stacks)" "$build/bench/bench_stacks" "${quick[@]}"
run text "Call-stack capture, native + Python frames (bench_stacks.py)" \
  $python "$here/bench/bench_stacks.py" "${quick[@]}" --lib "$build/bench/libbench_stacks_py.so"
run md "Pass-through and train.py (bench_passthrough.py)" \
  $python "$here/bench/bench_passthrough.py" "${quick[@]}" --build "$build"
# What capture costs per thread, the host calls per captured kernel and the steps of train.py and llm_train.py per
# task (issues 29, 41); MSPROBE_BENCH_BASELINE=OLD/lib/libmsprobe_shim.so puts the build before the change beside it.
compare=(--b "$build/lib/libmsprobe_shim.so" --build "$build" --tasks statistics,tensor,flight --workload train,llm)
if [ -n "${MSPROBE_BENCH_BASELINE:-}" ]; then compare+=(--a "$MSPROBE_BENCH_BASELINE"); fi
if [ ${#quick[@]} -gt 0 ]; then compare+=(--rounds 2 --steps 20 --llm-steps 8); fi
run md "Capture cost per thread and host calls per kernel (compare_shims.py)" \
  $python "$here/bench/compare_shims.py" "${compare[@]}"
# Written by other work in progress; they find the build through MSPROBE_BUILD_DIR.
for extra in bench_writer.py bench_device_stats.py bench_flight.py bench_graph.py bench_report.py bench_ms_naming.py; do
  if [ -f "$here/bench/$extra" ]; then
    run md "$extra" $python "$here/bench/$extra" "${quick[@]}"
  fi
done
run md "msprobe-inspect first-nan at scale (bench_first_nan.py)" $python "$here/bench/bench_first_nan.py" "${quick[@]}"
run md "msprobe-inspect first-nan at scale, an LLM step's shape (bench_first_nan.py --llm)" \
  $python "$here/bench/bench_first_nan.py" --llm --kernels 20000 "${quick[@]}"
echo "results: $out" >&2
exit $failed
