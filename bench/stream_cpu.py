"""The stand-in's stream workers' busy time, read from /proc: each stream runs its tasks on one worker thread named
fake_stream<N> (test/fake_cann/src/runtime/streams.cpp), whose CPU time is the time that stream was busy. Used by
compare_shims.py (around a workload's steps, from outside) and bench_writer_workload.py (around its launch loop, from
inside)."""
import os

STREAM_THREAD = "fake_stream"


def thread_cpu_ns(pid="self"):
    """{tid: (name, CPU ns)} of a live process's threads (schedstat's run time; stat's ticks where it is absent)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except FileNotFoundError:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    utime, stime = f.read().rsplit(")", 1)[1].split()[11:13]
                ns = (int(utime) + int(stime)) * 10**9 // os.sysconf("SC_CLK_TCK")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended between the listing and the read
        out[tid] = (name, ns)
    return out


def any_stream(threads):
    """Whether a thread_cpu_ns sample holds a stream worker (none once the host has destroyed its streams)."""
    return any(name.startswith(STREAM_THREAD) for name, _ in threads.values())


def stream_busy_ns(first, last):
    """(the compute stream's, the other streams' together) CPU ns between two thread_cpu_ns samples of one process,
    stream workers only; the compute stream is the busiest of them (a worker born in between counts from zero, one
    ended in between is lost: the samples bound a steady state)."""
    busy = sorted(((ns - first.get(tid, ("", 0))[1], name) for tid, (name, ns) in last.items()
                   if name.startswith(STREAM_THREAD)), reverse=True)
    if not busy:
        raise RuntimeError(f"no {STREAM_THREAD}<N> thread: is the stand-in older than its named stream workers?")
    return busy[0][0], sum(ns for ns, _ in busy[1:])
