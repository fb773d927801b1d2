#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz with clang (ASan + UBSan) and runs each one from its committed seed
# corpus for MSPROBE_FUZZ_SECONDS (default 20: CI's smoke run; give 600 for a real session).
# Usage: scripts/fuzz.sh [target...]      (default: every target)
# New interesting inputs go to $build/fuzz/corpus/<target>/, never into the committed corpus; a crash leaves
# $build/fuzz/artifacts/<target>/crash-* and fails the script.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_FUZZ_BUILD_DIR:-$here/build-fuzz}
seconds=${MSPROBE_FUZZ_SECONDS:-20}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_config fuzz_names fuzz_prototype fuzz_npy fuzz_dump_readers fuzz_graph_dump)
fi

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMSPROBE_FUZZ=ON \
  -DMSPROBE_WERROR=ON -DMSPROBE_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Seeds kept elsewhere in the tree, read as they are (never written): the parser's test headers.
declare -A seeds=([fuzz_prototype]="$here/test/unit/shim/aclnn/fixtures/aclnnop $here/test/unit/shim/aclnn/fixtures/cann_shapes")
failed=()
for t in "${targets[@]}"; do
  work=$build/fuzz/corpus/$t artifacts=$build/fuzz/artifacts/$t
  mkdir -p "$work" "$artifacts"
  echo "fuzz: $t for ${seconds}s"
  # -rss_limit_mb/-malloc_limit_mb: an input that makes a reader allocate without bound is a finding too.
  if "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$here/test/fuzz/corpus/$t" ${seeds[$t]:-} \
      >"$build/fuzz/$t.log" 2>&1; then
    echo "fuzz: $t ok: $(grep -E '^stat::number_of_executed_units' "$build/fuzz/$t.log" | awk '{print $2}') runs"
  else
    echo "fuzz: $t FAILED (log $build/fuzz/$t.log):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$build/fuzz/$t.log" | head -20 || true
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, no finding"
