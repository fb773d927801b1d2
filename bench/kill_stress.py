#!/usr/bin/env python3
"""The long variant of test/integration/crash/test_shim_kill_stress.py: many SIGKILLs of examples/train.py at random
moments, each followed by `msprobe-inspect repair` and the checks of test/integration/kill_stress.py. Not in CI.

    /usr/bin/python3 bench/kill_stress.py [--kills 200] [--seed N] [--build build] [--keep-failed]

Prints one line per kill and a summary; exit status 1 when any repaired dump failed a check (each failure names
the seed and the kill, kept on disk with --keep-failed). Record the summary in bench/RESULTS.md.
"""
import argparse
import os
import platform
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--keep-failed", action="store_true", help="keep the folders of failed kills")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ.setdefault("MSPROBE_BUILD_DIR", build)
    os.environ.setdefault("MSPROBE_SOURCE_DIR", SOURCE)
    os.environ.setdefault("ASCEND_HOME_PATH", os.path.join(build, "fake_cann"))
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")])
    sys.path[:0] = [os.path.join(SOURCE, "test", "integration", "crash"), os.path.join(SOURCE, "test", "python")]
    import kill_stress  # noqa: E402 - needs the paths above

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"kill_stress: {args.kills} kills, seed {seed}, {platform.machine()}, {os.cpu_count()} cpus", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kill_stress.") as base:
        failures, total = kill_stress.run_kills(args.kills, seed, base, keep_failed=args.keep_failed,
                                                log=lambda s: print(s, flush=True))
        if failures and args.keep_failed:
            kept = tempfile.mkdtemp(prefix="kill_stress_failed.")
            os.rename(base, kept)
            os.makedirs(base)
            print(f"failed kills kept under {kept}")
    elapsed = time.monotonic() - t0
    print(f"\nsummary: {total['kills']} kills in {elapsed:.0f} s, seed {seed}: {len(failures)} failed")
    print(f"  killed before any kernel was written: {total['no_dump']}")
    print(f"  folders {total['folders']}, kernels {total['kernels']}, tensors checked {total['tensors']}")
    print(f"  repair: dump.json closed {total['dump_repaired']}, construct.json rebuilt {total['construct_rebuilt']} "
          f"(one kernel behind dump.json: {total['construct_behind']}), stack.json filtered {total['stack_filtered']}, "
          f"stack.json missing {total['stack_missing']}, kills with tensor files of unwritten kernels set aside "
          f"{total['files_removed']}, empty folders removed {total['folders_removed']}")
    for f in failures:
        print("\n" + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
