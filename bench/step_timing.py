"""Runs a workload that prints one line per step and times it from those lines (shared by the bench_*.py drivers).

The step time is the time from the first to the last line / (lines - 1): start-up and the first step excluded.
Set PYTHONUNBUFFERED=1 in `env` for a Python workload, so that each line arrives when it is printed.
"""
import os
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass
class TimedRun:
    step_s: float   # seconds per step
    stdout: str
    stderr: str
    max_rss: int    # peak resident set of the process, bytes


def run_timed(cmd, env, cwd, what):
    """Runs `cmd`; exits the benchmark with its stderr when it fails (`what` names it in the message)."""
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamps, lines = [], []
    for line in p.stdout:
        stamps.append(time.perf_counter())
        lines.append(line)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{what} failed:\n{err}")
    per_step = (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1) if stamps else 0.0
    return TimedRun(per_step, "".join(lines), err, usage.ru_maxrss * 1024)
