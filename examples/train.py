#!/usr/bin/env python3
"""Trains a tiny model with tiny_npu on synthetic data and prints `step {i} loss {value:.6f}`.

    Embedding -> LayerNorm -> Linear -> Gelu -> Linear -> [Cast to fp32] -> Softmax -> MseLoss

    python3 examples/train.py [--steps 5] [--dtype fp32|fp16|bf16] [--ranks N [--groups G | --chain]]
                              [--mark-steps] [--nan-at STEP --nan-rank R [--nan-kind data|kernel]]

With --ranks N the script starts N copies of itself (RANK_ID=r, device r) that average their
gradients with HCCL; every rank prints the loss averaged over the ranks, and the launcher prints each
rank's lines prefixed with `[rank r] `. Exits nonzero if any rank fails.

How the gradients are averaged:
- default: one all-reduce over a communicator of all ranks (HcclCommInitRootInfo);
- --groups G: hierarchical data parallelism over sub-communicators of a rank-table communicator
  (HcclCommInitClusterInfo, then HcclCreateSubCommConfig): an all-reduce inside each of G groups of N/G
  consecutive ranks, then one across the groups among the ranks with the same place in their group;
- --chain: a chain of point-to-point transfers, rank r receiving the partial sum from r-1 (HcclRecv),
  adding its own and passing it to r+1 (HcclSend); the last rank broadcasts the total (HcclBroadcast).
The loss is averaged over all ranks with an all-reduce in every mode.

Test seams (planted bugs): --overflow-at scales an activation to inf on every rank; --nan-at STEP --nan-rank R
makes one rank's kernel non-finite at one step: --nan-kind data (default) multiplies the first layer's activation
by 3e38, so that its float32 result overflows (a correct kernel, values out of range); --nan-kind kernel has the
stand-in's Gelu write a NaN into its output (FAKE_CANN_NAN_OP: a wrong kernel, its inputs and its CPU reference
finite).
"""
import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiny_npu  # noqa: E402
from tiny_npu import nn  # noqa: E402
from tiny_npu.launcher import launch_ranks  # noqa: E402
from tiny_npu.optim import AdamW  # noqa: E402

# Width 64: small enough to run in a second on the CPU stand-in, wide enough that a tensor holds more than a
# handful of values (most hold 256 to 8,192 bytes), as in a real model.
VOCAB, HIDDEN, FFN, CLASSES = 16, 64, 128, 8
BATCH, SEQ = 4, 8


def set_width(hidden):
    """--hidden: a wider model (realistic tensor sizes) with the same layers and data."""
    global HIDDEN, FFN
    HIDDEN, FFN = hidden, 2 * hidden


class TinyModel(nn.Module):
    def __init__(self, rng, dtype):
        self.embed = nn.Embedding(VOCAB, HIDDEN, rng, dtype)
        self.norm = nn.LayerNorm(HIDDEN, dtype)
        self.fc1 = nn.Linear(HIDDEN, FFN, rng, dtype)
        self.act = nn.Gelu()
        self.fc2 = nn.Linear(FFN, CLASSES, rng, dtype)
        self.to_fp32 = nn.Cast(tiny_npu.float32)  # softmax and loss in fp32, as autocast does
        self.softmax = nn.Softmax(-1)
        self.loss = nn.MseLoss(tiny_npu.float32)

    def forward(self, tokens, target, plant_overflow=False, plant_nan=None):
        x = self.embed(tokens)
        x = self.norm(x)
        h = self.fc1(x)
        if plant_overflow:
            h = self.blow_up(h)
        if plant_nan == "data":
            h = self.scale_out_of_range(h)
        if plant_nan == "kernel":  # the stand-in's planted fault, read at phase 1: this one Gelu writes a NaN
            os.environ["FAKE_CANN_NAN_OP"] = "Gelu"
        try:
            x = self.act(h)  # the same call either way: the kernel's name does not change
        finally:
            os.environ.pop("FAKE_CANN_NAN_OP", None)
        x = self.fc2(x)
        probs = self.softmax(self.to_fp32(x))
        return self.loss(probs, target)

    def blow_up(self, h):
        """A planted precision bug (--overflow-at): one activation scaled to inf, as a real overflow would."""
        return tiny_npu.ops.muls(h, float("inf"))

    def scale_out_of_range(self, h):
        """--nan-kind data: finite inputs whose product leaves float32's range (a Muls by 3e38)."""
        return tiny_npu.ops.muls(h, 3.0e38)


    def backward(self):
        g = self.loss.backward()
        g = self.softmax.backward(g)
        g = self.to_fp32.backward(g)
        g = self.fc2.backward(g)
        g = self.act.backward(g)
        g = self.fc1.backward(g)
        g = self.norm.backward(g)
        self.embed.backward(g)


def synthetic_batch(rng):
    """Tokens and a target distribution that depends on them (so there is something to learn)."""
    tokens = rng.randint(0, VOCAB, size=BATCH * SEQ).astype(np.int64)
    target = np.zeros((BATCH * SEQ, CLASSES), dtype=np.float32)
    target[np.arange(BATCH * SEQ), tokens % CLASSES] = 1.0
    return tokens, target


def step_marker():
    """The capture shim's step marker, when the shim is loaded into this process."""
    here = ctypes.CDLL(None)
    if hasattr(here, "msprobe_shim_step"):
        fn = here.msprobe_shim_step
        fn.restype = None
        return fn
    return None


class Averaging:
    """How gradients and the loss are averaged over the ranks (see the module's docstring)."""

    def __init__(self, args, rank, world_size):
        from tiny_npu.distributed import ProcessGroup
        self.rank, self.world_size, self.chain = rank, world_size, args.chain
        table = os.environ.get("RANK_TABLE_FILE")
        self.world = ProcessGroup.from_rank_table(table, rank) if table else ProcessGroup(rank, world_size)
        self.groups = []
        if args.groups > 1:
            size = world_size // args.groups
            # Every rank takes part in every split (the ranks outside one pass no rank list), in the same order.
            inner = [self.world.split(range(g * size, (g + 1) * size), g) for g in range(args.groups)]
            across = [self.world.split(range(i, world_size, size), 100 + i) for i in range(size)]
            self.groups = [next(c for c in inner if c), next(c for c in across if c)]

    def gradients(self, params):
        n = self.world_size
        for p in params:
            g = p.grad
            if g is None:
                continue
            if self.chain:
                if self.rank > 0:
                    partial = tiny_npu.Tensor.empty(g.shape, g.dtype)
                    self.world.recv(partial, self.rank - 1)
                    tiny_npu.ops.inplace_add(g, partial)
                if self.rank < n - 1:
                    self.world.send(g, self.rank + 1)
                self.world.broadcast(g, n - 1)
            elif self.groups:
                for c in self.groups:
                    c.all_reduce(g)
            else:
                self.world.all_reduce(g)
            tiny_npu.ops.muls(g, 1.0 / n, out=g)

    def loss(self, t):
        return self.world.average(t)

    def destroy(self):
        for c in self.groups + [self.world]:
            c.destroy()


def train(args, rank, world_size):
    rt = tiny_npu.init(device=rank)
    dtype = tiny_npu.DTYPES[args.dtype]
    group = Averaging(args, rank, world_size) if world_size > 1 else None

    model = TinyModel(np.random.RandomState(args.seed), dtype)  # same initial weights on every rank
    opt = AdamW(model.parameters(), lr=args.lr)
    data_rng = np.random.RandomState(args.seed + 1000 * (rank + 1))  # each rank its own shard
    marker = step_marker() if args.mark_steps else None

    losses = []
    for i in range(args.steps):
        tokens, target = synthetic_batch(data_rng)
        plant_nan = args.nan_kind if (i == args.nan_at and rank == args.nan_rank) else None
        loss = model.forward(tiny_npu.Tensor.from_numpy(tokens), tiny_npu.Tensor.from_numpy(target),
                             plant_overflow=(i == args.overflow_at), plant_nan=plant_nan)
        model.backward()
        if group is not None:
            group.gradients(model.parameters())
            loss = group.loss(loss)
        opt.step()
        losses.append(loss.item())
        print(f"step {i} loss {losses[-1]:.6f}", flush=True)
        opt.zero_grad()
        if marker is not None:
            marker()
    if group is not None:
        group.destroy()
    rt.synchronize()
    if args.dump:
        path = args.dump.replace("{rank}", str(rank))
        np.savez(path, losses=np.array(losses, dtype=np.float64),
                 **{name: p.numpy() for name, p in model.named_parameters()})
    stats = rt.executor_cache
    if stats is not None and args.verbose:
        print(f"executor cache: {stats.hits} hits, {stats.misses} misses", file=sys.stderr)
    tiny_npu.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--dtype", choices=sorted(tiny_npu.DTYPES), default="fp32")
    ap.add_argument("--ranks", type=int, default=1, help="number of rank processes (HCCL data parallel)")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mark-steps", action="store_true",
                    help="call msprobe_shim_step() at the end of each step when the shim is loaded")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before the launcher gives up on ranks")
    ap.add_argument("--dump", metavar="PATH",
                    help="save the exact losses and final parameters to PATH (.npz; {rank} is replaced)")
    ap.add_argument("--overflow-at", type=int, default=-1, metavar="STEP",
                    help="plant an overflow: scale the first layer's activation to inf at this step (a Muls kernel)")
    ap.add_argument("--groups", type=int, default=1, metavar="G",
                    help="hierarchical data parallelism: all-reduce inside G groups of ranks, then across them")
    ap.add_argument("--chain", action="store_true",
                    help="sum the gradients along a send/recv chain of the ranks, then broadcast from the last")
    ap.add_argument("--nan-at", type=int, default=-1, metavar="STEP",
                    help="plant a non-finite value in one rank's kernel at this step (with --nan-rank)")
    ap.add_argument("--nan-rank", type=int, default=0, metavar="R", help="the rank of --nan-at (default 0)")
    ap.add_argument("--nan-kind", choices=["data", "kernel"], default="data",
                    help="data: a Muls whose float32 result overflows; kernel: a Gelu that writes a NaN")
    ap.add_argument("--hidden", type=int, default=HIDDEN,
                    help=f"model width (default {HIDDEN}; the feed-forward layer is twice as wide)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.hidden < 1:
        ap.error(f"--hidden must be at least 1, not {args.hidden}")
    if args.groups < 1 or args.ranks % args.groups != 0:
        ap.error(f"--groups must divide --ranks ({args.ranks}), not {args.groups}")
    if args.chain and args.groups > 1:
        ap.error("--chain and --groups are two ways to average: choose one")
    set_width(args.hidden)

    if args.ranks > 1 and "RANK_ID" not in os.environ:
        return launch_ranks(__file__, sys.argv[1:], args.ranks, args.timeout, rank_table=args.groups > 1 or args.chain)
    rank = int(os.environ.get("RANK_ID", "0"))
    world_size = int(os.environ.get("RANK_SIZE", str(args.ranks)))
    train(args, rank, world_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
