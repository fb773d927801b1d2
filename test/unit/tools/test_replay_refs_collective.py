"""replay's references of the collectives and the MC2 kernels, whose output on one rank is computed from what every member
of the communicator recorded. Hand-made dumps of several rank folders (replay_dumps.py): the members of an instance are
the kernels whose "comm" objects agree on the communicator's name and seq, ordered by their comm rank (not by folder),
and only those (two sub-communicators issuing kernels of the same name stay apart); without a "comm" object, the kernel
of the same name in every rank folder of the step. The numpy here follows HCCL's collectives and the MC2 docs
(ops-transformer mc2/*/docs): allreduce(x1 @ x2 + bias), allgather(x1) @ x2 + bias, reducescatter(x1 @ x2 + bias), each
rank's product handed to the collective in the output's dtype (bf16 here: rounded before the sum). A member missing
from the dump makes the kernel a SKIP that says which.
"""
import numpy as np

from replay_dumps import Dump, Replay, T, bf16

RNG = np.random.default_rng(5)


def comm(name, rank, size, seq):
    return {"name": name, "rank": rank, "size": size, "seq": seq}


def test_collectives_pair_by_communicator(tmp_path):
    d = Dump(tmp_path / "dump")
    # AllReduce over the world (4 folders), then in two sub-communicators {0, 2} and {1, 3} under one kernel name.
    x = [RNG.normal(size=6) for _ in range(4)]
    for r in range(4):
        d.kernel("HcclAllReduce", "world", [T(x[r]), "sum"], [T(sum(x))], rank=r, comm=comm("world", r, 4, 0))
        group = [0, 2] if r % 2 == 0 else [1, 3]
        d.kernel("HcclAllReduce", "group", [T(x[r]), "max"], [T(np.maximum(x[group[0]], x[group[1]]))], rank=r,
                 comm=comm(f"sub{r % 2}", group.index(r), 2, 0))
    # AllGather in a communicator whose comm ranks run opposite to the folders: the comm rank orders the pieces.
    y = [RNG.normal(size=3) for _ in range(4)]
    order = [3, 2, 1, 0]  # folder r is comm rank order[r]
    gathered = np.concatenate([y[order.index(c)] for c in range(4)])
    for r in range(4):
        d.kernel("HcclAllGather", "reversed", [T(y[r])], [T(gathered)], rank=r, comm=comm("rev", order[r], 4, 0))
    # ReduceScatter: comm rank c keeps share c of the sum; Broadcast from comm rank 1.
    z = [RNG.normal(size=8) for _ in range(4)]
    for r in range(4):
        d.kernel("HcclReduceScatter", "rs", [T(z[r]), "sum"], [T(sum(z)[order[r] * 2:order[r] * 2 + 2])], rank=r,
                 comm=comm("rev", order[r], 4, 1))
        d.kernel("HcclBroadcast", "bc", [T(z[r]), 1], [T(z[order.index(1)])], rank=r, comm=comm("rev", order[r], 4, 2))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(4):
        for name in ("HcclAllReduce.world.0.forward", "HcclAllReduce.group.0.forward", "HcclAllGather.reversed.0.forward",
                     "HcclReduceScatter.rs.0.forward", "HcclBroadcast.bc.0.forward"):
            r.expect_close(name, [0], rank=rank)
    assert r.returncode == 0


def test_pairing_by_name_without_comm(tmp_path):
    """Kernels without a "comm" object (older dumps, the MC2 kernels before they had one): the kernel of the same name
    in every rank folder of the step, in rank order."""
    d = Dump(tmp_path / "dump")
    y = [RNG.normal(size=3) for _ in range(3)]
    for r in range(3):
        d.kernel("HcclAllGather", "by_name", [T(y[r])], [T(np.concatenate(y))], rank=r)
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(3):
        r.expect_close("HcclAllGather.by_name.0.forward", [0], rank=rank)


def test_all_to_all_v(tmp_path):
    """Member s sends sendCounts[t] elements from sdispls[t] of its buffer to member t, which puts them at its
    rdispls[s]. The arguments as HCCL's prototype orders them: sendBuf, sendCounts, sdispls, recvCounts, rdispls."""
    n = 3
    counts = RNG.integers(0, 4, size=(n, n))  # counts[s, t]: from s to t
    send = [RNG.normal(size=counts[s].sum() + 2) for s in range(n)]  # two spare elements at the front
    sdispls = [2 + np.concatenate([[0], np.cumsum(counts[s])[:-1]]) for s in range(n)]
    d = Dump(tmp_path / "dump")
    for t in range(n):
        rcounts = counts[:, t]
        rdispls = np.concatenate([[0], np.cumsum(rcounts)[:-1]])
        recv = np.concatenate([send[s][sdispls[s][t]:sdispls[s][t] + counts[s, t]] for s in range(n)])
        d.kernel("HcclAlltoAllV", "v", [T(send[t]), [int(c) for c in counts[t]], [int(c) for c in sdispls[t]],
                                        [int(c) for c in rcounts], [int(c) for c in rdispls]],
                 [T(recv)], rank=t, comm=comm("world", t, n, 0))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for t in range(n):
        r.expect_close("HcclAlltoAllV.v.0.forward", [0], rank=t)


def test_mc2_kernels(tmp_path):
    n, m, k, cols = 2, 4, 16, 6
    x1 = [bf16(RNG.normal(size=(m, k))) for _ in range(n)]
    x2 = [bf16(RNG.normal(size=(k, cols))) for _ in range(n)]
    bias = [bf16(RNG.normal(size=cols)) for _ in range(n)]
    partial = [bf16(x1[r] @ x2[r] + bias[r]) for r in range(n)]  # each rank's product in the output's dtype
    reduced = bf16(sum(partial))
    exact = bf16(sum(x1[r] @ x2[r] + bias[r] for r in range(n)))
    assert np.any(reduced != exact)  # the rounding before the sum shows in this data
    gathered = np.concatenate(x1)
    d = Dump(tmp_path / "dump")
    for r in range(n):
        common = [T(x1[r], "BFloat16"), T(x2[r], "BFloat16"), T(bias[r], "BFloat16"), "world"]
        d.kernel("MatmulAllReduce", "comm", common + ["sum", 0, 1], [T(reduced, "BFloat16")], rank=r,
                 comm=comm("world", r, n, 0))
        d.kernel("MatmulAllReduce", "names", common + ["sum", 0, 1], [T(reduced, "BFloat16")], rank=r)
        d.kernel("MatmulAllReduce", "unrounded", common + ["sum", 0, 1], [T(exact, "BFloat16")], rank=r)
        d.kernel("MatmulReduceScatter", "rs", common + ["sum", 0, 1], [T(reduced[r * 2:r * 2 + 2], "BFloat16")],
                 rank=r, comm=comm("world", r, n, 1))
        d.kernel("AllGatherMatmul", "ag", [T(x1[r], "BFloat16"), T(x2[r], "BFloat16"), T(bias[r], "BFloat16"), "world",
                                           0, 0, 1],
                 [T(bf16(gathered @ x2[r] + bias[r]), "BFloat16"), T(gathered, "BFloat16")], rank=r,
                 comm=comm("world", r, n, 2))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(n):
        for name in ("MatmulAllReduce.comm.0.forward", "MatmulAllReduce.names.0.forward", "MatmulReduceScatter.rs.0.forward"):
            r.expect_close(name, [0], tol=0.0, rank=rank)
        r.expect_close("AllGatherMatmul.ag.0.forward", [0, 1], tol=0.0, rank=rank)
        assert r.max_abs_err("MatmulAllReduce.unrounded.0.forward", 0, rank=rank) > 0


def test_a_member_missing_from_the_dump_is_a_skip(tmp_path):
    d = Dump(tmp_path / "dump")
    x = [RNG.normal(size=4) for _ in range(3)]
    for r in range(2):  # comm rank 2's folder is not there
        d.kernel("HcclAllReduce", "partial", [T(x[r]), "sum"], [T(sum(x))], rank=r, comm=comm("world", r, 3, 5))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(2):
        assert r.status("HcclAllReduce.partial.0.forward", rank=rank) == "SKIP"
        msg = r.message("HcclAllReduce.partial.0.forward", rank=rank)
        assert "communicator world, seq 5: no kernel of comm rank(s) 2 in step 0" in msg, msg
    assert "0 compared (0 pass, 0 warning, 0 error), 2 skipped" in r.stdout


def test_rooted_collectives_and_all_to_all_as_the_shim_records_them(tmp_path):
    """The arguments as shim/hooks/hccl.cpp records them: HcclAlltoAll with its buffers only (block j of every member's
    send buffer reaches member j), HcclAlltoAllVC with this member's row and column of the count matrix (sendCounts,
    recvCounts), HcclReduce (sendBuf, op, root) whose output is at the root only, HcclScatter (sendBuf at the root only,
    root): member r receives block r of the root's buffer."""
    n = 3
    d = Dump(tmp_path / "dump")
    send = [RNG.normal(size=2 * n) for _ in range(n)]
    matrix = RNG.integers(0, 3, size=(n, n))  # matrix[s, t]: from s to t
    vc_send = [RNG.normal(size=matrix[s].sum()) for s in range(n)]
    vc_off = [np.concatenate([[0], np.cumsum(matrix[s])[:-1]]) for s in range(n)]
    x = [RNG.normal(size=5) for _ in range(n)]
    root_buf = RNG.normal(size=4 * n)
    root = 2
    for r in range(n):
        mine = np.concatenate([send[s][2 * r:2 * r + 2] for s in range(n)])
        d.kernel("HcclAlltoAll", "even", [T(send[r])], [T(mine)], rank=r, comm=comm("world", r, n, 0))
        vc_recv = np.concatenate([vc_send[s][vc_off[s][r]:vc_off[s][r] + matrix[s, r]] for s in range(n)])
        d.kernel("HcclAlltoAllVC", "vc", [T(vc_send[r]), [int(c) for c in matrix[r]], [int(c) for c in matrix[:, r]]],
                 [T(vc_recv)], rank=r, comm=comm("world", r, n, 1))
        d.kernel("HcclReduce", "max", [T(x[r]), "max", root], [T(np.maximum.reduce(x)) if r == root else None],
                 rank=r, comm=comm("world", r, n, 2))
        d.kernel("HcclScatter", "sc", [T(root_buf) if r == root else None, root], [T(root_buf[4 * r:4 * r + 4])],
                 rank=r, comm=comm("world", r, n, 3))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(n):
        for name in ("HcclAlltoAll.even.0.forward", "HcclAlltoAllVC.vc.0.forward", "HcclScatter.sc.0.forward"):
            r.expect_close(name, [0], rank=rank)
    r.expect_close("HcclReduce.max.0.forward", [0], rank=root)
    assert r.status("HcclReduce.max.0.forward", rank=0) == "SKIP"  # no output off the root: nothing to judge


def test_an_instance_is_one_op_type(tmp_path):
    """An MC2 kernel and an HCCL collective on one communicator with the same (name, seq) (a numbering that does not
    tell them apart) are still two instances: each pairs with its own op type."""
    n = 2
    d = Dump(tmp_path / "dump")
    x = [RNG.normal(size=4) for _ in range(n)]
    y = [RNG.normal(size=3) for _ in range(n)]
    for r in range(n):
        d.kernel("HcclAllReduce", "a", [T(x[r]), "sum"], [T(sum(x))], rank=r, comm=comm("world", r, n, 0))
        d.kernel("HcclAllGather", "b", [T(y[r])], [T(np.concatenate(y))], rank=r, comm=comm("world", r, n, 0))
    d.close()
    r = Replay(d.root, tmp_path / "out")
    for rank in range(n):
        r.expect_close("HcclAllReduce.a.0.forward", [0], rank=rank)
        r.expect_close("HcclAllGather.b.0.forward", [0], rank=rank)
