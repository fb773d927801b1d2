#!/usr/bin/env python3
"""Writes a synthetic multi-rank statistics dump, as the shim writes one (step{S}/rank{R}/dump.json, stack.json,
construct.json), with planted non-finite values whose spread through the collectives is simulated, for
msprobe-inspect first-nan's benchmark (bench/bench_first_nan.py) and tests.

    python3 bench/gen_multirank.py OUT --ranks 256 --kernels 6000 [--steps 1] [--group 8] [--every 12]
                                   [--world-every 4] [--origin R:S:K[:nan|inf]] ... [--overflow S:K] [--mask N]
                                   [--groups-only | --across] [--clock R:NS] [--llm] [--rooted S:K:KIND:ROOT]
                                   [--jobs N]

Every rank runs the same program (SPMD): per step, kernels 0..K-1, of which every `--every`-th is an
HcclAllReduce; the collectives alternate between the rank's data-parallel group (consecutive ranks, `--group` per
group, communicator "dp{g}") and, every `--world-every`-th, all ranks ("world"); `--groups-only` leaves the world
out; `--across` puts in its place a collective across the groups among the ranks with the same place in their group
(communicators "x{place}"), as examples/train.py --groups does. Each collective entry carries the "comm" object
(docs/format.md). Launch indexes count on across steps; time stamps step with them, the same on every rank but for
`--clock R:NS`, which moves rank R's by NS nanoseconds (may be negative: the clocks of different nodes, or a rank
that launched ahead of the others).

`--llm` shapes the step as an LLM's (examples/llm_train.py with --moe, tensor- and expert-parallel in each group):
the compute kernels are a decoder layer's aclnn ops, and the group collectives alternate between the output
projection's MC2 kernel (MatmulAllReduce, an aclnn op with a "comm" object) and the experts' HcclAlltoAllV, on the
group's communicator "tp{g}"; the collectives over all ranks stay gradient HcclAllReduce's. `--rooted S:K:KIND:ROOT`
makes the collective at kernel K of step S rooted: `reduce` (HcclReduce: every member's input, output only at comm
rank ROOT, null elsewhere) or `scatter` (HcclScatter: input only at ROOT, null elsewhere; every member's output).

Planted values (all finite otherwise):
- `--origin R:S:K[:kind]`: compute kernel K of step S on rank R writes NaN (`nan`, default) or +Inf (`inf`) from
  finite inputs; repeat for several (concurrent) origins.
- `--overflow S:K`: the collective at kernel K of step S (K must be a collective) overflows on every member of its
  communicator: finite inputs everywhere, +Inf outputs (a reduction leaving the range).
- `--mask N`: every N-th compute kernel writes -Inf (an attention mask) from finite inputs; the next kernel reads it
  and writes finite values (the mask does not spread).
A rank that holds non-finite values feeds them to every later kernel and collective; a collective with a non-finite
input makes every member's output non-finite. The planted origin that comes first causally is first-nan's answer;
the script prints every rank's first anomalous kernel as JSON on stdout (`--truth`).
"""
import argparse
import json
import multiprocessing
import os
import sys

CLEAN_IN = '{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [64, 64], "Max": %s, "Min": -%s, ' \
           '"Mean": 0.0%d, "Norm": 4%d.5}'
NAN_T = '{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [64, 64], "Max": NaN, "Min": NaN, ' \
        '"Mean": NaN, "Norm": NaN}'
INF_T = '{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [64, 64], "Max": Infinity, "Min": -1.25, ' \
        '"Mean": Infinity, "Norm": Infinity}'
MASK_T = '{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [64, 64], "Max": 0.0, "Min": -Infinity, ' \
         '"Mean": -Infinity, "Norm": Infinity}'
OPS = ["Matmul", "Add", "Gelu", "LayerNorm", "Mul", "Softmax"]
LLM_OPS = ["RmsNorm", "Matmul", "RotaryPositionEmbedding", "FlashAttentionScore", "MoeGatingTopKSoftmaxV2",
           "MoeInitRoutingV2", "GroupedMatmulV5", "SwiGlu", "MoeFinalizeRoutingV2"]
LLM_SCOPE = "main_train_Decoder_forward_Layer%d_forward_MoeExpertParallelWithTensorParallelAttention_forward"


def clean(i):
    return CLEAN_IN % ("1.%d" % (i % 97), "0.%d" % (i % 89 + 10), i % 10, i % 10)


class Program:
    """The kernels every rank runs, and where the planted values go."""

    def __init__(self, a):
        self.a = a
        self.ranks, self.K, self.steps = a.ranks, a.kernels, a.steps
        self.groups = max(1, self.ranks // a.group)
        self.group_of = [min(r // a.group, self.groups - 1) for r in range(self.ranks)]
        self.members = [[m for m in range(self.ranks) if self.group_of[m] == g] for g in range(self.groups)]
        self.world = list(range(self.ranks))
        places = max(len(m) for m in self.members)
        self.across = [[m[i] for m in self.members if i < len(m)] for i in range(places)]
        self.per_step = {"world": 0, "dp": 0}
        for i in range(self.K):
            j = self.collective(i)
            if j is not None:
                self.per_step["world" if self.is_world(j) else "dp"] += 1

    def collective(self, i):
        """None for a compute kernel, else the index j of the collective within the step."""
        return i // self.a.every if i % self.a.every == self.a.every - 1 else None

    def is_world(self, j):
        return not self.a.groups_only and j % self.a.world_every == self.a.world_every - 1

    def comm(self, r, j):
        """(name, comm rank, members) of the j-th collective of rank r's step."""
        if self.is_world(j) and self.a.across:
            i = self.members[self.group_of[r]].index(r)
            return "x%d" % i, self.across[i].index(r), self.across[i]
        if self.is_world(j):
            return "world", r, self.world
        g = self.group_of[r]
        return ("tp%d" if self.a.llm else "dp%d") % g, self.members[g].index(r), self.members[g]

    def collective_op(self, j):
        """(op type, scope) of the j-th collective of a step."""
        if self.a.llm and not self.is_world(j):
            return ("MatmulAllReduce", "matmul_all_reduce") if j % 2 == 0 else ("HcclAlltoAllV", "all_to_all_v")
        return "HcclAllReduce", "average_gradients"


def simulate(p, origins, overflows):
    """tainted[r]: the launch index from which rank r's outputs are non-finite (None: never); kind[r]."""
    total = p.K * p.steps
    tainted = [None] * p.ranks
    how = [None] * p.ranks
    origin_at = {}
    for (r, s, k, kind) in origins:
        origin_at.setdefault(s * p.K + k, []).append((r, kind))
    for L in range(total):
        i = L % p.K
        j = p.collective(i)
        for (r, kind) in origin_at.get(L, []):
            if j is None and tainted[r] is None:
                tainted[r], how[r] = L, kind
        if j is None:
            continue
        kind, root = p.a.rooted.get((L // p.K, i), (None, None))
        for members in ((p.across if p.a.across else [p.world]) if p.is_world(j) else p.members):
            overflow = (L // p.K, i) in overflows
            senders = [members[root]] if kind == "scatter" else members
            if overflow or any(tainted[m] is not None and tainted[m] < L for m in senders):
                for m in ([members[root]] if kind == "reduce" else members):
                    if tainted[m] is None:
                        tainted[m], how[m] = L, "inf" if overflow else "nan"
    return tainted, how


def write_rank(args):
    a, r, tainted, how = args
    p = Program(a)
    seq_base = {}
    for s in range(p.steps):
        folder = os.path.join(a.out, "step%d" % s, "rank%d" % r)
        os.makedirs(folder, exist_ok=True)
        names, lines, counts = [], [], {}
        for i in range(p.K):
            L = s * p.K + i
            t = tainted[r]
            bad_in = t is not None and t < L
            bad_out = t is not None and t <= L
            out_t = NAN_T if bad_in or how[r] != "inf" else INF_T
            j = p.collective(i)
            ts = 1733900000000000 + L * 25 + (r * 7) % 11 + a.clock.get(r, 0)
            launch = '"launch": {"index": %d, "task_id": %d, "stream_id": 0, "timestamp": %d}' % (L, L, ts)
            if j is None:
                ops = LLM_OPS if a.llm else OPS
                op = ops[i % len(ops)]
                scope = (LLM_SCOPE if a.llm else "main_train_Model_forward_layer%d") % (i // len(ops) % 50)
                key = (op, scope)
                n = counts.get(key, 0)
                counts[key] = n + 1
                name = "%s.%s.%d.forward" % (op, scope, n)
                mask = a.mask and i % a.mask == 0 and not bad_in
                after_mask = a.mask and i % a.mask == 1 and not bad_in
                inp = NAN_T if bad_in else (MASK_T if after_mask else clean(i))
                out = out_t if bad_out else (MASK_T if mask else clean(i + 1))
                entry = '"input_args": [%s, %s], "output": [%s], %s' % (inp, clean(i + 3) if not bad_in else NAN_T,
                                                                          out, launch)
            else:
                cname, crank, members = p.comm(r, j)
                rooted, root = a.rooted.get((s, i), (None, None))
                op, what = ("HcclReduce", "reduce") if rooted == "reduce" else \
                    ("HcclScatter", "scatter") if rooted == "scatter" else p.collective_op(j)
                scope = (LLM_SCOPE % (i // len(LLM_OPS) % 50) if a.llm else "main_train") + "_" + what
                n = counts.get((op, scope), 0)
                counts[(op, scope)] = n + 1
                name = "%s.%s.%d.forward" % (op, scope, n)
                kind = "world" if p.is_world(j) else "dp"
                seq = s * p.per_step[kind] + seq_base.get((s, kind), 0)
                seq_base[(s, kind)] = seq_base.get((s, kind), 0) + 1
                inp = "null" if rooted == "scatter" and crank != root else NAN_T if bad_in else clean(i)
                out = "null" if rooted == "reduce" and crank != root else out_t if bad_out else clean(i + 1)
                if op.startswith("Matmul"):
                    inp += ", " + (NAN_T if bad_in else clean(i + 5))  # x and the weight
                comm = '"comm": {"name": "%s", "rank": %d, "size": %d, "ranks": [%s], "seq": %d%s}' % (
                    cname, crank, len(members), ", ".join(map(str, members)), seq,
                    "" if rooted is None else ', "root": %d' % root)
                entry = '"input_args": [%s, {"type": "str", "value": "sum", "name": "op"}], "output": [%s], %s, %s' \
                        % (inp, out, launch, comm)
            names.append(name)
            lines.append('"%s": {%s}' % (name, entry))
        with open(os.path.join(folder, "dump.json"), "w") as f:
            f.write('{"task": "statistics", "level": "L2", "framework": "mindspore", "host_framework": "acl", '
                    '"dump_data_dir": null, "data": {\n')
            f.write(",\n".join(lines))
            f.write("\n}}\n")
        hccl = [n for n in names if n.startswith(("Hccl", "MatmulAllReduce"))]
        compute = [n for n in names if not n.startswith(("Hccl", "MatmulAllReduce"))]
        stacks = {"0": [compute, ['File "train.py", line 120, in forward', 'File "train.py", line 200, in main']],
                  "1": [hccl, ['File "distributed.py", line 80, in all_reduce', 'File "train.py", line 190, in main']]}
        with open(os.path.join(folder, "stack.json"), "w") as f:
            json.dump(stacks, f)
        with open(os.path.join(folder, "construct.json"), "w") as f:
            f.write("{" + ", ".join('"%s": null' % n for n in names) + "}\n")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=200, help="kernels per rank and step")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--group", type=int, default=4, help="ranks per data-parallel group")
    ap.add_argument("--every", type=int, default=12, help="every N-th kernel is a collective")
    ap.add_argument("--world-every", type=int, default=4, help="every N-th collective is over all ranks")
    ap.add_argument("--groups-only", action="store_true", help="no collective over all ranks")
    ap.add_argument("--across", action="store_true",
                    help="collectives across the groups (same place in the group) in place of those over all ranks")
    ap.add_argument("--clock", action="append", default=[], metavar="R:NS",
                    help="move rank R's time stamps by NS nanoseconds")
    ap.add_argument("--origin", action="append", default=[], metavar="R:S:K[:nan|inf]")
    ap.add_argument("--overflow", action="append", default=[], metavar="S:K")
    ap.add_argument("--mask", type=int, default=0, metavar="N")
    ap.add_argument("--llm", action="store_true", help="an LLM's step: MC2 and all-to-all kernels in every group")
    ap.add_argument("--rooted", action="append", default=[], metavar="S:K:reduce|scatter:ROOT")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--truth", action="store_true", help="print each rank's first anomaly (launch index) as JSON")
    a = ap.parse_args()
    if a.groups_only and a.across:
        ap.error("--groups-only and --across: choose one")
    a.clock = {int(r): int(ns) for r, ns in (c.split(":") for c in a.clock)}
    origins = []
    for o in a.origin:
        parts = o.split(":")
        origins.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else "nan"))
    rooted = {}
    for o in a.rooted:
        s, k, kind, root = o.split(":")
        if kind not in ("reduce", "scatter"):
            ap.error(f"--rooted {o}: the kind is reduce or scatter")
        rooted[(int(s), int(k))] = (kind, int(root))
    a.rooted = rooted
    overflows = set()
    for o in a.overflow:
        s, k = map(int, o.split(":"))
        overflows.add((s, k))
    p = Program(a)
    for (r, s, k, _) in origins:
        if p.collective(k) is not None:
            sys.exit(f"--origin {r}:{s}:{k}: kernel {k} is a collective")
    for (s, k), (_, root) in a.rooted.items():
        if p.collective(k) is None or p.is_world(p.collective(k)) or not 0 <= root < min(map(len, p.members)):
            sys.exit(f"--rooted {s}:{k}: kernel {k} is no group collective, or {root} no comm rank of every group")
    tainted, how = simulate(p, origins, overflows)
    jobs = [(a, r, tainted, how) for r in range(a.ranks)]
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs) as pool:
            for _ in pool.imap_unordered(write_rank, jobs, chunksize=4):
                pass
    else:
        for j in jobs:
            write_rank(j)
    if a.truth:
        json.dump({"tainted": tainted}, sys.stdout)
        print()


if __name__ == "__main__":
    main()
