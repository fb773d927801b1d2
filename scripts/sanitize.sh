#!/usr/bin/env bash
# The test suites under sanitizers (issue 8), each in its own build directory next to the normal one:
#   address  ASan + UBSan build of the whole tree ($build-asan); every ctest test, the preloaded shim included
#            (the tests put the ASan runtime first in LD_PRELOAD: test/python/sanitizer_preload.py)
#   thread   TSan build ($build-tsan) of the collector's concurrency tests (collector_concurrency and
#            collector_writer: many producers, writer threads, flushes, close), and the Python frame walk
#            (test_stacks_python.py: captures with the GIL released from several threads while others run Python)
# Usage: scripts/sanitize.sh [address] [thread]   (default both). Extra ctest arguments: MSPROBE_SANITIZE_CTEST_ARGS.
# The last lines are ctest's own summary of each stage.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
base=${MSPROBE_BUILD_DIR:-$here/build}
stages=("$@")
if [ ${#stages[@]} -eq 0 ]; then stages=(address thread); fi
read -r -a ctest_args <<<"${MSPROBE_SANITIZE_CTEST_ARGS:-}"

# Any report fails the test; no leak check (python and host frameworks leak at exit on purpose); SIGSEGV, SIGBUS
# and SIGFPE keep their normal meaning (the stand-in's device memory faults on purpose; crash tests expect signals).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1:abort_on_error=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:detect_odr_violation=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

status=0
summaries=()
for stage in "${stages[@]}"; do
  case $stage in
    address) build=$base-asan sanitize=address,undefined targets=() labels=() ;;
    thread) build=$base-tsan sanitize=thread targets=(collector_concurrency collector_writer stacks_pytest)
            labels=(-R '^(collector_concurrency|collector_writer)$') ;;
    *) echo "sanitize.sh: unknown stage $stage (address, thread)" >&2; exit 2 ;;
  esac
  echo "sanitize: $stage ($sanitize) in $build"
  cmake -S "$here" -B "$build" -G Ninja -DMSPROBE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMSPROBE_SANITIZE="$sanitize" >/dev/null
  ninja -C "$build" "${targets[@]}"
  log=$build/ctest-$stage.log
  # ctest -j2: the CI machine has two cores; the timeout is generous because instrumented runs are ~2-3x slower.
  if (cd "$build" && ctest --output-on-failure --timeout 1800 -j2 "${labels[@]}" "${ctest_args[@]}") 2>&1 | tee "$log"; then
    :
  else
    status=1
  fi
  summaries+=("[$stage] $(grep -E 'tests passed|tests failed' "$log" | tail -1)")
  if [ "$stage" = thread ]; then
    # The instrumented library is loaded by ctypes into pytest's own python3, so the TSan runtime is preloaded into
    # that process (ctest's pytest tests cannot). Left out: test_thread_holding_the_gil, whose worker threads used
    # libunwind; at their exit libunwind's (uninstrumented) per-thread cache destructor crashes inside TSan's
    # runtime, unrelated to the code under test.
    if (cd "$build" && LD_PRELOAD="$(${CXX:-c++} -print-file-name=libtsan.so)" MSPROBE_BUILD_DIR="$build" \
        PYTHONPATH="$here/test/python" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        "$here/test/unit/shim/stacks/test_stacks_python.py" -k "not thread_holding") 2>&1 | tee "$build/pytest-stacks.log"; then
      :
    else
      status=1
    fi
    summaries+=("[thread] test_stacks_python.py: $(tail -1 "$build/pytest-stacks.log")")
  fi
done
echo
echo "sanitize: summary"
printf '  %s\n' "${summaries[@]}"
exit $status
