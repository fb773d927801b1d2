"""Starts a script once per rank, as torchrun or msrun would, and merges what the ranks print."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def launch_ranks(script, argv, ranks, timeout, rank_table=False):
    """Runs `script argv` in `ranks` processes (RANK_ID=r, RANK_SIZE, the HCCL root-info file; with rank_table a
    RANK_TABLE_FILE too) and waits for all, stopping the rest when one fails or `timeout` seconds pass. Then prints each
    rank's stdout lines prefixed with `[rank r] `, rank by rank. Returns the exit status: 0 when every rank
    succeeded."""
    tmp = tempfile.mkdtemp(prefix="tiny_npu_hccl_")
    procs, outputs, readers = [], [], []
    failed, killed = False, set()
    try:
        table = None
        if rank_table:  # as MindSpore's RANK_TABLE_FILE launch gives one
            from tiny_npu.distributed import write_rank_table
            table = os.path.join(tmp, "rank_table.json")
            write_rank_table(table, ranks)
        for r in range(ranks):
            env = dict(os.environ, RANK_ID=str(r), RANK_SIZE=str(ranks),
                       TINY_NPU_HCCL_ROOT_INFO=os.path.join(tmp, "root_info"))
            if table:
                env["RANK_TABLE_FILE"] = table
            p = subprocess.Popen([sys.executable, os.path.abspath(script)] + list(argv), env=env,
                                 stdout=subprocess.PIPE, text=True)
            procs.append(p)
            outputs.append([])
            t = threading.Thread(target=lambda p=p, out=outputs[-1]: out.extend(p.stdout), daemon=True)
            t.start()
            readers.append(t)
        deadline = time.monotonic() + timeout
        while True:
            codes = [p.poll() for p in procs]  # poll every rank: a failed one must stop the rest
            if all(c is not None for c in codes):
                break
            timed_out = time.monotonic() > deadline
            if not failed and (timed_out or any(c not in (None, 0) for c in codes)):
                if timed_out:
                    print(f"ranks did not finish within {timeout:g} s", file=sys.stderr)
                failed = True
                for r, p in enumerate(procs):
                    if p.poll() is None:
                        p.kill()
                        killed.add(r)
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.poll() is None:  # the launcher itself is being interrupted
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    for t in readers:
        t.join(timeout=5)
    for r, (p, lines) in enumerate(zip(procs, outputs)):
        for line in lines:
            sys.stdout.write(f"[rank {r}] {line}")
        if r in killed:
            print(f"rank {r} stopped by the launcher", file=sys.stderr)
        elif p.returncode != 0:
            failed = True
            print(f"rank {r} failed with exit status {p.returncode}", file=sys.stderr)
    return 1 if failed else 0
